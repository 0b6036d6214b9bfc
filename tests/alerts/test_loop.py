"""The background alert pass (yuxi_dash.alerts.loop): time alone fires, sends happen there.

A pending alert becomes firing with no usage write once its `for_seconds` has
passed; with two replicas on PostgreSQL one runs the pass at a time; a compress
with an unreachable webhook returns at once, and the loop delivers its notices
later, once each; a dripping Alertmanager costs each pass one deadline only.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import sqlalchemy as sa

from tests.alerts.builders import (
    OPERATOR,
    SECRET,
    add_rule,
    alert_audit,
    hot_compressible_thread,
    put_thread,
)
from tests.fixtures.hostile_http import HostileServer
from tests.fixtures.live_server import free_port
from tests.fixtures.monitoring import WebhookReceiver
from yuxi_dash import sources
from yuxi_dash.alerts.hooks import after_usage_write
from yuxi_dash.alerts.loop import AlertLoop
from yuxi_dash.alerts.views import channels, current_alerts
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AlertOutbox, Conversation, UsageSnapshotRow

FAST = 0.2  # seconds between passes in these tests


def wait_until(check: Callable[[], bool], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "the background pass did not get there"
        time.sleep(0.1)


def writes_of(thread_id: str) -> tuple[object, int]:
    """What a usage write would change: the thread's row stamp and its snapshots."""
    with session_scope() as session:
        stamp = session.scalar(
            sa.select(Conversation.updated_at).where(Conversation.thread_id == thread_id)
        )
        snapshots = session.scalar(
            sa.select(sa.func.count())
            .select_from(UsageSnapshotRow)
            .where(UsageSnapshotRow.thread_id == thread_id)
        )
    return stamp, int(snapshots or 0)


def test_a_pending_alert_fires_on_the_background_pass_with_no_usage_write(db_url: str) -> None:
    add_rule("slow", for_seconds=1)
    put_thread("t1", 0.95)
    after_usage_write(get_settings())  # the write's own pass: pending, not firing
    assert [(a.thread_id, a.state) for a in current_alerts()] == [("t1", "pending")]
    before = writes_of("t1")

    loop = AlertLoop(get_settings(), interval=FAST).start()
    try:
        wait_until(lambda: [a.state for a in current_alerts()] == ["firing"])
    finally:
        loop.stop()
    assert writes_of("t1") == before  # no usage write: time alone fired it
    assert alert_audit() == [("thread:t1", "pending"), ("thread:t1", "firing")]
    assert loop.passes >= 1 and loop.failures == 0


def test_the_pass_is_off_with_zero_seconds_and_idle_without_rules(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("YUXI_DASH_ALERT_EVALUATE_SECONDS", "0")
    get_settings.cache_clear()
    assert get_settings().alert_evaluate_seconds == 0
    loop = AlertLoop(get_settings(), interval=FAST)
    loop.run_once()  # no rule, no alert, no notice: nothing read beyond that, nothing run
    assert (loop.passes, loop.last) == (0, None)


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_one_replica_runs_the_pass_and_another_takes_over(db_url: str) -> None:
    add_rule("hot")
    put_thread("t1", 0.95)
    reports: list[str] = []
    first = AlertLoop(get_settings(), interval=FAST, report=reports.append).start()
    try:
        wait_until(lambda: first.leading is True)
        second = AlertLoop(get_settings(), interval=FAST, report=reports.append).start()
        try:
            wait_until(lambda: second.leading is False)
            time.sleep(5 * FAST)
            assert (first.leading, second.leading, second.passes) == (True, False, 0)
            first.stop()
            wait_until(lambda: second.leading is True and second.passes >= 1)
        finally:
            second.stop()
    finally:
        first.stop()
    assert "this replica runs the alert pass" in reports
    assert "another replica runs the alert pass; this one takes over if it stops" in reports
    assert [a.state for a in current_alerts()] == ["firing"]


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_compress_with_an_unreachable_webhook_returns_promptly_and_delivers_later(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()  # nothing listens here yet: the receiver is down
    monkeypatch.setenv("YUXI_DASH_ALERT_WEBHOOK_URL", f"http://127.0.0.1:{port}/hook")
    monkeypatch.setenv("YUXI_DASH_ALERT_WEBHOOK_SECRET", SECRET)
    get_settings.cache_clear()
    add_rule("hot")
    hot_compressible_thread("t1")
    after_usage_write(get_settings())  # firing: its notice is queued, not sent

    started = time.monotonic()
    result = sources.compress_thread_context("t1", actor=OPERATOR)  # resolves "hot"
    took = time.monotonic() - started
    assert result.status == "completed"
    deadline = get_settings().alert_deadline_seconds
    assert took < deadline, took  # one blocked send alone would take this long
    with session_scope() as session:
        rows = session.scalars(sa.select(AlertOutbox).order_by(AlertOutbox.id)).all()
        assert [(r.kind, r.attempts, r.sent_at) for r in rows] == [
            ("firing", 0, None),
            ("resolved", 0, None),
        ]  # the compress tried no send

    loop = AlertLoop(get_settings(), interval=FAST).start()
    receiver: WebhookReceiver | None = None
    try:
        wait_until(lambda: _attempts() >= 1)  # the pass tried while the receiver was down
        receiver = WebhookReceiver(port=port)  # the receiver comes back
        wait_until(lambda: len(receiver.requests) >= 2 and _unsent() == 0)
        time.sleep(5 * FAST)  # more passes: nothing is sent twice
    finally:
        loop.stop()
        if receiver is not None:
            receiver.close()
    events = receiver.events()
    assert [e["kind"] for e in events] == ["firing", "resolved"]
    assert len({e["event_id"] for e in events}) == 2


def _attempts() -> int:
    with session_scope() as session:
        return int(session.scalar(sa.select(sa.func.max(AlertOutbox.attempts))) or 0)


def _unsent() -> int:
    with session_scope() as session:
        return int(
            session.scalar(
                sa.select(sa.func.count())
                .select_from(AlertOutbox)
                .where(AlertOutbox.sent_at.is_(None))
            )
            or 0
        )


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_dripping_alertmanager_does_not_stall_the_background_pass(
    db_url: str, hostile_server: HostileServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("YUXI_DASH_ALERTMANAGER_URL", hostile_server.url)
    monkeypatch.setenv("YUXI_DASH_ALERT_DEADLINE_SECONDS", "1")
    get_settings.cache_clear()
    hostile_server.behave("drip_headers", drip_seconds=0.5)  # an answer would take minutes
    add_rule("slow", for_seconds=1)
    put_thread("t1", 0.95)
    after_usage_write(get_settings())
    assert [a.state for a in current_alerts()] == ["pending"]

    loop = AlertLoop(get_settings(), interval=FAST).start()
    try:  # it fires, and each pass gives up on Alertmanager after its deadline: the next comes
        wait_until(lambda: _manager_failures() >= 2)
    finally:
        loop.stop()
    assert [a.state for a in current_alerts()] == ["firing"]
    assert loop.failures == 0 and loop.passes >= 2
    assert len(hostile_server.requests) >= 2


def _manager_failures() -> int:
    (manager,) = [c for c in channels() if c.channel == "alertmanager"]
    assert manager.sent_total == 0
    return manager.failures_total
