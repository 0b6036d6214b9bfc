"""The hooks (yuxi_dash.alerts.hooks): after an attach scan, sending nothing, failures kept quiet."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest
import sqlalchemy as sa

from tests.alerts.builders import add_rule, put_thread
from yuxi_dash.alerts.evaluate import ADVISORY_LOCK_KEY
from yuxi_dash.alerts.hooks import HOOK_WAIT_SECONDS, after_attach_scan, after_usage_write
from yuxi_dash.alerts.views import current_alerts
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import ORIGIN_ATTACHED, ScanTiming


@dataclass
class Scan:
    source: str = "db.example:5432/platform"
    seconds: float = 1.25
    projected: int = 3


def test_after_a_scan_the_timing_is_kept_and_platform_threads_alert(db_url: str) -> None:
    add_rule("platform", scope="attached")
    put_thread("p1", 0.9, origin=ORIGIN_ATTACHED)
    put_thread("own1", 0.9)
    after_attach_scan(get_settings(), Scan())
    assert [(a.rule, a.thread_id, a.platform) for a in current_alerts()] == [
        ("platform", "p1", "attached")
    ]
    with session_scope() as session:
        timing = session.scalar(sa.select(ScanTiming))
        assert (timing.source, timing.seconds, timing.projected) == (Scan.source, 1.25, 3)


def test_the_hook_sends_nothing(
    db_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    add_rule("hot")
    monkeypatch.setenv("YUXI_DASH_ALERTMANAGER_URL", "not a url at all")
    get_settings.cache_clear()
    put_thread("t1", 0.95)
    after_usage_write(get_settings())  # a send would fail here: none is tried
    assert [a.thread_id for a in current_alerts()] == ["t1"]
    assert "failed" not in caplog.text


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_failing_evaluation_never_raises(db_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """Another evaluator holds the lock past HOOK_WAIT_SECONDS: one log line, no exception."""
    add_rule("hot")
    put_thread("t1", 0.95)
    engine = sa.create_engine(db_url)
    try:
        with engine.connect() as other, other.begin():
            other.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": ADVISORY_LOCK_KEY})
            started = time.monotonic()
            after_usage_write(get_settings())
            waited = time.monotonic() - started
    finally:
        engine.dispose()
    assert HOOK_WAIT_SECONDS <= waited < HOOK_WAIT_SECONDS + 5
    assert "alert evaluation failed" in caplog.text
    assert current_alerts() == []  # the next pass catches up
