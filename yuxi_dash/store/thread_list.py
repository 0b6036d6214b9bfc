"""The thread list of the store: rows with current usage, busy reasons, filters and counts.

Every function takes a Session first and only reads. The list is served from
the denormalized current-usage columns on `conversations` (index
`ix_conversations_pressure`), never from a scan of `usage_snapshots`; busy
reasons and capability are computed for the returned page only (a row's
`compression` label derives from them; an attached thread's is
`wording.attached_label` of the platform's label, read once per page from the
newest scan watermark: `store.origin.attached_platform`). `summary_row`
builds one row (also for `store.queries.get_thread`); `thread_filters` is what
the list, the count and `store.overview` filter on. `thread_forecasts` reads the listed
threads' newest snapshots in one windowed query for `compression.forecast`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypedDict, Unpack

import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash.compression.forecast import forecast
from yuxi_dash.printable_record import Record
from yuxi_dash.store.models import (
    CONTEXT_COMPRESSION,
    NON_FINAL_RUN_STATUSES,
    Agent,
    AgentRun,
    Conversation,
    RunRequest,
    UsageSnapshotRow,
)
from yuxi_dash.store.origin import attached_platform, is_attached
from yuxi_dash.wording import attached_label

BusyReason = Literal["running", "queued", "interrupted"]
# how a thread stands with compression here: its agent's capability, unless the platform owns it
# ("supported", "unsupported", or "attached: <platform label>")
Compression = str


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
    checkpoint_id: str | None  # the newest checkpoint projected (the stale-click guard's value)
    attached: bool = False  # an attached platform owns it: never compressed here
    platform: str | None = None  # the attached platform's label (attached threads only)

    @property
    def compression(self) -> Compression:
        """ "attached: <platform>" (never compressed here, whatever its agent supports), else
        supported or unsupported.

        Derived, not a field: the row's JSON form (`to_dict`) stays its fields.
        """
        if self.attached:
            return attached_label(self.platform)
        return "supported" if self.capable else "unsupported"


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


class ThreadWhere(TypedDict, total=False):
    """Which threads `list_threads` and `count_threads` cover; every key optional."""

    min_pressure: float | None
    agent: str | None
    user_id: str | None
    status: str | None
    active_since: datetime | None
    include_deleted: bool


def thread_filters(
    *,
    min_pressure: float | None = None,
    agent: str | None = None,
    user_id: str | None = None,
    status: str | None = None,
    active_since: datetime | None = None,
    include_deleted: bool = False,
) -> list[sa.ColumnElement[bool]]:
    """The WHERE clauses of a `ThreadWhere`: deleted threads out unless asked for by status."""
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
    session: Session, *, limit: int = 50, offset: int = 0, **where: Unpack[ThreadWhere]
) -> list[ThreadSummary]:
    """Threads with their current usage, highest summary pressure first.

    Deleted threads are left out unless `status="deleted"` or `include_deleted=True`.
    """
    filters = thread_filters(**where)
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
        sa.select(conv, Agent.capabilities)
        .outerjoin(Agent, Agent.slug == conv.agent_slug)
        .order_by(conv.summary_pressure_ratio.desc(), conv.thread_id.desc())
    ).all()
    reasons = busy_reasons(session, [row[0].thread_id for row in rows])
    platform = attached_platform(session) if any(is_attached(c.origin) for c, _ in rows) else None
    return [
        summary_row(c, capabilities, reasons.get(c.thread_id), platform=platform)
        for c, capabilities in rows
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


def count_threads(session: Session, **where: Unpack[ThreadWhere]) -> int:
    """How many threads `list_threads` would page through with the same `where`."""
    filters = thread_filters(**where)
    return session.execute(
        sa.select(sa.func.count()).select_from(Conversation).where(*filters)
    ).scalar_one()


def summary_row(
    conv: Conversation,
    capabilities: list[str] | None,
    reason: BusyReason | None,
    *,
    platform: str | None = None,
) -> ThreadSummary:
    """One row; ``platform`` is the attached platform's label (kept for attached threads)."""
    attached = is_attached(conv.origin)  # handed on: no caller tests the origin again
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
        capable=CONTEXT_COMPRESSION in (capabilities or []) and not attached,
        last_compression_at=conv.last_compression_at,
        last_activity_at=conv.last_activity_at,
        checkpoint_id=conv.checkpoint_id,
        attached=attached,
        platform=platform if attached else None,
    )


FORECAST_WINDOW = 20  # the newest usage snapshots per thread a forecast reads


def thread_forecasts(session: Session, items: Sequence[ThreadSummary]) -> dict[str, dict[str, Any]]:
    """`compression.forecast` of each listed thread, from one windowed read of its snapshots.

    Each thread's newest `FORECAST_WINDOW` snapshots (a window function per thread id,
    served by the thread/time index); the current figures are the row's own.
    """
    ids = [item.thread_id for item in items]
    if not ids:
        return {}
    newest_first = (UsageSnapshotRow.measured_at.desc(), UsageSnapshotRow.id.desc())
    rank = sa.func.row_number().over(partition_by=UsageSnapshotRow.thread_id, order_by=newest_first)
    recent = (
        sa.select(
            UsageSnapshotRow.id,
            UsageSnapshotRow.thread_id,
            UsageSnapshotRow.measured_at,
            UsageSnapshotRow.next_llm_input_tokens,
            UsageSnapshotRow.summary_trigger_tokens,
            UsageSnapshotRow.source,
            rank.label("rank"),
        )
        .where(UsageSnapshotRow.thread_id.in_(ids))
        .subquery()
    )
    rows = session.execute(
        sa.select(recent)
        .where(recent.c.rank <= FORECAST_WINDOW)
        .order_by(recent.c.thread_id, recent.c.measured_at, recent.c.id)
    ).all()
    by_thread: dict[str, list[Any]] = {}
    for row in rows:
        by_thread.setdefault(row.thread_id, []).append(row)
    return {
        item.thread_id: forecast(
            by_thread.get(item.thread_id, []),
            next_tokens=item.next_llm_input_tokens,
            trigger_tokens=item.summary_trigger_tokens,
        ).to_dict()
        for item in items
    }
