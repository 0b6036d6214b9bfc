"""Dashboard-only aggregates for the pressure overview, computed in SQL.

KPIs over the (filtered) thread population, the population binned into a
heatmap grid by the database (so 100,000 threads become at most a few thousand
cells, never 100,000 rows shipped to the browser), the threads above a pressure
floor as individual points, and compressions in a recent window split auto /
manual. `pressure_population` gives the KPIs, the heatmap, the number of
points and the deleted threads left out from one scan of the population (the
bins carry the counts). Reads only; every function
takes a Session first. Thread filters mean what they mean in
`yuxi_dash.store.queries.list_threads`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import InstrumentedAttribute, Session

from yuxi_dash.printable_record import Record
from yuxi_dash.store.models import Conversation, UsageSnapshotRow
from yuxi_dash.store.thread_list import thread_filters as _thread_filters
from yuxi_dash.usage import SUGGESTION_RATIO

POINTS_FLOOR = 0.75  # threads at or above this pressure are drawn one by one
MAX_POINTS = 5000  # altair's default row limit: never ship more points than this
HEATMAP_X_BINS = 40  # context usage 0..1 in steps of 0.025
HEATMAP_Y_STEP = 0.05  # summary pressure in steps of 0.05 ...
HEATMAP_Y_MAX = 1.5  # ... up to 1.5; anything higher lands in the top row
_EPSILON = 1e-9  # 0.85 / 0.05 is 16.999999999999996 in floating point: bin it as 17


@dataclass(frozen=True)
class ThreadFilter:
    """The overview's filters (all optional): agent slug, user id, status, active since."""

    agent: str | None = None
    user_id: str | None = None
    status: str | None = None
    active_since: datetime | None = None

    def clauses(self, *, include_deleted: bool = False) -> list[sa.ColumnElement[bool]]:
        return _thread_filters(
            min_pressure=None,
            agent=self.agent,
            user_id=self.user_id,
            status=self.status,
            active_since=self.active_since,
            include_deleted=include_deleted,
        )


@dataclass(frozen=True)
class OverviewKpis:
    threads: int
    at_or_over_suggestion: int  # summary pressure >= 0.85
    over_threshold: int  # summary pressure > 1.0
    summary_active: int
    compressions_auto: int  # in the window (default: last 24 h)
    compressions_manual: int

    @property
    def summary_active_share(self) -> float:
        return self.summary_active / self.threads if self.threads else 0.0

    @property
    def compressions(self) -> int:
        return self.compressions_auto + self.compressions_manual

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "summary_active_share": self.summary_active_share,
            "compressions": self.compressions,
        }


@dataclass(frozen=True)
class HeatmapCell(Record):
    """A bin of the population: its lower-left corner, its size, and how many threads."""

    x0: float
    x1: float
    y0: float
    y1: float
    threads: int


@dataclass(frozen=True)
class PressurePoint(Record):
    thread_id: str
    user_id: str
    agent_slug: str
    context_usage_ratio: float
    summary_pressure_ratio: float
    next_llm_input_tokens: int
    summary_trigger_tokens: int
    llm_input_tokens: int
    context_window: int
    origin: str  # "dashboard" (ours) or "attached" (a platform's)


def _floor_int(session: Session, expr: sa.ColumnElement[float]) -> sa.ColumnElement[int]:
    """floor() as an integer on every backend (PostgreSQL's CAST rounds; SQLite's truncates)."""
    if session.get_bind().dialect.name == "sqlite":
        return sa.cast(expr, sa.Integer)  # values here are never negative: truncation is floor
    return sa.cast(sa.func.floor(expr), sa.Integer)


def _clamp(expr: sa.ColumnElement[int], low: int, high: int) -> sa.ColumnElement[int]:
    return sa.case((expr < low, low), (expr > high, high), else_=expr)


def compressions_since(
    session: Session, since: datetime, *, where: ThreadFilter | None = None
) -> tuple[int, int]:
    """(automatic, manual) compressions recorded at or after `since`."""
    query = (
        sa.select(UsageSnapshotRow.source, sa.func.count())
        .where(
            UsageSnapshotRow.measured_at >= since,
            UsageSnapshotRow.source.in_(("auto_compaction", "manual_compression")),
        )
        .group_by(UsageSnapshotRow.source)
    )
    clauses = (where or ThreadFilter()).clauses()
    if clauses:
        query = query.join(
            Conversation, Conversation.thread_id == UsageSnapshotRow.thread_id
        ).where(*clauses)
    counts = dict(session.execute(query).all())
    return int(counts.get("auto_compaction", 0)), int(counts.get("manual_compression", 0))


def overview_kpis(
    session: Session,
    *,
    where: ThreadFilter | None = None,
    now: datetime | None = None,
    window: timedelta = timedelta(hours=24),
) -> OverviewKpis:
    """Counts over the filtered population in one pass, plus compressions in `window`."""
    where = where or ThreadFilter()
    pressure = Conversation.summary_pressure_ratio
    row = session.execute(
        sa.select(
            sa.func.count(),
            sa.func.count().filter(pressure >= SUGGESTION_RATIO),
            sa.func.count().filter(pressure > 1.0),
            sa.func.count().filter(Conversation.summary_active.is_(True)),
        )
        .select_from(Conversation)
        .where(*where.clauses())
    ).one()
    now = now or datetime.now(UTC)
    auto, manual = compressions_since(session, now - window, where=where)
    return OverviewKpis(
        threads=int(row[0]),
        at_or_over_suggestion=int(row[1]),
        over_threshold=int(row[2]),
        summary_active=int(row[3]),
        compressions_auto=auto,
        compressions_manual=manual,
    )


@dataclass(frozen=True)
class Population:
    """What the overview reads of the filtered population, from one scan of it."""

    kpis: OverviewKpis
    cells: list[HeatmapCell]
    at_or_above_points_floor: int  # threads at or above POINTS_FLOOR: the points that exist
    deleted: int | None  # deleted threads the other filters match; None with a status filter


def _binned(
    session: Session, where: ThreadFilter, *, with_deleted: bool = False
) -> list[tuple[int, ...]]:
    """One scan of the filtered population, grouped into heatmap bins with the KPI counts.

    Each row: x bin, y bin, threads, at or over the suggestion, over the
    threshold, summary active, at or above the points floor, deleted. Summing
    the rows gives `overview_kpis`'s counts. `with_deleted` (no status filter)
    also scans the deleted threads, counted in the last column only; a bin
    holding nothing else has 0 threads.
    """
    y_bins = round(HEATMAP_Y_MAX / HEATMAP_Y_STEP)
    pressure = Conversation.summary_pressure_ratio
    x_bin = _clamp(
        _floor_int(session, Conversation.context_usage_ratio * HEATMAP_X_BINS + _EPSILON),
        0,
        HEATMAP_X_BINS - 1,
    ).label("x_bin")
    y_bin = _clamp(
        _floor_int(session, pressure / HEATMAP_Y_STEP + _EPSILON),
        0,
        y_bins - 1,
    ).label("y_bin")
    inner = (
        sa.select(
            x_bin,
            y_bin,
            pressure.label("pressure"),
            Conversation.summary_active.label("active"),
            Conversation.status.label("status"),
        )
        .where(*where.clauses(include_deleted=with_deleted))
        .subquery()
    )
    live: list[sa.ColumnElement[bool]] = [inner.c.status != "deleted"] if with_deleted else []
    deleted = sa.func.count().filter(inner.c.status == "deleted") if with_deleted else sa.literal(0)
    rows = session.execute(
        sa.select(
            inner.c.x_bin,
            inner.c.y_bin,
            sa.func.count().filter(*live) if live else sa.func.count(),
            sa.func.count().filter(inner.c.pressure >= SUGGESTION_RATIO, *live),
            sa.func.count().filter(inner.c.pressure > 1.0, *live),
            sa.func.count().filter(inner.c.active.is_(True), *live),
            sa.func.count().filter(inner.c.pressure >= POINTS_FLOOR, *live),
            deleted,
        )
        .group_by(inner.c.x_bin, inner.c.y_bin)
        .order_by(inner.c.x_bin, inner.c.y_bin)
    ).all()
    return [tuple(int(value) for value in row) for row in rows]


def _cells(rows: list[tuple[int, ...]]) -> list[HeatmapCell]:
    x_step = 1.0 / HEATMAP_X_BINS
    return [
        HeatmapCell(
            x0=round(row[0] * x_step, 6),
            x1=round((row[0] + 1) * x_step, 6),
            y0=round(row[1] * HEATMAP_Y_STEP, 6),
            y1=round((row[1] + 1) * HEATMAP_Y_STEP, 6),
            threads=row[2],
        )
        for row in rows
        if row[2]
    ]


def pressure_heatmap(session: Session, *, where: ThreadFilter | None = None) -> list[HeatmapCell]:
    """The population binned by (context usage, summary pressure), counted by the database."""
    return _cells(_binned(session, where or ThreadFilter()))


def pressure_population(
    session: Session,
    *,
    where: ThreadFilter | None = None,
    now: datetime | None = None,
    window: timedelta = timedelta(hours=24),
) -> Population:
    """`overview_kpis`, `pressure_heatmap`, `count_at_or_above` and, without a status filter,
    how many deleted threads the filters leave out: one scan of the threads (the page's read).
    """
    where = where or ThreadFilter()
    with_deleted = where.status is None
    rows = _binned(session, where, with_deleted=with_deleted)
    now = now or datetime.now(UTC)
    auto, manual = compressions_since(session, now - window, where=where)
    kpis = OverviewKpis(
        threads=sum(r[2] for r in rows),
        at_or_over_suggestion=sum(r[3] for r in rows),
        over_threshold=sum(r[4] for r in rows),
        summary_active=sum(r[5] for r in rows),
        compressions_auto=auto,
        compressions_manual=manual,
    )
    return Population(
        kpis=kpis,
        cells=_cells(rows),
        at_or_above_points_floor=sum(r[6] for r in rows),
        deleted=sum(r[7] for r in rows) if with_deleted else None,
    )


def pressure_points(
    session: Session,
    *,
    where: ThreadFilter | None = None,
    floor: float = POINTS_FLOOR,
    limit: int = MAX_POINTS,
) -> list[PressurePoint]:
    """Threads at or above `floor` pressure, highest first, at most `limit` of them."""
    where = where or ThreadFilter()
    rows = session.execute(
        sa.select(
            Conversation.thread_id,
            Conversation.user_id,
            Conversation.agent_slug,
            Conversation.context_usage_ratio,
            Conversation.summary_pressure_ratio,
            Conversation.next_llm_input_tokens,
            Conversation.summary_trigger_tokens,
            Conversation.llm_input_tokens,
            Conversation.context_window,
            Conversation.origin,
        )
        .where(Conversation.summary_pressure_ratio >= floor, *where.clauses())
        .order_by(Conversation.summary_pressure_ratio.desc(), Conversation.thread_id)
        .limit(limit)
    ).all()
    return [PressurePoint(**row._asdict()) for row in rows]


def count_at_or_above(
    session: Session, *, where: ThreadFilter | None = None, floor: float = POINTS_FLOOR
) -> int:
    """How many threads are at or above `floor` pressure (the points that exist, drawn or not)."""
    where = where or ThreadFilter()
    return session.execute(
        sa.select(sa.func.count())
        .select_from(Conversation)
        .where(Conversation.summary_pressure_ratio >= floor, *where.clauses())
    ).scalar_one()


def filter_choices(session: Session) -> dict[str, list[str]]:
    """The distinct agents, users and statuses of non-deleted threads, for the filter widgets."""
    live = Conversation.status != "deleted"

    def distinct(column: InstrumentedAttribute[str]) -> list[str]:
        return [
            v for v in session.scalars(sa.select(column).where(live).distinct().order_by(column))
        ]

    return {
        "agents": distinct(Conversation.agent_slug),
        "users": distinct(Conversation.user_id),
        "statuses": distinct(Conversation.status),
    }
