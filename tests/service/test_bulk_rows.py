"""Bulk INSERT and UPDATE (yuxi_dash.service.bulk_rows): the rows the ORM would write. Both backends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa

from tests.service.builders import seed_thread
from yuxi_dash.service.bulk_rows import insert_new_rows, insert_rows, update_rows
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AuditEntry, ChatMessage, Conversation, ScanWatermark

CHAT = ChatMessage.__table__
THREADS = Conversation.__table__


def _chat(sequence: int, created_at: datetime) -> dict[str, Any]:
    return {
        "thread_id": "t1",
        "sequence": sequence,
        "role": "user",
        # what COPY's text format must escape: tab, newline, backslash, its NULL and end marks
        "content": f'it\'s {sequence}: "quoted", {{braces}}, a comma,\ta tab\nand \\N \\. \\x00',
        "created_at": created_at,
        "message_id": f"m{sequence}",
    }


def test_inserted_rows_keep_their_values_and_order(db_url: str) -> None:
    seed_thread()
    naive = datetime(2026, 11, 1, 9, 0)  # stored as UTC, as the column type does for the ORM
    plus_two = datetime(2026, 11, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    rows = [_chat(1, naive), _chat(2, plus_two), _chat(3, naive + timedelta(minutes=1))]
    with session_scope() as session:
        insert_rows(session, CHAT, rows)  # type: ignore[arg-type]
        insert_rows(session, CHAT, [])  # type: ignore[arg-type]
    with session_scope() as session:
        found = session.execute(
            sa.select(ChatMessage.sequence, ChatMessage.content, ChatMessage.created_at)
            .where(ChatMessage.message_id.in_(["m1", "m2", "m3"]))
            .order_by(ChatMessage.id)
        ).all()
    assert [(s, c) for s, c, _ in found] == [(r["sequence"], r["content"]) for r in rows]
    assert [at for _, _, at in found] == [
        datetime(2026, 11, 1, 9, 0, tzinfo=UTC),
        datetime(2026, 11, 1, 10, 0, tzinfo=UTC),
        datetime(2026, 11, 1, 9, 1, tzinfo=UTC),
    ]


def test_updated_rows_get_every_column_even_one_null_in_every_row(db_url: str) -> None:
    seed_thread("t1")
    seed_thread("t2", create_agent=False)
    with session_scope() as session:
        ids = dict(session.execute(sa.select(Conversation.thread_id, Conversation.id)).all())
        session.execute(sa.update(Conversation).values(deleted_at=datetime(2026, 1, 1, tzinfo=UTC)))
    at = datetime(2026, 11, 2, 8, 30, tzinfo=UTC)
    with session_scope() as session:
        update_rows(
            session,
            THREADS,  # type: ignore[arg-type]
            [
                {"id": ids["t1"], "status": "active", "deleted_at": None, "context_window": 64_000,
                 "context_usage_ratio": 0.25, "summary_active": True, "usage_measured_at": at},
                {"id": ids["t2"], "status": "active", "deleted_at": None, "context_window": 32_000,
                 "context_usage_ratio": 0.5, "summary_active": False, "usage_measured_at": None},
            ],
        )  # fmt: skip
    with session_scope() as session:
        found = {conv.thread_id: conv for conv in session.scalars(sa.select(Conversation)).all()}
        got = {
            t: (c.deleted_at, c.context_window, c.context_usage_ratio, c.summary_active,
                c.usage_measured_at)
            for t, c in found.items()
        }  # fmt: skip
    assert got == {
        "t1": (None, 64_000, 0.25, True, at),
        "t2": (None, 32_000, 0.5, False, None),
    }


def test_a_column_the_table_lacks_is_refused_before_any_sql(db_url: str) -> None:
    with session_scope() as session, pytest.raises(KeyError):
        insert_rows(session, CHAT, [{"thread_id": "t1", "no_such_column": 1}])  # type: ignore[arg-type]
    with session_scope() as session, pytest.raises(ValueError, match="id"):
        update_rows(session, THREADS, [{"status": "active"}])  # type: ignore[arg-type]


def test_a_failed_insert_raises_sqlalchemys_error_and_writes_nothing(db_url: str) -> None:
    """A duplicate is `IntegrityError` on both backends (callers retry or quarantine on it)."""
    seed_thread()
    at = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
    with session_scope() as session:
        insert_rows(session, CHAT, [_chat(1, at)])  # type: ignore[arg-type]
    with pytest.raises(sa.exc.IntegrityError), session_scope() as session:
        insert_rows(session, CHAT, [_chat(2, at), _chat(1, at)])  # type: ignore[arg-type]
    with session_scope() as session:
        assert session.scalars(sa.select(ChatMessage.sequence)).all() == [1]


def test_a_string_longer_than_its_column_is_cut_on_postgresql(db_url: str) -> None:
    seed_thread()
    row = {**_chat(1, datetime(2026, 11, 1, 9, 0, tzinfo=UTC)), "role": "r" * 20}
    with session_scope() as session:
        insert_rows(session, CHAT, [row])  # type: ignore[arg-type]
    with session_scope() as session:
        role = session.scalar(sa.select(ChatMessage.role))
    # SQLite keeps any length, as the ORM writes it there
    assert role == ("r" * 20 if db_url.startswith("sqlite") else "r" * 16)


def test_rows_the_session_holds_are_written_before_rows_that_refer_to_them(db_url: str) -> None:
    with session_scope() as session:
        session.add(Conversation(thread_id="fresh", user_id="u", agent_slug="a", title=""))
        insert_rows(  # type: ignore[arg-type]
            session, CHAT, [{**_chat(1, datetime(2026, 11, 1, tzinfo=UTC)), "thread_id": "fresh"}]
        )
    with session_scope() as session:
        assert session.scalars(sa.select(ChatMessage.thread_id)).all() == ["fresh"]


def test_new_rows_skip_the_keys_the_table_holds_and_get_the_columns_defaults(db_url: str) -> None:
    """`insert_new_rows` inserts the keys not there, leaves a held row as it is (values and all),
    returns the keys it inserted, and fills the columns it was not given with their defaults."""
    seed_thread("t1", create_agent=False)
    with session_scope() as session:
        held = session.execute(sa.select(Conversation.user_id, Conversation.title)).one()
    seen = datetime(2026, 11, 3, 7, 0, tzinfo=UTC)
    rows = [
        {"thread_id": thread_id, "user_id": "u-new", "agent_slug": "a", "title": "new",
         "origin": "attached", "last_activity_at": seen, "summary_pressure_ratio": 0.9}
        for thread_id in ("t1", "t2", "t3")
    ]  # fmt: skip
    with session_scope() as session:
        assert insert_new_rows(session, THREADS, rows, "thread_id") == {"t2", "t3"}  # type: ignore[arg-type]
        assert insert_new_rows(session, THREADS, [], "thread_id") == set()  # type: ignore[arg-type]
    with session_scope() as session:
        found = {
            row.thread_id: row
            for row in session.execute(
                sa.select(
                    Conversation.thread_id,
                    Conversation.user_id,
                    Conversation.title,
                    Conversation.status,
                    Conversation.created_at,
                    Conversation.last_activity_at,
                    Conversation.summary_pressure_ratio,
                    Conversation.checkpoint_id,
                )
            )
        }
    assert (found["t1"].user_id, found["t1"].title) == tuple(held)  # left as it was
    for thread_id in ("t2", "t3"):
        row = found[thread_id]
        assert (row.user_id, row.title, row.summary_pressure_ratio) == ("u-new", "new", 0.9)
        assert row.last_activity_at.replace(tzinfo=UTC) == seen
        assert row.status == "active" and row.created_at is not None  # the columns' defaults
        assert row.checkpoint_id is None


def test_json_values_are_stored_as_an_insert_statement_stores_them(db_url: str) -> None:
    """A JSON column's object, list and None (JSON null, not SQL NULL, as SQLAlchemy writes
    a column without ``none_as_null``) come back the same by either path."""
    table = ScanWatermark.__table__
    values = [{"state": "running", "nested": {"n": [1, 2.5, None]}}, ["a", 1], None]
    given = {"checkpoint_id": "", "scanned_at": datetime.now(UTC), "threads": 0}
    by_insert = [{"source": f"stmt-{i}", **given, "progress": v} for i, v in enumerate(values)]
    by_rows = [{"source": f"rows-{i}", **given, "progress": v} for i, v in enumerate(values)]
    with session_scope() as session:
        session.execute(sa.insert(table), by_insert)
        insert_rows(session, table, by_rows)  # type: ignore[arg-type]
    with session_scope() as session:
        stored = dict(session.execute(sa.select(table.c.source, table.c.progress)).all())
        json_nulls = session.scalar(
            sa.select(sa.func.count()).where(
                table.c.progress.is_not(None), table.c.source.in_(["stmt-2", "rows-2"])
            )
        )
    assert [stored[f"rows-{i}"] for i in range(3)] == [stored[f"stmt-{i}"] for i in range(3)]
    assert [stored[f"rows-{i}"] for i in range(3)] == values
    assert json_nulls == 2


def test_an_updated_json_column_holds_the_new_value(db_url: str) -> None:
    with session_scope() as session:
        entry = AuditEntry(actor="a", action="x", target="t", outcome="ok", detail={"n": 1})
        session.add(entry)
        session.flush()
        entry_id = entry.id
    with session_scope() as session:
        update_rows(session, AuditEntry.__table__, [{"id": entry_id, "detail": {"n": [2, "b"]}}])  # type: ignore[arg-type]
    with session_scope() as session:
        assert session.get(AuditEntry, entry_id).detail == {"n": [2, "b"]}  # type: ignore[union-attr]
