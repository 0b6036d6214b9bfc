"""The audit log writer (yuxi_dash.access.audit) on both databases."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from yuxi_dash.access.audit import audit_rows, record_audit, sanitize_detail
from yuxi_dash.service.bulk_rows import insert_rows
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AuditEntry
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


HOSTILE_ROWS = [
    ("user:" + "x" * 300, {"code": "gone", "content": "the user's words", "name": "a\x00b"}),
    ("thread:t\x00" + "\ud800", {"nested": {"text": "t", "count": 2}, "long": "y" * 2000}),
    ("thread:plain", {}),
]


def _stored(session) -> list[tuple]:
    return [
        (r.actor, r.action, r.target, r.outcome, r.detail)
        for r in sorted(list_audit(session), key=lambda r: r.id)
    ]


def test_audit_rows_written_at_once_store_what_record_audit_would(db_url: str) -> None:
    """Many rows by the same rules, written in one go (a COPY on PostgreSQL): NULs escaped,
    strings clipped to their columns, content-like detail keys dropped, `at` set on every row."""
    actor, action, outcome = "ops\x00@example.com", "saved_results.refuse", "refused" + "!" * 40
    for target, detail in HOSTILE_ROWS:
        record_audit(actor=actor, action=action, target=target, outcome=outcome, detail=detail)
    with session_scope() as session:
        one_by_one = _stored(session)
        session.execute(sa.delete(AuditEntry))
    with session_scope() as session:
        rows = audit_rows(actor=actor, action=action, outcome=outcome, rows=HOSTILE_ROWS)
        insert_rows(session, AuditEntry.__table__, rows)  # type: ignore[arg-type]
    assert len(rows) == len(HOSTILE_ROWS)
    with session_scope() as session:
        assert _stored(session) == one_by_one
        assert all(r.at.tzinfo is not None for r in list_audit(session))
    first, second, _ = one_by_one
    assert first[0] == "ops\\x00@example.com" and len(first[3]) == 32
    assert first[2] == "user:" + "x" * 251 and first[4] == {"code": "gone", "name": "a\\x00b"}
    assert second[2] == "thread:t\\x00\\ud800"
    assert second[4] == {"nested": {"count": 2}, "long": "y" * 500}


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
