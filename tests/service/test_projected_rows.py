"""What the projection reads of our tables (yuxi_dash.service.projected_rows). SQLite and PostgreSQL.

The chat rows a batch needs: the recorded ones among the wanted message ids
(read by (thread, id) pair on PostgreSQL, in lists on SQLite), every row still
waiting for its message id in sequence order, and the last sequence number,
for many threads and many ids at once.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

import sqlalchemy as sa

from tests.service.builders import seed_thread
from yuxi_dash.service.projected_rows import load_projected
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import ChatMessage

AT = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
# more ids than SQLite takes parameters in one statement (250,000 in Debian's build)
UNKNOWN_IDS = sqlite3.connect(":memory:").getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) + 1


def _chat(thread_id: str, rows: list[tuple[str | None, str, str]]) -> None:
    """(message id or None, role, text) rows, in sequence order."""
    with session_scope() as session:
        session.execute(sa.delete(ChatMessage).where(ChatMessage.thread_id == thread_id))
        for sequence, (message_id, role, text) in enumerate(rows, start=1):
            session.add(
                ChatMessage(
                    thread_id=thread_id,
                    sequence=sequence,
                    role=role,
                    content=text,
                    created_at=AT,
                    message_id=message_id,
                )
            )


def test_wanted_ids_unlinked_rows_and_last_sequence_of_many_threads(db_url: str) -> None:
    seed_thread("t1")
    seed_thread("t2", create_agent=False)
    _chat(
        "t1",
        [
            ("m1", "user", "hello"),
            (None, "user", "same words"),
            ("m2", "assistant", "hi"),
            (None, "user", "same words"),
            (None, "user", "other words"),
            ("m3", "assistant", "bye"),
        ],
    )
    _chat("t2", [("m1", "user", "t2 says hello"), ("n2", "assistant", "t2 answers")])
    noise = {f"absent-{i}" for i in range(UNKNOWN_IDS)}
    with session_scope() as session:
        found = load_projected(
            session,
            ["t1", "t2"],
            messages={"t1": {"m1", "m3", *noise}, "t2": {"n2", "m3"}},
        )
    t1, t2 = found["t1"], found["t2"]
    # each thread's own recorded ids among those asked for (SQLite may add others of its own)
    assert t1.recorded == {"m1", "m3"}  # m2 was not asked for
    assert "n2" in t2.recorded and "m3" not in t2.recorded and t2.recorded <= {"m1", "n2"}
    assert t1.sequence == 6 and t2.sequence == 2  # the last row, read or not
    with session_scope() as session:
        ids = dict(
            session.execute(
                sa.select(ChatMessage.sequence, ChatMessage.id).where(ChatMessage.thread_id == "t1")
            ).all()
        )
    # rows waiting for an id, by (role, text), first written first
    assert t1.unlinked == {
        ("user", "same words"): [ids[2], ids[4]],
        ("user", "other words"): [ids[5]],
    }
    assert t2.unlinked == {}


def test_a_thread_with_no_new_message_reads_no_chat_row(db_url: str) -> None:
    seed_thread("t1")
    _chat("t1", [("m1", "user", "hello"), (None, "user", "waiting")])
    with session_scope() as session:
        found = load_projected(session, ["t1"], messages={"t1": set()}, indexing=())
    assert found["t1"].recorded == set() and found["t1"].unlinked == {}
    assert found["t1"].sequence == 0 and found["t1"].tool_paths == set()
