"""Compare-and-swap writes of thread_states (yuxi_dash.store.state_repository)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage

from yuxi_dash.compression.state import ThreadContextState
from yuxi_dash.errors import StaleState
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Conversation
from yuxi_dash.store.state_repository import current_version, load_state, write_state


def _thread(thread_id: str = "t1") -> None:
    with session_scope() as session:
        session.add(Conversation(thread_id=thread_id, user_id="u1", agent_slug="a"))


def test_first_write_inserts_version_one_and_round_trips(db_url: str) -> None:
    _thread()
    state = ThreadContextState("t1", [HumanMessage("hi"), AIMessage("hello")], None, "s1")
    with session_scope() as session:
        assert load_state(session, "t1") is None
        assert write_state(session, state, expected_version=0, token_usage={"a": 1}) == 1
    with session_scope() as session:
        stored = load_state(session, "t1")
    assert stored is not None
    assert stored.version == 1
    assert [m.content for m in stored.state.messages] == ["hi", "hello"]
    assert stored.state.history_session_id == "s1"
    assert stored.token_usage == {"a": 1}


def test_cas_bumps_version_and_refuses_a_moved_version(db_url: str) -> None:
    _thread()
    state = ThreadContextState("t1", [HumanMessage("one")])
    with session_scope() as session:
        write_state(session, state, expected_version=0)
    newer = ThreadContextState("t1", [HumanMessage("one"), AIMessage("two")])
    with session_scope() as session:
        assert write_state(session, newer, expected_version=1) == 2
    with pytest.raises(StaleState):
        with session_scope() as session:
            write_state(session, ThreadContextState("t1", []), expected_version=1)
    with pytest.raises(StaleState):
        with session_scope() as session:
            write_state(session, ThreadContextState("t1", []), expected_version=0)
    with session_scope() as session:
        stored = load_state(session, "t1")
        assert current_version(session, "t1") == 2
    assert stored is not None and [m.content for m in stored.state.messages] == ["one", "two"]


def test_token_usage_kept_when_not_given(db_url: str) -> None:
    _thread()
    with session_scope() as session:
        write_state(session, ThreadContextState("t1", []), expected_version=0, token_usage={"k": 2})
        write_state(session, ThreadContextState("t1", [HumanMessage("x")]), expected_version=1)
    with session_scope() as session:
        stored = load_state(session, "t1")
    assert stored is not None and stored.token_usage == {"k": 2} and stored.version == 2


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(expected=st.lists(st.integers(min_value=0, max_value=6), min_size=1, max_size=12))
def test_a_write_lands_exactly_when_it_names_the_current_version(expected: list[int]) -> None:
    """Any sequence of writes: each succeeds iff it names the stored version; none overwrite."""
    thread_id = f"prop-{uuid.uuid4().hex[:8]}"
    _thread(thread_id)
    current = 0
    landed: list[int] = []
    for n, version in enumerate(expected):
        state = ThreadContextState(thread_id, [HumanMessage(f"write {n}")])
        try:
            with session_scope() as session:
                new_version = write_state(session, state, expected_version=version)
        except StaleState:
            assert version != current
            continue
        assert version == current and new_version == current + 1
        current = new_version
        landed.append(n)
    with session_scope() as session:
        assert current_version(session, thread_id) == current
        stored = load_state(session, thread_id)
    if landed:  # the stored state is the last write that landed, never a refused one
        assert stored is not None
        assert stored.state.messages[0].content == f"write {landed[-1]}"
    else:
        assert stored is None
