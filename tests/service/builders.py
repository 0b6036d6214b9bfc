"""Shared builders of the service tests: a seeded thread, store snapshots, test summarizers.

Also used by tests/security (bad input, fuzzing, compress concurrency).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    messages_to_dict,
)

from yuxi_dash import service
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.compression import ExtractiveSummarizer
from yuxi_dash.compression.state_format import TOKEN_USAGE_KEY
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import (
    Conversation,
    RunRequest,
    ToolResult,
    UsageSnapshotRow,
)
from yuxi_dash.store.queries import list_audit
from yuxi_dash.store.thread_store import load_state, write_state

OPERATOR = Actor(id="ops@example.com", role=Role.OPERATOR)
VIEWER = Actor(id="viewer@example.com", role=Role.VIEWER)
CAPABLE = ["context_compression"]


def conversation(turns: int = 8, *, tool_chars: int = 4000) -> list[BaseMessage]:
    """A thread with user questions, tool calls with large results and answers."""
    messages: list[BaseMessage] = []
    for i in range(turns):
        messages.append(HumanMessage(f"Question {i}: please check the deployment logs."))
        messages.append(
            AIMessage(
                "",
                tool_calls=[{"name": "run_command", "args": {"cmd": f"logs {i}"}, "id": f"c{i}"}],
            )
        )
        messages.append(
            ToolMessage(
                f"log line {i}\n" * (tool_chars // 12), tool_call_id=f"c{i}", name="run_command"
            )
        )
        messages.append(AIMessage(f"Answer {i}: the deployment finished."))
    return messages


def seed_thread(
    thread_id: str = "t1",
    *,
    user_id: str = "u1",
    agent_slug: str = "agent-a",
    capabilities: Sequence[str] = CAPABLE,
    create_agent: bool = True,
    messages: Sequence[BaseMessage] | None = None,
    status: str = "active",
    keep_messages: int = 6,
) -> str:
    """Agent, thread row and a first checkpoint; returns the checkpoint's id."""
    with session_scope() as session:
        if create_agent:
            service.upsert_agent(
                session,
                agent_slug,
                capabilities=list(capabilities),
                summary_keep_messages=keep_messages,
                summary_threshold=8,
            )
        service.create_thread(
            session, thread_id, user_id=user_id, agent_slug=agent_slug, status=status
        )
        written = write_state(
            thread_id,
            {
                "messages": list(conversation() if messages is None else messages),
                TOKEN_USAGE_KEY: {
                    "llm_input_tokens": 9000,
                    "context_usage_ratio": 0.07,
                    "keep": "me",
                },
            },
            expected_checkpoint_id=None,
        )
        conv = session.scalar(sa.select(Conversation).where(Conversation.thread_id == thread_id))
        conv.checkpoint_id = written.checkpoint_id  # as if the platform's write was projected
    return written.checkpoint_id


def snapshot_of_store(thread_id: str = "t1") -> dict[str, Any]:
    """Everything a compress may change, to compare before and after a refusal."""
    stored = load_state(thread_id)
    with session_scope() as session:
        conv = session.scalar(sa.select(Conversation).where(Conversation.thread_id == thread_id))
        return {
            "checkpoint_id": stored.checkpoint_id if stored else None,
            "messages": [(m.id, m.content) for m in stored.state.messages] if stored else None,
            "summary": stored.state.summary if stored else None,
            "token_usage": stored.token_usage if stored else None,
            "projected_checkpoint_id": conv.checkpoint_id if conv else None,
            "pressure": conv.summary_pressure_ratio if conv else None,
            "snapshots": session.scalar(sa.select(sa.func.count()).select_from(UsageSnapshotRow)),
            "tool_results": session.scalar(sa.select(sa.func.count()).select_from(ToolResult)),
        }


def history_files(root: Path | None = None) -> list[Path]:
    base = Path(root or get_settings().workdir) / "outputs" / "conversation_history"
    return sorted(base.glob("*.md")) if base.exists() else []


def audit_rows(thread_id: str = "t1") -> list[Any]:
    with session_scope() as session:
        return list_audit(session, target=service.thread_target(thread_id))


class SlowSummarizer:
    """The offline summarizer, but it calls `on_start` first (tests use it to hold the lock)."""

    name = "slow-test"
    extractive = True

    def __init__(self, on_start: Callable[[], None]) -> None:
        self.on_start = on_start
        self.inner = ExtractiveSummarizer()

    def summarize(
        self, messages: Sequence[BaseMessage], *, previous_summary: str | None = None
    ) -> str:
        self.on_start()
        return self.inner.summarize(messages, previous_summary=previous_summary)


class BrokenSummarizer:
    name = "broken-test"
    extractive = False

    def summarize(
        self, messages: Sequence[BaseMessage], *, previous_summary: str | None = None
    ) -> str:
        raise RuntimeError("provider exploded")


def queued_request(session: Any) -> None:
    session.add(RunRequest(thread_id="t1", run_type="chat", status="queued", payload={}))


def import_payload(messages: list[BaseMessage] | None = None) -> dict[str, Any]:
    return {
        "thread_id": "imp-1",
        "user_id": "alice_chen",
        "title": "Imported",
        "agent": {
            "slug": "research",
            "name": "Research",
            "capabilities": CAPABLE,
            "context_window": 64000,
            "summary_threshold": 20,
            "summary_keep_messages": 6,
            "summary_tool_result_token_limit": 300,
        },
        "messages": messages_to_dict(messages if messages is not None else conversation(3)),
    }
