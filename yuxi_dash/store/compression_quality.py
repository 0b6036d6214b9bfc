"""Fleet figures of the compression records, aggregated in SQL (the Compression quality page).

Every figure reads only the denormalized columns of `store.compressions.CompressionRecord`
(never its ledger or summary), and the database does the counting: compressions and
tokens saved per day, the cited evidence kept in view per agent, the totals, and the
compressions that lost or hid the most cited evidence. "Hid": cited items left recoverable
(``cited_total - cited_visible - cited_lost``); "lost": ``cited_lost``. Filters
(`QualityFilter`): agent slug, trigger (automatic / manual), origin name (own / attached,
`store.origin.origin_name`) and a start moment; each is a bound parameter. Days are UTC
days. Also one record by its id (`compression_by_id`, a link to it). Reads only; every
function takes a Session first.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash import validation
from yuxi_dash.errors import InvalidInput
from yuxi_dash.printable_record import Record
from yuxi_dash.store.compressions import (
    TRIGGER_AUTOMATIC,
    TRIGGER_MANUAL,
    CompressionRecord,
    CompressionView,
)
from yuxi_dash.store.origin import ATTACHED_NAME, OWN_NAME

TRIGGERS = (TRIGGER_AUTOMATIC, TRIGGER_MANUAL)
ORIGINS = (OWN_NAME, ATTACHED_NAME)
AGENTS_SHOWN = 25  # agents in the per-agent figures: the ones with the most compressions
WORST_SHOWN = 50  # compressions in the "lost or hid the most" table

_R = CompressionRecord
_SAVED = _R.before_tokens - _R.after_tokens
_HIDDEN = _R.cited_total - _R.cited_visible  # cited, and not in view: recoverable or lost


@dataclass(frozen=True)
class QualityFilter:
    """The page's filters; None means every value."""

    agent: str | None = None
    trigger: str | None = None  # TRIGGERS
    origin: str | None = None  # ORIGINS
    since: datetime | None = None

    def clauses(self) -> list[sa.ColumnElement[bool]]:
        """The WHERE clauses; InvalidInput for a value no record can hold."""
        clauses: list[sa.ColumnElement[bool]] = []
        if self.agent is not None:
            clauses.append(_R.agent_slug == validation.text(self.agent, "agent", limit=128))
        if self.trigger is not None:
            if self.trigger not in TRIGGERS:
                raise InvalidInput(f"trigger must be one of {', '.join(TRIGGERS)}")
            clauses.append(_R.trigger == self.trigger)
        if self.origin is not None:
            if self.origin not in ORIGINS:
                raise InvalidInput(f"origin must be one of {', '.join(ORIGINS)}")
            clauses.append(_R.origin == self.origin)
        if self.since is not None:
            clauses.append(_R.at >= self.since)
        return clauses


@dataclass(frozen=True)
class QualityTotals(Record):
    compressions: int
    tokens_saved: int
    cited_total: int
    cited_visible: int
    cited_lost: int
    evidence_recoverable: int
    evidence_lost: int
    losing: int  # compressions that lost cited evidence

    @property
    def cited_kept_share(self) -> float | None:
        """Cited items kept in view over all cited items; None when nothing was cited."""
        return self.cited_visible / self.cited_total if self.cited_total else None


@dataclass(frozen=True)
class DayRow(Record):
    day: date  # UTC
    trigger: str
    compressions: int
    tokens_saved: int


@dataclass(frozen=True)
class AgentRow(Record):
    agent_slug: str
    compressions: int
    tokens_saved: int
    cited_total: int
    cited_visible: int
    cited_lost: int


@dataclass(frozen=True)
class WorstRow(Record):
    """One compression that lost or hid cited evidence."""

    id: int
    thread_id: str
    at: datetime
    agent_slug: str
    trigger: str
    actor: str | None
    origin: str  # origin name: own | attached
    before_tokens: int
    after_tokens: int
    cited_total: int
    cited_visible: int
    cited_lost: int

    @property
    def cited_hidden(self) -> int:
        """Cited items left recoverable: out of view, in a saved file."""
        return self.cited_total - self.cited_visible - self.cited_lost


def _int(value: Any) -> int:
    return int(value or 0)


def _day_column(session: Session) -> sa.ColumnElement[Any]:
    """The record's UTC day (SQLite keeps UTC text; PostgreSQL a timestamptz)."""
    if session.get_bind().dialect.name == "sqlite":
        return sa.func.date(_R.at)
    return sa.func.date(sa.func.timezone("UTC", _R.at))


def _as_date(value: Any) -> date:
    return value if isinstance(value, date) else date.fromisoformat(str(value)[:10])


def totals(session: Session, where: QualityFilter | None = None) -> QualityTotals:
    """Counts and sums over the filtered records, in one scan."""
    row = session.execute(
        sa.select(
            sa.func.count(),
            sa.func.sum(_SAVED),
            sa.func.sum(_R.cited_total),
            sa.func.sum(_R.cited_visible),
            sa.func.sum(_R.cited_lost),
            sa.func.sum(_R.evidence_recoverable),
            sa.func.sum(_R.evidence_lost),
            sa.func.count().filter(_R.cited_lost > 0),
        ).where(*(where or QualityFilter()).clauses())
    ).one()
    return QualityTotals(*(_int(value) for value in row))


def per_day(session: Session, where: QualityFilter | None = None) -> list[DayRow]:
    """Compressions and tokens saved per UTC day and trigger, oldest day first."""
    day = _day_column(session).label("day")
    rows = session.execute(
        sa.select(day, _R.trigger, sa.func.count(), sa.func.sum(_SAVED))
        .where(*(where or QualityFilter()).clauses())
        .group_by(day, _R.trigger)
        .order_by(day, _R.trigger)
    ).all()
    return [DayRow(_as_date(d), str(t), _int(n), _int(s)) for d, t, n, s in rows]


def per_agent(
    session: Session, where: QualityFilter | None = None, *, limit: int = AGENTS_SHOWN
) -> tuple[list[AgentRow], int]:
    """(the ``limit`` agents with the most compressions, most first; how many agents in all),
    in one scan (the number of agents is a window count over the groups)."""
    limit = validation.non_negative(limit, "limit")
    compressions = sa.func.count().label("compressions")
    rows = session.execute(
        sa.select(
            _R.agent_slug,
            compressions,
            sa.func.sum(_SAVED),
            sa.func.sum(_R.cited_total),
            sa.func.sum(_R.cited_visible),
            sa.func.sum(_R.cited_lost),
            sa.func.count().over().label("agents"),
        )
        .where(*(where or QualityFilter()).clauses())
        .group_by(_R.agent_slug)
        .order_by(compressions.desc(), _R.agent_slug)
        .limit(limit)
    ).all()
    agents = [AgentRow(str(row[0]), *(_int(v) for v in row[1:6])) for row in rows]
    return agents, _int(rows[0][6]) if rows else 0


def worst(
    session: Session, where: QualityFilter | None = None, *, limit: int = WORST_SHOWN
) -> list[WorstRow]:
    """The compressions that lost the most cited items, then hid the most, newest first."""
    limit = validation.non_negative(limit, "limit")
    rows = session.execute(
        sa.select(
            _R.id,
            _R.thread_id,
            _R.at,
            _R.agent_slug,
            _R.trigger,
            _R.actor,
            _R.origin,
            _R.before_tokens,
            _R.after_tokens,
            _R.cited_total,
            _R.cited_visible,
            _R.cited_lost,
        )
        .where(*(where or QualityFilter()).clauses(), _HIDDEN > 0)
        .order_by(_R.cited_lost.desc(), _HIDDEN.desc(), _R.at.desc(), _R.id.desc())
        .limit(limit)
    ).all()
    return [WorstRow(**row._asdict()) for row in rows]


def agents(session: Session) -> list[str]:
    """Every agent slug some record names, for the filter."""
    return list(session.scalars(sa.select(_R.agent_slug).distinct().order_by(_R.agent_slug)))


def compression_by_id(session: Session, compression_id: int) -> CompressionView | None:
    """One record by its id (a link names it), or None."""
    row = session.get(_R, validation.db_id(compression_id, "compression id"))
    return None if row is None else CompressionView.of(row)
