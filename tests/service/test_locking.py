"""THE row lock (yuxi_dash.service.locking), on SQLite and real PostgreSQL."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tests.service.builders import OPERATOR, audit_rows, seed_thread, snapshot_of_store
from yuxi_dash import service
from yuxi_dash.access.audit import wait_for_pending_audit
from yuxi_dash.errors import ThreadBusy
from yuxi_dash.settings import Settings
from yuxi_dash.store.db import is_lock_failure, session_scope


def test_lock_timeout_is_thread_busy_not_a_hang(db_url: str) -> None:
    seeded = seed_thread()
    settings = Settings(lock_timeout_seconds=0.3)
    with service.thread_lock("t1") as (_session, conv):
        assert conv is not None
        with pytest.raises(ThreadBusy) as caught:
            service.compress_own_thread("t1", actor=OPERATOR, settings=settings)
        with pytest.raises(ThreadBusy):
            service.enqueue_request("t1", content="x", settings=settings)
    assert caught.value.detail["reason"] == "locked"
    assert wait_for_pending_audit(30)  # SQLite: written once the holder let go
    assert audit_rows()[0].detail["code"] == "thread_busy"
    assert snapshot_of_store()["checkpoint_id"] == seeded  # no new checkpoint


def test_one_check_tells_a_lock_failure_on_both_databases(db_url: str) -> None:
    """`is_lock_failure` (used by the lock and by the audit log's retry) on real errors."""
    seed_thread()
    with service.thread_lock("t1"), pytest.raises(ThreadBusy) as caught:
        with service.thread_lock("t1", wait_seconds=0.2):
            pass
    error = caught.value.__cause__
    assert isinstance(error, sa.exc.OperationalError)
    assert is_lock_failure(error) and is_lock_failure(error.orig)  # sqlalchemy's and the driver's
    with session_scope() as session, pytest.raises(sa.exc.DBAPIError) as other:
        session.execute(sa.text("SELECT * FROM no_such_table"))
    assert not is_lock_failure(other.value)
    # a message that mentions a lock is not a database lock failure
    assert not is_lock_failure(ThreadBusy("thread t1 is locked by another operation"))
