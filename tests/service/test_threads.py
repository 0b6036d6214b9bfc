"""Agents, threads and import (yuxi_dash.service.threads), on SQLite and real PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa

from tests.service.builders import OPERATOR, VIEWER, audit_rows, conversation, import_payload
from yuxi_dash import service
from yuxi_dash.agents import AGENT_DEFAULTS
from yuxi_dash.errors import Forbidden, InvalidInput
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Agent, ChatMessage, Conversation
from yuxi_dash.store.thread_store import load_state


def test_import_twice_replaces_never_duplicates(db_url: str) -> None:
    first = service.import_thread(import_payload(), actor=OPERATOR)
    assert (first.created, first.messages) == (True, 12)
    first_stored = load_state("imp-1")
    assert first_stored is not None and first.checkpoint_id == first_stored.checkpoint_id
    second = service.import_thread(import_payload(conversation(4)), actor=OPERATOR)
    assert (second.created, second.messages) == (False, 16)
    assert second.checkpoint_id != first.checkpoint_id  # a new checkpoint, not an overwrite
    with session_scope() as session:
        assert session.scalar(sa.select(sa.func.count()).select_from(Conversation)) == 1
        assert session.scalar(sa.select(sa.func.count()).select_from(ChatMessage)) == 16
        conv = session.scalar(sa.select(Conversation))
    stored = load_state("imp-1")
    assert stored is not None and len(stored.state.messages) == 16
    assert stored.checkpoint_id == second.checkpoint_id == conv.checkpoint_id
    assert conv.summary_trigger_tokens == 20 * 1024 and conv.next_llm_input_tokens > 0
    assert [a.action for a in audit_rows("imp-1")] == ["import_thread", "import_thread"]


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda p: p.pop("thread_id"), "thread_id"),
        (lambda p: p.update(agent="x"), "agent"),
        (lambda p: p["agent"].update(summary_threshold=-1), "summary_threshold"),
        (lambda p: p.update(messages=[{"type": "nonsense"}]), "messages[0]"),
        (lambda p: p.update(messages="no"), "messages"),
        (
            lambda p: p["messages"][0]["data"]["additional_kwargs"].update(n=2**70),
            "past 64 bits at messages[0].data.additional_kwargs.n",
        ),
        (
            lambda p: p["messages"][1]["data"]["additional_kwargs"].update(n=[-(2**64)]),
            "past 64 bits at messages[1].data.additional_kwargs.n[0]",
        ),
    ],
)
def test_import_rejects_bad_input_with_one_line(
    db_url: str, mutate: Callable[[dict[str, Any]], Any], needle: str
) -> None:
    payload = import_payload()
    mutate(payload)
    with pytest.raises(InvalidInput) as caught:
        service.import_thread(payload, actor=OPERATOR)
    assert needle in caught.value.message and "\n" not in caught.value.message
    with session_scope() as session:
        assert session.scalar(sa.select(sa.func.count()).select_from(Conversation)) == 0
    refused = audit_rows("imp-1") if "thread_id" in payload else []
    assert [(a.outcome, a.detail) for a in refused] == (
        [("refused", {"code": "invalid_input"})] if "thread_id" in payload else []
    )


def test_import_refuses_a_viewer(db_url: str) -> None:
    with pytest.raises(Forbidden):
        service.import_thread(import_payload(), actor=VIEWER)
    assert [(a.actor, a.outcome, a.detail) for a in audit_rows("imp-1")] == [
        (VIEWER.id, "refused", {"code": "forbidden"})
    ]


def test_an_agent_without_sizes_gets_the_one_set_of_defaults(db_url: str) -> None:
    """An imported agent that leaves its sizes out and a bare agent row get the same numbers."""
    payload = import_payload()
    for key in AGENT_DEFAULTS:
        del payload["agent"][key]
    service.import_thread(payload, actor=OPERATOR)
    with session_scope() as session:
        service.upsert_agent(session, "bare")
    with session_scope() as session:
        agents = {a.slug: a for a in session.scalars(sa.select(Agent))}
        conv = session.scalar(sa.select(Conversation))
    expected = dict(AGENT_DEFAULTS)
    assert expected == {
        "context_window": 128_000,
        "summary_threshold": 100,
        "summary_keep_messages": 10,
        "summary_tool_result_token_limit": 300,
    }
    for slug in ("research", "bare"):
        assert {key: getattr(agents[slug], key) for key in expected} == expected, slug
    assert conv.summary_trigger_tokens == 100 * 1024
