"""Read side of the store: thread lists, one thread, timelines, chat records, agents, users, audit.

Every function takes a Session first and only reads. The thread list is served
from the denormalized current-usage columns on `conversations` (index
`ix_conversations_pressure`), never from a scan of `usage_snapshots`; busy
reasons and capability are computed for the returned page only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash.compression.state import ThreadContextState
from yuxi_dash.errors import ThreadNotFound
from yuxi_dash.records import Record
from yuxi_dash.store.models import (
    CONTEXT_COMPRESSION,
    NON_FINAL_RUN_STATUSES,
    Agent,
    AgentRun,
    AuditEntry,
    ChatMessage,
    Conversation,
    RunRequest,
    ThreadState,
    UsageSnapshotRow,
)
from yuxi_dash.usage import summary_trigger_tokens

BusyReason = Literal["running", "queued", "interrupted"]


@dataclass(frozen=True)
class ThreadSummary(Record):
    """One row of the thread list: ids, current usage, and whether it can be compressed now."""

    thread_id: str
    user_id: str
    agent_slug: str
    title: str
    status: str
    summary_pressure_ratio: float
    context_usage_ratio: float
    llm_input_tokens: int
    next_llm_input_tokens: int
    summary_trigger_tokens: int
    context_window: int
    summary_active: bool
    busy_reason: BusyReason | None
    capable: bool
    last_compression_at: datetime | None
    last_activity_at: datetime | None
    version: int


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
    """One thread: its list row, its checkpoint (context state, version, token_usage) and agent."""

    summary: ThreadSummary
    state: ThreadContextState
    version: int
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
class ChatRecordMessage(Record):
    thread_id: str
    sequence: int
    role: str
    content: str
    created_at: datetime


@dataclass(frozen=True)
class UserSummary(Record):
    user_id: str
    threads: int
    last_activity_at: datetime | None


@dataclass(frozen=True)
class AuditRecord(Record):
    id: int
    at: datetime
    actor: str
    action: str
    target: str
    outcome: str
    detail: dict[str, Any]


# --- busy reasons -------------------------------------------------------------


def busy_reasons(session: Session, thread_ids: list[str]) -> dict[str, BusyReason]:
    """Why each of these threads may not be compressed now (absent: idle).

    running: a run that is not final; queued: a queued request; interrupted:
    the latest chat/resume run ended `interrupted` (it is waiting to resume).
    """
    if not thread_ids:
        return {}
    reasons: dict[str, BusyReason] = {}
    latest = (
        sa.select(
            AgentRun.thread_id,
            AgentRun.status,
            sa.func.row_number()
            .over(
                partition_by=AgentRun.thread_id,
                order_by=(AgentRun.created_at.desc(), AgentRun.id.desc()),
            )
            .label("rank"),
        )
        .where(AgentRun.thread_id.in_(thread_ids), AgentRun.run_type.in_(("chat", "resume")))
        .subquery()
    )
    for thread_id in session.scalars(
        sa.select(latest.c.thread_id).where(latest.c.rank == 1, latest.c.status == "interrupted")
    ):
        reasons[thread_id] = "interrupted"
    for thread_id in session.scalars(
        sa.select(RunRequest.thread_id)
        .where(RunRequest.thread_id.in_(thread_ids), RunRequest.status == "queued")
        .distinct()
    ):
        reasons[thread_id] = "queued"
    for thread_id in session.scalars(
        sa.select(AgentRun.thread_id)
        .where(AgentRun.thread_id.in_(thread_ids), AgentRun.status.in_(NON_FINAL_RUN_STATUSES))
        .distinct()
    ):
        reasons[thread_id] = "running"
    return reasons


def busy_reason(session: Session, thread_id: str) -> BusyReason | None:
    return busy_reasons(session, [thread_id]).get(thread_id)


# --- thread list --------------------------------------------------------------


def _thread_filters(
    *,
    min_pressure: float | None,
    agent: str | None,
    user_id: str | None,
    status: str | None,
    active_since: datetime | None,
    include_deleted: bool,
) -> list[sa.ColumnElement[bool]]:
    filters: list[sa.ColumnElement[bool]] = []
    if min_pressure is not None:
        filters.append(Conversation.summary_pressure_ratio >= float(min_pressure))
    if agent:
        filters.append(Conversation.agent_slug == agent)
    if user_id:
        filters.append(Conversation.user_id == user_id)
    if status:
        filters.append(Conversation.status == status)
    elif not include_deleted:
        filters.append(Conversation.status != "deleted")
    if active_since is not None:
        filters.append(Conversation.last_activity_at >= active_since)
    return filters


def list_threads(
    session: Session,
    *,
    min_pressure: float | None = None,
    agent: str | None = None,
    user_id: str | None = None,
    status: str | None = None,
    active_since: datetime | None = None,
    include_deleted: bool = False,
    limit: int = 50,
    offset: int = 0,
) -> list[ThreadSummary]:
    """Threads with their current usage, highest summary pressure first.

    Deleted threads are left out unless `status="deleted"` or `include_deleted=True`.
    """
    filters = _thread_filters(
        min_pressure=min_pressure,
        agent=agent,
        user_id=user_id,
        status=status,
        active_since=active_since,
        include_deleted=include_deleted,
    )
    page = (
        sa.select(Conversation)
        .where(*filters)
        .order_by(Conversation.summary_pressure_ratio.desc(), Conversation.thread_id.desc())
        .limit(max(0, int(limit)))
        .offset(max(0, int(offset)))
        .subquery()
    )
    conv = sa.orm.aliased(Conversation, page)
    rows = session.execute(
        sa.select(conv, Agent.capabilities, ThreadState.version)
        .outerjoin(Agent, Agent.slug == conv.agent_slug)
        .outerjoin(ThreadState, ThreadState.thread_id == conv.thread_id)
        .order_by(conv.summary_pressure_ratio.desc(), conv.thread_id.desc())
    ).all()
    reasons = busy_reasons(session, [row[0].thread_id for row in rows])
    return [
        _summary(c, capabilities, version, reasons.get(c.thread_id))
        for c, capabilities, version in rows
    ]


def list_thread_ids(session: Session, *, limit: int = 2000) -> list[str]:
    """Ids of the non-deleted threads, in `list_threads` order: for pickers.

    One index-ordered read of one column; none of the per-row work (busy
    reasons, capability, version) a picker does not show.
    """
    return list(
        session.scalars(
            sa.select(Conversation.thread_id)
            .where(Conversation.status != "deleted")
            .order_by(Conversation.summary_pressure_ratio.desc(), Conversation.thread_id.desc())
            .limit(max(0, int(limit)))
        )
    )


def count_threads(
    session: Session,
    *,
    min_pressure: float | None = None,
    agent: str | None = None,
    user_id: str | None = None,
    status: str | None = None,
    active_since: datetime | None = None,
    include_deleted: bool = False,
) -> int:
    filters = _thread_filters(
        min_pressure=min_pressure,
        agent=agent,
        user_id=user_id,
        status=status,
        active_since=active_since,
        include_deleted=include_deleted,
    )
    return int(session.scalar(sa.select(sa.func.count()).select_from(Conversation).where(*filters)))


def _summary(
    conv: Conversation,
    capabilities: list[str] | None,
    version: int | None,
    reason: BusyReason | None,
) -> ThreadSummary:
    return ThreadSummary(
        thread_id=conv.thread_id,
        user_id=conv.user_id,
        agent_slug=conv.agent_slug,
        title=conv.title,
        status=conv.status,
        summary_pressure_ratio=conv.summary_pressure_ratio,
        context_usage_ratio=conv.context_usage_ratio,
        llm_input_tokens=conv.llm_input_tokens,
        next_llm_input_tokens=conv.next_llm_input_tokens,
        summary_trigger_tokens=conv.summary_trigger_tokens,
        context_window=conv.context_window,
        summary_active=conv.summary_active,
        busy_reason=reason,
        capable=CONTEXT_COMPRESSION in (capabilities or []),
        last_compression_at=conv.last_compression_at,
        last_activity_at=conv.last_activity_at,
        version=version or 0,
    )


# --- one thread -----------------------------------------------------------------


def get_conversation(session: Session, thread_id: str) -> Conversation | None:
    return session.scalar(sa.select(Conversation).where(Conversation.thread_id == thread_id))


def get_thread(session: Session, thread_id: str, *, user_id: str | None = None) -> ThreadDetail:
    """The thread's list row, checkpoint and agent; ThreadNotFound when unknown (or not `user_id`'s)."""
    conv = get_conversation(session, thread_id)
    if conv is None or (user_id is not None and conv.user_id != user_id):
        raise ThreadNotFound(f"thread {thread_id} not found")
    agent_row = session.scalar(sa.select(Agent).where(Agent.slug == conv.agent_slug))
    state_row = session.get(ThreadState, thread_id)
    version = state_row.version if state_row else 0
    summary = _summary(
        conv,
        agent_row.capabilities if agent_row else None,
        version,
        busy_reason(session, thread_id),
    )
    if state_row is None:
        state = ThreadContextState(thread_id=thread_id, messages=[])
    else:
        state = ThreadContextState.from_storage(
            thread_id,
            {
                "messages": state_row.messages,
                "summary": state_row.summary,
                "history_session_id": state_row.history_session_id,
            },
        )
    return ThreadDetail(
        summary=summary,
        state=state,
        version=version,
        token_usage=dict(state_row.token_usage or {}) if state_row else {},
        agent=AgentInfo.from_row(agent_row) if agent_row else None,
        created_at=conv.created_at,
        state_updated_at=state_row.updated_at if state_row else None,
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


def _chat(row: ChatMessage) -> ChatRecordMessage:
    return ChatRecordMessage(
        thread_id=row.thread_id,
        sequence=row.sequence,
        role=row.role,
        content=row.content,
        created_at=row.created_at,
    )


def chat_record(session: Session, thread_id: str) -> list[ChatRecordMessage]:
    """The full, never-compressed chat record of a thread, in sequence order."""
    rows = session.scalars(
        sa.select(ChatMessage)
        .where(ChatMessage.thread_id == thread_id)
        .order_by(ChatMessage.sequence)
    )
    return [_chat(r) for r in rows]


def user_chat_messages(
    session: Session, user_id: str, limit: int = 500, *, role: str | None = None
) -> list[ChatRecordMessage]:
    """The latest `limit` chat messages across a user's threads, oldest first."""
    query = (
        sa.select(ChatMessage)
        .join(Conversation, Conversation.thread_id == ChatMessage.thread_id)
        .where(Conversation.user_id == user_id)
        .order_by(ChatMessage.created_at.desc(), ChatMessage.id.desc())
        .limit(limit)
    )
    if role:
        query = query.where(ChatMessage.role == role)
    rows = list(session.scalars(query))
    rows.reverse()
    return [_chat(r) for r in rows]


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


def list_audit(
    session: Session,
    *,
    actor: str | None = None,
    action: str | None = None,
    target: str | None = None,
    since: datetime | None = None,
    outcome: str | None = None,
    limit: int = 500,
) -> list[AuditRecord]:
    """Audit rows, newest first."""
    query = sa.select(AuditEntry).order_by(AuditEntry.at.desc(), AuditEntry.id.desc()).limit(limit)
    if actor:
        query = query.where(AuditEntry.actor == actor)
    if action:
        query = query.where(AuditEntry.action == action)
    if target:
        query = query.where(AuditEntry.target == target)
    if outcome:
        query = query.where(AuditEntry.outcome == outcome)
    if since is not None:
        query = query.where(AuditEntry.at >= since)
    return [
        AuditRecord(
            id=r.id,
            at=r.at,
            actor=r.actor,
            action=r.action,
            target=r.target,
            outcome=r.outcome,
            detail=dict(r.detail or {}),
        )
        for r in session.scalars(query)
    ]
