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
threads' newest snapshots in one query for `compression.forecast`; `active_forecasts` is
the one gated read of the forecasts of recently active threads, behind `crossing_within`
(the threads forecast to cross 85% or 100% within a window: the Overview's "Crossing within
the hour", `threads --crossing-within`) and the ``forecast_crossing`` alerts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol, TypedDict, Unpack

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session

from yuxi_dash.compression.forecast import forecast
from yuxi_dash.printable_record import Record
from yuxi_dash.store.db import is_sqlite
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
    return _summaries(session, thread_filters(**where), limit=limit, offset=offset)


def _summaries(
    session: Session, filters: Sequence[sa.ColumnElement[bool]], *, limit: int, offset: int = 0
) -> list[ThreadSummary]:
    """The rows of the threads matching ``filters``, highest summary pressure first."""
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
CROSSING_FORECASTS_MAX = 500  # threads `crossing_within` forecasts: the most pressured active


class ForecastSubject(Protocol):
    """What `thread_forecasts` reads of a thread: a `ThreadSummary` or a row with these."""

    @property
    def thread_id(self) -> str: ...
    @property
    def next_llm_input_tokens(self) -> int: ...
    @property
    def summary_trigger_tokens(self) -> int: ...


def thread_forecasts(
    session: Session, items: Sequence[ForecastSubject], *, now: datetime | None = None
) -> dict[str, dict[str, Any]]:
    """`compression.forecast` of each listed thread, from one read of its newest
    `FORECAST_WINDOW` snapshots; the current figures are the row's own. With ``now``, the
    seconds count from it (else from each thread's newest model call).
    """
    if not items:
        return {}
    by_thread: dict[str, list[Any]] = {}
    for row in recent_snapshots(session, [item.thread_id for item in items]):
        by_thread.setdefault(row.thread_id, []).append(row)
    return {
        item.thread_id: forecast(
            by_thread.get(item.thread_id, []),
            next_tokens=item.next_llm_input_tokens,
            trigger_tokens=item.summary_trigger_tokens,
            now=now,
        ).to_dict()
        for item in items
    }


def recent_snapshots(
    session: Session, ids: list[str], *, lateral: bool | None = None
) -> Sequence[Any]:
    """Each thread's newest `FORECAST_WINDOW` snapshots, oldest first per thread.

    ``lateral`` (default: unless SQLite): one LATERAL ``LIMIT`` per id, a backward scan of
    ``ix_usage_snapshots_thread_id_measured_at`` that stops after the window. Else a window
    function per thread id, which reads and sorts every snapshot of the listed threads
    (`bench/alerts.py` times both).
    """
    snap = UsageSnapshotRow
    columns = (
        snap.id,
        snap.thread_id,
        snap.measured_at,
        snap.next_llm_input_tokens,
        snap.summary_trigger_tokens,
        snap.source,
    )
    newest_first = (snap.measured_at.desc(), snap.id.desc())
    if lateral is None:
        lateral = not is_sqlite(session)
    if not lateral:
        rank = sa.func.row_number().over(partition_by=snap.thread_id, order_by=newest_first)
        window = sa.select(*columns, rank.label("rank")).where(snap.thread_id.in_(ids)).subquery()
        recent = (
            sa.select(*(window.c[c.key] for c in columns))
            .where(window.c.rank <= FORECAST_WINDOW)
            .subquery()
        )
        return session.execute(
            sa.select(recent).order_by(recent.c.thread_id, recent.c.measured_at, recent.c.id)
        ).all()
    wanted = (
        sa.func.unnest(sa.literal(sorted(set(ids)), ARRAY(sa.String)))
        .table_valued("thread_id")
        .render_derived(name="wanted")
    )
    newest = (
        sa.select(*columns)
        .where(snap.thread_id == wanted.c.thread_id)
        .order_by(*newest_first)
        .limit(FORECAST_WINDOW)
        .lateral()
    )
    return session.execute(
        sa.select(newest)
        .select_from(wanted)
        .join(newest, sa.true())
        .order_by(newest.c.thread_id, newest.c.measured_at, newest.c.id)
    ).all()


def forecast_gate(since: datetime) -> list[sa.ColumnElement[bool]]:
    """Only threads active and measured since ``since`` are forecast: one idle for longer is
    off its recorded pace (the activity index first, then its newest measurement)."""
    return [Conversation.last_activity_at >= since, Conversation.usage_measured_at >= since]


@dataclass(frozen=True)
class ActiveForecasts:
    """`active_forecasts`: the threads read, most pressured first, and their forecasts."""

    rows: list[Any]  # thread_id, next and trigger tokens, agent_slug, origin, status
    forecasts: dict[str, dict[str, Any]]  # thread id -> `compression.forecast`, from now
    more: bool  # more matched than the limit: only the most pressured were forecast


def active_forecasts(
    session: Session,
    where: Sequence[sa.ColumnElement[bool]],
    *,
    since: datetime,
    now: datetime,
    limit: int,
) -> ActiveForecasts:
    """The forecasts of the threads matching ``where`` past `forecast_gate` (``since``), the
    ``limit`` most pressured of them (ties: thread id), the seconds counted from ``now``.

    The one read behind `crossing_within`, the ``forecast_crossing`` alert rules and their
    live measure, so their gates cannot drift apart.
    """
    limit = max(0, int(limit))
    rows = session.execute(
        sa.select(
            Conversation.thread_id,
            Conversation.next_llm_input_tokens,
            Conversation.summary_trigger_tokens,
            Conversation.agent_slug,
            Conversation.origin,
            Conversation.status,
        )
        .where(*forecast_gate(since), *where)
        .order_by(Conversation.summary_pressure_ratio.desc(), Conversation.thread_id.desc())
        .limit(limit + 1)
    ).all()
    return ActiveForecasts(
        rows=list(rows[:limit]),
        forecasts=thread_forecasts(session, rows[:limit], now=now),
        more=len(rows) > limit,
    )


@dataclass(frozen=True)
class CrossingSoon(Record):
    """The threads forecast to cross 85% or 100% of their summary trigger within a window."""

    within_seconds: int
    threads: list[ThreadSummary]  # those crossing 100% first, then those crossing only 85%
    forecasts: dict[str, dict[str, Any]]  # each listed thread's forecast, seconds from now
    forecast: int  # threads below 100% active within the window that were forecast
    left_out: dict[str, int]  # forecast_note -> how many of those the forecast cannot place
    more: bool  # more were active than the limit: the most pressured ones were forecast


def crossing_key(forecast: dict[str, Any], within_seconds: float) -> tuple[int, int] | None:
    """Where a thread stands in `crossing_within`'s order: (0, seconds) when it crosses 100%
    within the window, (1, seconds) when it crosses only 85%, None when neither (or it is
    over already: 0 turns). The seconds are the forecast's: from now when it was made so."""
    for rank, line in enumerate(("100", "85")):
        turns, seconds = forecast.get(f"turns_to_{line}"), forecast.get(f"seconds_to_{line}")
        if turns and seconds is not None and seconds <= within_seconds:
            return rank, int(seconds)
    return None


def crossing_within(
    session: Session,
    within_seconds: int,
    *,
    now: datetime,
    limit: int | None = None,
    **where: Unpack[ThreadWhere],
) -> CrossingSoon:
    """The threads forecast to cross 100% or 85% of their summary trigger within
    ``within_seconds`` of ``now``, at the pace recorded since their last compression: those
    crossing 100% first, then those crossing only 85%, each soonest first (ties: thread id).

    Only threads below 100% measured within the window are forecast (`active_forecasts`),
    the ``limit`` (default `CROSSING_FORECASTS_MAX`) most pressured of them; deleted threads never (whatever the status asked).
    Those the forecast cannot place (too little history since the last compression, no
    growth, no time between calls) are never listed: ``left_out`` counts them per
    `forecast_note`.
    """
    filters = [
        *thread_filters(**where),
        Conversation.status != "deleted",
        Conversation.summary_pressure_ratio < 1.0,
    ]
    since = now - timedelta(seconds=within_seconds)
    limit = CROSSING_FORECASTS_MAX if limit is None else limit
    found = active_forecasts(session, filters, since=since, now=now, limit=limit)
    forecasts = found.forecasts
    ranked: list[tuple[tuple[int, int], str]] = []
    left_out: Counter[str] = Counter()
    for row in found.rows:
        key = crossing_key(forecasts[row.thread_id], within_seconds)
        if key is not None:
            ranked.append((key, row.thread_id))
        elif forecasts[row.thread_id]["forecast_note"]:
            left_out[forecasts[row.thread_id]["forecast_note"]] += 1
    ids = [thread_id for _, thread_id in sorted(ranked)]
    listed = {
        s.thread_id: s
        for s in (
            _summaries(session, [Conversation.thread_id.in_(ids)], limit=len(ids)) if ids else []
        )
    }
    return CrossingSoon(
        within_seconds=int(within_seconds),
        threads=[listed[t] for t in ids if t in listed],
        forecasts={t: forecasts[t] for t in ids},
        forecast=len(found.rows),
        left_out=dict(left_out),
        more=found.more,
    )
