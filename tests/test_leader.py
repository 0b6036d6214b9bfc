"""Two `serve` replicas on one PostgreSQL: a background job runs on one at a time (leader).

Each replica is a real `ScanLoop` with its own lock connection, scanning a real
attached platform. Only the holder of the advisory lock scans; stopping it, or
killing its lock session, hands the scan to the other. The lock keys stay the
same from version to version, so old and new replicas contend for one lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

from tests.fixtures.platform import Platform
from yuxi_dash.alerts.loop import ALERT_LOOP_KEY
from yuxi_dash.attach.loop import SCAN_LOCK_KEY, ScanLoop
from yuxi_dash.leader import Leadership
from yuxi_dash.settings import Settings, get_settings

ONE = {"thread_id": "plat-one", "user_id": "alice", "turns": 1, "result_words": 40}
INTERVAL = 0.2


def _scan_lock(settings: Settings) -> Leadership:
    return Leadership(settings, key=SCAN_LOCK_KEY, label="attach scan")


def _until(check: Callable[[], bool], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _conninfo(url: str) -> str:
    return sa.engine.make_url(url).set(drivername="postgresql").render_as_string(False)


def _lock_holders(url: str) -> list[int]:
    """The PostgreSQL sessions holding the scan lock now."""
    high, low = (SCAN_LOCK_KEY >> 32) & 0xFFFFFFFF, SCAN_LOCK_KEY & 0xFFFFFFFF
    with psycopg.connect(_conninfo(url), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND classid::bigint = %s AND objid::bigint = %s AND objsubid = 1 "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            (high, low),
        ).fetchall()
    return [int(row[0]) for row in rows]


@pytest.fixture
def replicas_store(
    fresh_postgres_url: str, attached: Platform, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """Our store on its own PostgreSQL database, attached to a platform with one thread."""
    monkeypatch.setenv("YUXI_DASH_DATABASE_URL", fresh_postgres_url)
    get_settings.cache_clear()
    attached.run([ONE])
    yield fresh_postgres_url
    get_settings.cache_clear()


def test_two_replicas_scan_one_at_a_time_and_stopping_hands_over(replicas_store: str) -> None:
    lines: dict[str, list[str]] = {"a": [], "b": []}
    first = ScanLoop(get_settings(), interval=INTERVAL, report=lines["a"].append).start()
    second: ScanLoop | None = None
    try:
        _until(lambda: first.scans >= 1)
        second = ScanLoop(get_settings(), interval=INTERVAL, report=lines["b"].append).start()
        _until(lambda: second is not None and second.leading is False)
        scans_before = first.scans
        time.sleep(INTERVAL * 6)  # several turns of both
        assert first.leading is True and first.scans > scans_before
        assert second.scans == 0 and second.failures == 0  # it never scanned
        assert _lock_holders(replicas_store) == [first.leadership.backend_pid]
        assert first.failures == 0

        first.stop()
        stopped_at = first.scans
        _until(lambda: second is not None and second.scans >= 2)
        assert second.leading is True and first.scans == stopped_at
        assert _lock_holders(replicas_store) == [second.leadership.backend_pid]
    finally:
        first.stop()
        if second is not None:
            second.stop()
    assert _lock_holders(replicas_store) == []  # a stopped replica leaves no lock behind
    assert lines["a"][0] == "this replica runs the attach scan"
    assert lines["b"][0].startswith("another replica runs the attach scan")
    assert "this replica runs the attach scan" in lines["b"]


def test_a_leader_whose_session_dies_stops_scanning_and_the_other_takes_over(
    replicas_store: str,
) -> None:
    # the first replica's turns are slower, so the second tries while the first sits out
    first = ScanLoop(get_settings(), interval=INTERVAL * 5).start()
    second: ScanLoop | None = None
    try:
        _until(lambda: first.scans >= 1)
        second = ScanLoop(get_settings(), interval=INTERVAL).start()
        _until(lambda: second is not None and second.leading is False)
        with psycopg.connect(_conninfo(replicas_store), autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(%s)", (first.leadership.backend_pid,))
        _until(lambda: second is not None and second.leading is True and second.scans >= 1)
        holders = _lock_holders(replicas_store)
        assert holders == [second.leadership.backend_pid]
        # the old leader competes again, but the lock is taken: it scans no more
        _until(lambda: first.leading is False)
        stalled = first.scans
        time.sleep(INTERVAL * 12)  # two more turns of the first
        assert first.scans == stalled and first.leading is False
        assert _lock_holders(replicas_store) == [second.leadership.backend_pid]
    finally:
        first.stop()
        if second is not None:
            second.stop()


def test_leadership_on_postgresql_is_exclusive_until_released(postgres_url: str) -> None:
    settings = Settings(database_url=postgres_url)
    one, two = _scan_lock(settings), _scan_lock(settings)
    try:
        assert one.lead() is True and one.lead() is True  # held: stays the leader
        assert two.lead() is False
        one.release()
        assert not one.holding
        assert two.lead() is True and one.lead() is False
    finally:
        one.release()
        two.release()


def test_sqlite_needs_no_lock_one_process_scans(tmp_path: Path) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'one.db'}")
    one, two = _scan_lock(settings), _scan_lock(settings)
    assert one.lead() and two.lead()
    assert not one.needs_lock and not one.holding
    one.release()


def test_an_unreachable_database_is_not_leading(caplog: pytest.LogCaptureFixture) -> None:
    leadership = _scan_lock(
        Settings(database_url="postgresql://nobody:hunter2-Secret@127.0.0.1:1/none")
    )
    assert leadership.lead() is False and leadership.unavailable
    assert "database is unavailable" in caplog.text
    assert "hunter2" not in caplog.text and "postgresql://" not in caplog.text
    leadership.release()


def test_the_lock_keys_never_change() -> None:
    """A replica of an older version asks for these very keys (sha256 of the job's seed)."""
    assert SCAN_LOCK_KEY == 439443692224827865
    assert ALERT_LOOP_KEY == 7247154233708383273
