"""Read side of the store for one thread, agents and users; the facade of every store read.

Every function takes a Session first and only reads. Here: one thread
(`get_thread`: its list row, newest checkpoint and agent; `usage_timeline`),
the agents, and the users that own threads. The thread list with busy reasons
is in `store.thread_list`, the chat record and audit log reads in
`store.history`; their public names are re-exported here, so
`from yuxi_dash.store.queries import list_threads, list_audit, ...` still works.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash.compression.state_format import TOKEN_USAGE_KEY
from yuxi_dash.compression.thread_state import ThreadContextState
from yuxi_dash.errors import StoreUnavailable, ThreadNotFound
from yuxi_dash.printable_record import Record
from yuxi_dash.store.checkpointer import CheckpointStore, checkpoint_store
from yuxi_dash.store.history import (
    AuditRecord,
    ChatRecordMessage,
    chat_record,
    list_audit,
    user_chat_messages,
)
from yuxi_dash.store.models import (
    CONTEXT_COMPRESSION,
    Agent,
    Conversation,
    UsageSnapshotRow,
)
from yuxi_dash.store.origin import attached_platform, is_attached
from yuxi_dash.store.thread_list import (
    BusyReason,
    ThreadSummary,
    ThreadWhere,
    busy_reason,
    busy_reasons,
    count_threads,
    list_thread_ids,
    list_threads,
    summary_row,
    thread_filters,
)
from yuxi_dash.usage import summary_trigger_tokens

__all__ = [
    "AgentInfo",
    "AuditRecord",
    "BusyReason",
    "attached_platform",
    "ChatRecordMessage",
    "ThreadDetail",
    "ThreadSummary",
    "ThreadWhere",
    "UsagePoint",
    "UserSummary",
    "busy_reason",
    "busy_reasons",
    "chat_record",
    "count_threads",
    "get_conversation",
    "get_thread",
    "list_agents",
    "list_audit",
    "list_thread_ids",
    "list_threads",
    "list_users",
    "own_store",
    "summary_row",
    "thread_filters",
    "usage_timeline",
    "user_chat_messages",
]


@dataclass(frozen=True)
class AgentInfo:
    slug: str
    name: str
    capabilities: list[str]
    context_window: int
    summary_threshold: int
    summary_keep_messages: int
    summary_tool_result_token_limit: int

    @property
    def capable(self) -> bool:
        return CONTEXT_COMPRESSION in self.capabilities

    @property
    def summary_trigger_tokens(self) -> int:
        return summary_trigger_tokens(self.summary_threshold)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "capable": self.capable}

    @classmethod
    def from_row(cls, row: Agent) -> AgentInfo:
        return cls(
            slug=row.slug,
            name=row.name,
            capabilities=list(row.capabilities or []),
            context_window=row.context_window,
            summary_threshold=row.summary_threshold,
            summary_keep_messages=row.summary_keep_messages,
            summary_tool_result_token_limit=row.summary_tool_result_token_limit,
        )


@dataclass(frozen=True)
class ThreadDetail:
    """One thread: its list row, its newest checkpoint (context state, id, token_usage), agent."""

    summary: ThreadSummary
    state: ThreadContextState
    checkpoint_id: str | None
    token_usage: dict[str, Any]
    agent: AgentInfo | None
    created_at: datetime | None
    state_updated_at: datetime | None


@dataclass(frozen=True)
class UsagePoint(Record):
    measured_at: datetime
    llm_input_tokens: int
    next_llm_input_tokens: int
    context_window: int
    context_usage_ratio: float
    summary_trigger_tokens: int
    summary_pressure_ratio: float
    summary_active: bool
    source: str


@dataclass(frozen=True)
class UserSummary(Record):
    user_id: str
    threads: int
    last_activity_at: datetime | None


# --- one thread -----------------------------------------------------------------


def get_conversation(session: Session, thread_id: str) -> Conversation | None:
    return session.scalar(sa.select(Conversation).where(Conversation.thread_id == thread_id))


def own_store(session: Session, conv: Conversation) -> CheckpointStore:
    """This database's checkpointer; an attached thread is not in it (never an empty state)."""
    if is_attached(conv.origin):
        raise StoreUnavailable(f"thread {conv.thread_id} is read from the attached platform")
    return checkpoint_store(session.get_bind().engine.url.render_as_string(hide_password=False))


def get_thread(
    session: Session,
    thread_id: str,
    *,
    user_id: str | None = None,
    store_for: Callable[[Conversation], CheckpointStore] | None = None,
) -> ThreadDetail:
    """The thread's list row, checkpoint and agent; ThreadNotFound when unknown (or not `user_id`'s).

    `store_for` picks the thread's checkpointer (`yuxi_dash.sources.thread_store`
    reads attached threads from the platform); without it, this database's own.
    """
    from yuxi_dash.validation import thread_id as valid_thread_id

    conv = get_conversation(session, valid_thread_id(thread_id))  # a URL's NUL: invalid_input
    if conv is None or (user_id is not None and conv.user_id != user_id):
        raise ThreadNotFound(f"thread {thread_id} not found")
    agent_row = session.scalar(sa.select(Agent).where(Agent.slug == conv.agent_slug))
    summary = summary_row(
        conv,
        agent_row.capabilities if agent_row else None,
        busy_reason(session, thread_id),
        platform=attached_platform(session) if is_attached(conv.origin) else None,
    )
    store = store_for(conv) if store_for is not None else own_store(session, conv)
    checkpoint = store.latest(conv.thread_id)
    usage = checkpoint.values.get(TOKEN_USAGE_KEY) if checkpoint else None
    return ThreadDetail(
        summary=summary,
        state=(
            checkpoint.context()
            if checkpoint
            else ThreadContextState(thread_id=conv.thread_id, messages=[])
        ),
        checkpoint_id=checkpoint.checkpoint_id if checkpoint else None,
        token_usage=dict(usage) if isinstance(usage, dict) else {},
        agent=AgentInfo.from_row(agent_row) if agent_row else None,
        created_at=conv.created_at,
        state_updated_at=checkpoint.created_at if checkpoint else None,
    )


def usage_timeline(
    session: Session, thread_id: str, *, limit: int | None = None
) -> list[UsagePoint]:
    """Usage snapshots of one thread, oldest first (the latest `limit` when given)."""
    query = (
        sa.select(UsageSnapshotRow)
        .where(UsageSnapshotRow.thread_id == thread_id)
        .order_by(UsageSnapshotRow.measured_at.desc(), UsageSnapshotRow.id.desc())
    )
    if limit is not None:
        query = query.limit(limit)
    rows = list(session.scalars(query))
    rows.reverse()
    return [
        UsagePoint(
            measured_at=r.measured_at,
            llm_input_tokens=r.llm_input_tokens,
            next_llm_input_tokens=r.next_llm_input_tokens,
            context_window=r.context_window,
            context_usage_ratio=r.context_usage_ratio,
            summary_trigger_tokens=r.summary_trigger_tokens,
            summary_pressure_ratio=r.summary_pressure_ratio,
            summary_active=r.summary_active,
            source=r.source,
        )
        for r in rows
    ]


def list_agents(session: Session) -> list[AgentInfo]:
    return [AgentInfo.from_row(a) for a in session.scalars(sa.select(Agent).order_by(Agent.slug))]


def list_users(session: Session, *, include_deleted: bool = False) -> list[UserSummary]:
    """Every user id that owns a thread, with thread counts and last activity, by user id."""
    query = sa.select(
        Conversation.user_id,
        sa.func.count().label("threads"),
        sa.func.max(Conversation.last_activity_at).label("last_activity_at"),
    ).group_by(Conversation.user_id)
    if not include_deleted:
        query = query.where(Conversation.status != "deleted")
    rows = session.execute(query).all()
    users = [UserSummary(user_id=u, threads=int(n), last_activity_at=last) for u, n, last in rows]
    users.sort(key=lambda u: u.user_id)
    return users
