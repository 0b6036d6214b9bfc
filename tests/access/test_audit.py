"""The audit log writer (yuxi_dash.access.audit) on both databases."""

from __future__ import annotations

import pytest

from yuxi_dash.access.audit import record_audit, sanitize_detail
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.queries import list_audit


def test_record_audit_own_transaction(db_url: str) -> None:
    entry_id = record_audit(
        actor="ops@example.com",
        action="compress",
        target="thread:t1",
        outcome="refused",
        detail={"code": "thread_busy", "version": 3},
    )
    assert entry_id is not None
    with session_scope() as session:
        (row,) = list_audit(session, target="thread:t1")
    assert (row.actor, row.action, row.outcome) == ("ops@example.com", "compress", "refused")
    assert row.detail == {"code": "thread_busy", "version": 3}
    assert row.at.tzinfo is not None


def test_record_audit_in_callers_session_rolls_back_with_it(db_url: str) -> None:
    with pytest.raises(RuntimeError):
        with session_scope() as session:
            record_audit(actor="a", action="x", target="t", outcome="ok", session=session)
            raise RuntimeError("rolled back")
    with session_scope() as session:
        assert list_audit(session) == []


def test_detail_drops_content_and_query_params() -> None:
    cleaned = sanitize_detail(
        {
            "code": "x",
            "content": "the user's secret words",
            "params": {"q": "x"},
            "nested": {"query": "MATCH", "count": 2},
            "long": "y" * 2000,
        }
    )
    assert cleaned == {"code": "x", "nested": {"count": 2}, "long": "y" * 500}


def test_list_audit_filters_and_orders_newest_first(db_url: str) -> None:
    for i in range(3):
        record_audit(actor=f"u{i % 2}", action="view", target=f"user:{i}", outcome="ok")
    with session_scope() as session:
        rows = list_audit(session)
        assert [r.target for r in rows] == ["user:2", "user:1", "user:0"]
        assert [r.target for r in list_audit(session, actor="u0")] == ["user:2", "user:0"]
        assert list_audit(session, action="compress") == []
        assert len(list_audit(session, limit=1)) == 1


def test_eventual_audit_waits_out_a_sqlite_write_lock() -> None:
    """SQLite has one writer: a refusal audited while another writer holds the lock lands later."""
    from yuxi_dash.access.audit import record_audit_eventually, wait_for_pending_audit
    from yuxi_dash.settings import Settings, get_settings
    from yuxi_dash.store.db import get_engine, locked_session

    quick = Settings(database_url=get_settings().database_url, lock_timeout_seconds=0.2)
    get_engine(quick)
    with locked_session(quick):
        record_audit_eventually(
            actor="ops", action="compress", target="thread:t9", outcome="refused", settings=quick
        )
        with session_scope() as session:
            assert list_audit(session, target="thread:t9") == []  # not yet: the lock is held
    assert wait_for_pending_audit(30)
    with session_scope() as session:
        (row,) = list_audit(session, target="thread:t9")
    assert row.outcome == "refused"
