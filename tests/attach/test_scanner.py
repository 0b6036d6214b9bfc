"""The scan's guards: the platform's clock caps the watermark, and a platform is known by id.

A checkpoint id dated 2100 (a valid UUIDv6) is projected and flagged, but the
watermark stays at the platform database's `now()` plus a skew, so later
scans still find new threads, and the look-back window still starts at that
clock minus the overlap (a thread a replica one minute behind writes is found);
a watermark already stored past that clock is read from the start. A scan of another platform (another database: its
system identifier and name) is refused and audited, changing nothing, until
the operator confirms it; a thread marked deleted is active again when a
scan sees it again. Real platform databases, read-only role, both backends.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from tests.attach.checkpoints import put_checkpoint, values
from tests.fixtures.database import ADMIN_URL, _create_database, _drop_database
from tests.fixtures.platform import Platform, _conninfo
from yuxi_dash.attach.checkpoint_clock import checkpoint_time, floor_id, scan_floor
from yuxi_dash.cli import main
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AuditEntry, Conversation, ScanWatermark

pytestmark = pytest.mark.services

YEAR_2100 = datetime(2100, 1, 1, tzinfo=UTC)
TICKS_PER_SECOND = 10_000_000  # UUID time: 100-ns ticks since 1582-10-15
UUID_EPOCH_TICKS = 0x01B21DD213814000  # 1970-01-01 in those ticks


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    capsys.readouterr()
    code = main([*args, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else None


def id_at(moment: datetime) -> str:
    return floor_id(int(moment.timestamp() * TICKS_PER_SECOND) + UUID_EPOCH_TICKS)


def id_time(checkpoint_id: str) -> datetime:
    ticks = checkpoint_time(checkpoint_id)
    assert ticks is not None
    return datetime.fromtimestamp((ticks - UUID_EPOCH_TICKS) / TICKS_PER_SECOND, UTC)


def _status(thread_id: str) -> tuple[str, str | None]:
    with session_scope() as session:
        conv = session.scalar(sa.select(Conversation).where(Conversation.thread_id == thread_id))
        assert conv is not None
        return conv.status, conv.platform_id


def test_a_checkpoint_dated_2100_never_blinds_the_scan(
    db_url: str, attached: Platform, capsys: pytest.CaptureFixture[str]
) -> None:
    owner = attached.owner_conninfo
    put_checkpoint(owner, "p-now", values())
    future = put_checkpoint(owner, "p-2100", values(), checkpoint_id=id_at(YEAR_2100))
    code, report = cli(capsys, "attach", "scan")
    assert code == 0, report
    assert report["projected"] == 2  # projected all the same
    assert (report["future"], report["future_threads"]) == (1, ["p-2100"])
    assert report["watermark_capped"]
    assert report["watermark"] < future  # the platform's clock, not 2100
    assert id_time(report["watermark"]) < datetime.now(UTC).replace(year=2027)
    code, status = cli(capsys, "attach", "status")
    assert [(p["thread"], p["action"], p["code"]) for p in status["problems"]] == [
        ("p-2100", "flagged", "checkpoint_in_future")
    ]

    # a thread started later is still found by the next incremental scan
    later = put_checkpoint(owner, "p-later", values())
    code, report = cli(capsys, "attach", "scan")
    assert code == 0, report
    assert report["projected"] == 1
    code, threads = cli(capsys, "threads")
    listed = {t["thread_id"]: t["checkpoint_id"] for t in threads}
    assert listed == {"p-now": listed["p-now"], "p-2100": future, "p-later": later}

    # a watermark stored in 2100 before (a scan without the cap): read from the start
    with session_scope() as session:
        row = session.get(ScanWatermark, report["source"])
        assert row is not None
        row.checkpoint_id = future
    last = put_checkpoint(owner, "p-last", values())
    code, report = cli(capsys, "attach", "scan")
    assert code == 0, report
    assert report["watermark_reset"] and report["floor"] == ""
    assert report["projected"] == 1 and report["watermark"] < future
    # and --full resets it too
    with session_scope() as session:
        row = session.get(ScanWatermark, report["source"])
        assert row is not None
        row.checkpoint_id = future
    code, report = cli(capsys, "attach", "scan", "--full")
    assert code == 0, report
    assert report["watermark"] < future and report["watermark"] >= last


def test_a_checkpoint_dated_2100_never_shrinks_the_look_back_window(
    db_url: str, attached: Platform, capsys: pytest.CaptureFixture[str]
) -> None:
    """A replica one minute behind writes a thread after the scan saw an id dated 2100."""
    owner = attached.owner_conninfo
    put_checkpoint(owner, "p-now", values())
    future = put_checkpoint(owner, "p-2100", values(), checkpoint_id=id_at(YEAR_2100))
    code, report = cli(capsys, "attach", "scan")
    assert code == 0 and report["watermark_capped"] and report["projected"] == 2, report
    capped = report["watermark"]
    # the thread's only checkpoint, named by a clock 60 s behind: below the capped watermark
    behind = put_checkpoint(
        owner, "p-behind", values(), checkpoint_id=id_at(datetime.now(UTC) - timedelta(seconds=60))
    )
    assert behind < capped
    code, report = cli(capsys, "attach", "scan")  # incremental, not --full
    assert code == 0, report
    assert report["projected"] == 1 and report["floor"] < behind
    # the window reaches the overlap (5 minutes) behind the platform's clock, not behind 2100
    assert id_time(report["floor"]) < datetime.now(UTC) - timedelta(seconds=240)
    assert report["watermark"] >= capped and report["watermark"] < future
    assert (report["future"], report["future_threads"]) == (1, ["p-2100"])  # still flagged
    code, threads = cli(capsys, "threads")
    listed = {t["thread_id"]: t["checkpoint_id"] for t in threads}
    assert listed["p-behind"] == behind and listed["p-2100"] == future


def test_the_floor_is_never_later_than_the_overlap_before_the_clock() -> None:
    now = datetime(2026, 6, 1, tzinfo=UTC)
    window = id_at(now - timedelta(seconds=300))
    assert scan_floor(id_at(YEAR_2100), 300, now=now) == window  # the clock, not 2100
    assert scan_floor(id_at(now + timedelta(seconds=200)), 300, now=now) == window
    earlier = id_at(now - timedelta(hours=1))
    assert scan_floor(earlier, 300, now=now) == scan_floor(earlier, 300)  # the watermark's own
    assert scan_floor("", 300, now=now) == ""  # still reads everything


@pytest.fixture
def other_platform(platform: Platform) -> Iterator[str]:
    """A second platform database (the owner's conninfo): another platform on the same server."""
    url = _create_database(ADMIN_URL)
    try:
        yield _conninfo(url)
    finally:
        _drop_database(ADMIN_URL, url)


def _point_at(monkeypatch: pytest.MonkeyPatch, conninfo: str) -> None:
    monkeypatch.setenv("YUXI_DASH_ATTACH_CHECKPOINTER", conninfo)
    get_settings.cache_clear()


def _platform_audit() -> list[tuple[str, str, str]]:
    with session_scope() as session:
        rows = session.execute(
            sa.select(AuditEntry.actor, AuditEntry.outcome, AuditEntry.detail)
            .where(AuditEntry.action == "attach_scan")
            .order_by(AuditEntry.id)
        )
        return [(actor, outcome, detail.get("code", "")) for actor, outcome, detail in rows]


def test_a_scan_of_another_platform_is_refused_until_confirmed_and_undone_when_seen_again(
    db_url: str,
    attached: Platform,
    other_platform: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = put_checkpoint(attached.owner_conninfo, "a-one", values())
    put_checkpoint(attached.owner_conninfo, "a-two", values())
    put_checkpoint(other_platform, "b-one", values())
    code, report = cli(capsys, "attach", "scan")
    assert code == 0, report
    platform_a = report["platform"]
    assert platform_a.endswith("/" + attached.owner_conninfo.rsplit("/", 1)[1])
    assert _status("a-one") == ("active", platform_a)

    # pointed at another platform by mistake: a full scan is refused, nothing marked deleted
    _point_at(monkeypatch, other_platform)
    code, refused = cli(capsys, "attach", "scan", "--full")
    assert code == 1
    assert refused["error"]["code"] == "platform_changed"
    assert _status("a-one") == ("active", platform_a) and _status("a-two")[0] == "active"
    code, threads = cli(capsys, "threads")
    assert {t["thread_id"] for t in threads} == {"a-one", "a-two"}
    assert _platform_audit() == [("cli", "refused", "platform_changed")]

    # the operator confirms the change: projected, the old platform's threads marked deleted
    code, report = cli(
        capsys, "attach", "scan", "--full", "--accept-new-platform", "--actor", "ops@example.com"
    )
    assert code == 0, report
    assert report["platform_changed"] and report["platform"] != platform_a
    assert (report["projected"], report["deleted"]) == (1, 2)
    assert _status("a-one")[0] == "deleted"
    assert _platform_audit()[-1] == ("ops@example.com", "platform_changed", "")
    code, status = cli(capsys, "attach", "status")
    assert status["platform_id"] == report["platform"]

    # back to the first platform (confirmed): its threads are seen again and active again
    _point_at(monkeypatch, attached.reader_conninfo)
    code, refused = cli(capsys, "attach", "scan")
    assert (code, refused["error"]["code"]) == (1, "platform_changed")
    code, report = cli(capsys, "attach", "scan", "--accept-new-platform", "--actor", "ops")
    assert code == 0, report
    assert (report["projected"], report["undeleted"]) == (0, 2)  # nothing new to read
    assert _status("a-one") == ("active", platform_a)
    code, threads = cli(capsys, "threads")
    assert {t["thread_id"]: t["checkpoint_id"] for t in threads}["a-one"] == first
    assert {t["thread_id"] for t in threads} == {"a-one", "a-two", "b-one"}
