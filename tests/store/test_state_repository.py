"""Compare-and-swap writes of thread state in the checkpointer (yuxi_dash.store.thread_store).

Each test runs on the embedded SQLite checkpointer and on PostgreSQL's.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage

from tests.fixtures.profiles import examples
from yuxi_dash.compression.state_format import SUMMARIZATION_SESSION_ID_KEY, TOKEN_USAGE_KEY
from yuxi_dash.errors import StaleState
from yuxi_dash.store.thread_store import load_state, replace_messages, write_state


def test_first_write_makes_the_first_checkpoint_and_round_trips(db_url: str) -> None:
    assert load_state("t1") is None
    written = write_state(
        "t1",
        {
            "messages": [HumanMessage("hi"), AIMessage("hello")],
            SUMMARIZATION_SESSION_ID_KEY: "s1",
            TOKEN_USAGE_KEY: {"a": 1},
        },
        expected_checkpoint_id=None,
    )
    stored = load_state("t1")
    assert stored is not None and stored.checkpoint_id == written.checkpoint_id
    assert [m.content for m in stored.state.messages] == ["hi", "hello"]
    assert all(m.id for m in stored.state.messages)  # the reducer gave every message an id
    assert stored.state.history_session_id == "s1"
    assert stored.token_usage == {"a": 1}


def test_cas_refuses_a_moved_checkpoint_and_keeps_what_it_does_not_write(db_url: str) -> None:
    first = write_state(
        "t1",
        {"messages": [HumanMessage("one")], TOKEN_USAGE_KEY: {"k": 2}},
        expected_checkpoint_id=None,
    )
    second = write_state(
        "t1", {"messages": [AIMessage("two")]}, expected_checkpoint_id=first.checkpoint_id
    )
    assert second.checkpoint_id != first.checkpoint_id
    for stale in (first.checkpoint_id, None, "not-a-checkpoint"):
        with pytest.raises(StaleState):
            write_state("t1", {"messages": [AIMessage("lost")]}, expected_checkpoint_id=stale)
    stored = load_state("t1")
    assert stored is not None and stored.checkpoint_id == second.checkpoint_id
    assert [m.content for m in stored.state.messages] == ["one", "two"]
    assert stored.token_usage == {"k": 2}  # a write that does not name a channel keeps it


def test_a_message_with_a_known_id_is_replaced_in_place(db_url: str) -> None:
    first = write_state(
        "t1",
        {"messages": [HumanMessage("q"), AIMessage("long answer")]},
        expected_checkpoint_id=None,
    )
    stored = load_state("t1")
    assert stored is not None
    answer = stored.state.messages[1]
    write_state(
        "t1",
        {"messages": [answer.model_copy(update={"content": "short"})]},
        expected_checkpoint_id=first.checkpoint_id,
    )
    stored = load_state("t1")
    assert stored is not None
    assert [m.content for m in stored.state.messages] == ["q", "short"]


def test_replace_messages_replaces_the_whole_history(db_url: str) -> None:
    first = write_state("t1", {"messages": [HumanMessage("old")]}, expected_checkpoint_id=None)
    write_state(
        "t1",
        {"messages": replace_messages([HumanMessage("new"), AIMessage("answer")])},
        expected_checkpoint_id=first.checkpoint_id,
    )
    stored = load_state("t1")
    assert stored is not None
    assert [m.content for m in stored.state.messages] == ["new", "answer"]


@settings(max_examples=examples(25), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(picks=st.lists(st.integers(min_value=-1, max_value=5), min_size=1, max_size=8))
def test_a_write_lands_exactly_when_it_names_the_newest_checkpoint(picks: list[int]) -> None:
    """Any sequence of writes naming some checkpoint seen so far (-1: none): each lands iff it
    names the newest, and the state is the last write that landed, never a refused one."""
    thread_id = f"prop-{uuid.uuid4().hex[:8]}"
    seen: list[str] = []
    landed: list[int] = []
    for n, pick in enumerate(picks):
        expected = None if pick < 0 or not seen else seen[min(pick, len(seen) - 1)]
        newest = seen[-1] if seen else None
        try:
            written = write_state(
                thread_id,
                {"messages": replace_messages([HumanMessage(f"write {n}")])},
                expected_checkpoint_id=expected,
            )
        except StaleState:
            assert expected != newest
            continue
        assert expected == newest
        seen.append(written.checkpoint_id)
        landed.append(n)
    stored = load_state(thread_id)
    if landed:
        assert stored is not None and stored.checkpoint_id == seen[-1]
        assert [m.content for m in stored.state.messages] == [f"write {landed[-1]}"]
    else:
        assert stored is None


class _RolledBack(Exception):
    pass


def test_locked_store_commits_and_rolls_back_with_the_locking_session(db_url: str) -> None:
    """PostgreSQL: a write through `locked_store` is part of the session's transaction;
    SQLite: the checkpoints' own file commits on its own (the guarantee the docs state)."""
    from yuxi_dash.store.db import is_sqlite, locked_session
    from yuxi_dash.store.thread_store import locked_store, state_store

    first = write_state("t1", {"messages": [HumanMessage("one")]}, expected_checkpoint_id=None)
    with pytest.raises(_RolledBack), locked_session() as session:
        sqlite = is_sqlite(session)
        store = locked_store(session, state_store())
        assert (store is state_store()) == sqlite
        inside = store.write(
            "t1", {"messages": [AIMessage("two")]}, expected_checkpoint_id=first.checkpoint_id
        )
        assert store.latest("t1").checkpoint_id == inside.checkpoint_id  # type: ignore[union-attr]
        raise _RolledBack
    stored = load_state("t1")
    assert stored is not None
    if sqlite:
        assert stored.checkpoint_id == inside.checkpoint_id
    else:
        assert stored.checkpoint_id == first.checkpoint_id  # rolled back with the session
        assert [m.content for m in stored.state.messages] == ["one"]
    with locked_session() as session:
        kept = locked_store(session, state_store()).write(
            "t1", {"messages": [AIMessage("three")]}, expected_checkpoint_id=stored.checkpoint_id
        )
    stored = load_state("t1")
    assert stored is not None and stored.checkpoint_id == kept.checkpoint_id  # committed with it
