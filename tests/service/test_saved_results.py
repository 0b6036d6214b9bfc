"""Who indexes a saved file first (yuxi_dash.service.saved_results), with two writers at once.

Two owners' threads point at one saved file. On PostgreSQL the second writer's check
waits for the first writer's transaction and then sees its row, so the file is indexed
for one owner only and the other thread's header is refused.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import sqlalchemy as sa

from tests.service.builders import seed_thread
from yuxi_dash.service.saved_results import Refusal, owned_results
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Conversation, ToolResult, utcnow

SHA = "ab" * 32
PATH = f"tool_results/run/{SHA[:16]}.txt"
WAIT_SECONDS = 30.0


def _row(thread_id: str) -> dict[str, Any]:
    return {
        "thread_id": thread_id,
        "tool_name": "run",
        "tool_call_id": f"call-{thread_id}",
        "sha256": SHA,
        "path": PATH,
        "chars": 10,
        "approx_tokens": 3,
        "created_at": utcnow(),
    }


def _index(session: Any, thread_id: str, refused: list[Refusal]) -> int:
    conv = session.scalar(sa.select(Conversation).where(Conversation.thread_id == thread_id))
    kept = owned_results(session, [_row(thread_id)], {thread_id: conv}, refused)
    if kept:
        session.execute(sa.insert(ToolResult), kept)
    return len(kept)


def _waiting_on_a_lock(session: Any) -> bool:
    """Whether another backend of this database waits on an advisory lock."""
    waiting = session.scalar(
        sa.text(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        )
    )
    return bool(waiting)


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_two_owners_indexing_one_file_at_once_index_it_once(db_url: str) -> None:
    seed_thread("ta", user_id="alice")
    seed_thread("tb", user_id="bob", create_agent=False)
    refused_b: list[Refusal] = []
    result: dict[str, int] = {}

    def second_writer() -> None:
        with session_scope() as session:
            result["kept"] = _index(session, "tb", refused_b)

    with session_scope() as first:
        assert _index(first, "ta", []) == 1  # indexed, not committed yet
        writer = threading.Thread(target=second_writer)
        writer.start()
        deadline = time.monotonic() + WAIT_SECONDS
        with session_scope() as probe:
            while not _waiting_on_a_lock(probe):
                assert writer.is_alive(), "the second writer did not wait for the first"
                assert time.monotonic() < deadline, "the second writer never waited"
                time.sleep(0.05)
    writer.join(WAIT_SECONDS)
    assert not writer.is_alive()
    assert result == {"kept": 0}
    assert [(thread, why) for thread, _, why in refused_b] == [
        ("tb", "the file is another owner's saved result")
    ]
    with session_scope() as session:
        owners = session.scalars(sa.select(ToolResult.thread_id).where(ToolResult.path == PATH))
        assert list(owners) == ["ta"]


def test_the_same_owner_indexes_a_shared_file_from_two_threads(db_url: str) -> None:
    """One owner's two threads may both point at one file (the lock refuses nobody)."""
    seed_thread("ta", user_id="alice")
    seed_thread("tc", user_id="alice", create_agent=False)
    refused: list[Refusal] = []
    with session_scope() as session:
        assert _index(session, "ta", refused) == 1
    with session_scope() as session:
        assert _index(session, "tc", refused) == 1
    assert refused == []
