"""What the recorded model calls cost: per thread, user, agent and day (`spend`), per listed
thread (`thread_costs`), per agent and day (`spend_per_agent_day`), per bounded agent label
for `/metrics` (`spend_per_agent_label`); the agents and recorded models (`matched_names`).

A recorded model call is a `usage_snapshots` row of source ``model_call`` or
``auto_compaction`` (not ``manual_compression``). Its input tokens are ``llm_input_tokens``;
its output tokens the provider's (``output_tokens``) when recorded, else an estimate: what
the answer added to the next input (``next_llm_input_tokens - llm_input_tokens``, 0 when not
more). It is priced by its recorded ``model``, then its agent, then ``*`` (`price_for`).

Rules: one GROUP BY query per view (its key, the agent and the model: the price's keys),
then priced and summed exactly (`Decimal`). Without prices every ``cost_usd`` is None; a
call no entry prices counts in ``unpriced_calls``, not in ``cost_usd`` (None when no call of
the row is priced). Deleted threads count: their calls were paid for. A view limited to N
rows keeps the most spent, or for days the newest N (`limited`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.orm import QueryableAttribute, Session

from yuxi_dash.costs.prices import ModelPrices
from yuxi_dash.errors import InvalidInput
from yuxi_dash.printable_record import Record
from yuxi_dash.store.db import is_sqlite
from yuxi_dash.store.labels import agent_label, agent_label_column
from yuxi_dash.store.models import Conversation, UsageSnapshotRow

MODEL_CALL_SOURCES = ("model_call", "auto_compaction")
SpendBy = Literal["thread", "user", "agent", "day"]
SPEND_VIEWS: tuple[SpendBy, ...] = ("thread", "user", "agent", "day")
THREAD_CHUNK = 500  # thread ids per IN list (`thread_costs`)


@dataclass(frozen=True)
class Spend(Record):
    """The recorded model calls of one thread, user, agent or day (``key``), and their cost."""

    key: str
    model_calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    unpriced_calls: int


@dataclass(frozen=True)
class AgentDaySpend(Record):
    """One agent's (its label's) recorded model calls on one UTC day (``YYYY-MM-DD``)."""

    day: str
    agent: str
    model_calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    unpriced_calls: int


def known_agents(session: Session) -> frozenset[str]:
    """Every agent slug a thread names (deleted threads too): the agent keys a price can match."""
    return frozenset(session.scalars(sa.select(Conversation.agent_slug).distinct()))


def matched_names(session: Session, prices: ModelPrices | None) -> frozenset[str]:
    """`known_agents` and the prices file's keys some recorded call names as its model."""
    agents = known_agents(session)
    keys = sorted(set(prices.prices) - agents) if prices is not None else []
    if not keys:
        return agents
    named = sa.select(UsageSnapshotRow.model).where(UsageSnapshotRow.model.in_(keys)).distinct()
    return agents | frozenset(str(name) for name in session.scalars(named))


def output_tokens_column() -> sa.ColumnElement[int]:
    """A call's output tokens: the provider's when recorded, else what its answer added to
    the next input, never below 0."""
    row = UsageSnapshotRow
    added = row.next_llm_input_tokens - row.llm_input_tokens
    return sa.func.coalesce(row.output_tokens, sa.case((added > 0, added), else_=0))


def day_column(session: Session) -> sa.ColumnElement[str]:
    """The UTC day (``YYYY-MM-DD``) of a call, on SQLite (naive UTC text) and PostgreSQL."""
    measured = UsageSnapshotRow.measured_at
    if is_sqlite(session):
        return sa.func.date(measured)
    # constants written into the SQL: a bound parameter would make the GROUP BY's expression
    # another one than the SELECT's on PostgreSQL
    utc = sa.literal_column("'UTC'", sa.String)
    shape = sa.literal_column("'YYYY-MM-DD'", sa.String)
    return sa.func.to_char(sa.func.timezone(utc, measured), shape)


def _calls_query(
    keys: Sequence[sa.ColumnElement[Any]], agent: QueryableAttribute[str]
) -> sa.Select[Any]:
    """SUM of the calls' tokens grouped by ``keys``, the agent and the model, calls joined to
    threads."""
    row = UsageSnapshotRow
    return (
        sa.select(
            *keys,
            agent.label("agent"),
            row.model.label("model"),
            sa.func.count().label("calls"),
            sa.func.coalesce(sa.func.sum(row.llm_input_tokens), 0).label("input_tokens"),
            sa.func.coalesce(sa.func.sum(output_tokens_column()), 0).label("output_tokens"),
        )
        .join(Conversation, Conversation.thread_id == row.thread_id)
        .where(row.source.in_(MODEL_CALL_SOURCES))
        .group_by(*keys, agent, row.model)
    )


@dataclass
class _Sum:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: Decimal = Decimal(0)
    priced_calls: int = 0

    def add(self, prices: ModelPrices | None, row: Any) -> None:
        calls, inp, out = int(row.calls), int(row.input_tokens), int(row.output_tokens)
        self.calls += calls
        self.input_tokens += inp
        self.output_tokens += out
        price = prices.price_for(row.model, row.agent) if prices is not None else None
        if price is not None:
            self.cost += price.exact_cost(inp, out)
            self.priced_calls += calls

    def cost_usd(self, prices: ModelPrices | None) -> float | None:
        if prices is None or (self.calls and not self.priced_calls):
            return None
        return float(self.cost)

    def unpriced_calls(self, prices: ModelPrices | None) -> int:
        return self.calls - self.priced_calls if prices is not None else 0


def _summed(rows: Iterable[Any], prices: ModelPrices | None, key_of: Any) -> dict[Any, _Sum]:
    sums: dict[Any, _Sum] = {}
    for row in rows:
        entry = sums.setdefault(key_of(row), _Sum())
        entry.add(prices, row)
    return sums


def spend(
    session: Session,
    prices: ModelPrices | None,
    by: SpendBy,
    *,
    since: datetime | None = None,
    limit: int | None = None,
    thread_id: str | None = None,
) -> list[Spend]:
    """The recorded calls and their cost per ``by``: by day oldest first, else most spent
    (dollars, then tokens) first. ``since``: only calls measured then or later;
    ``thread_id``: only that thread's calls."""
    if by not in SPEND_VIEWS:
        raise InvalidInput(f"spend by {by!r}: use one of {', '.join(SPEND_VIEWS)}")
    key: sa.ColumnElement[str] = {
        "thread": Conversation.thread_id,
        "user": Conversation.user_id,
        "agent": Conversation.agent_slug,
        "day": day_column(session),
    }[by].label("key")
    query = _calls_query([key], Conversation.agent_slug)
    if since is not None:
        query = query.where(UsageSnapshotRow.measured_at >= since)
    if thread_id is not None:
        query = query.where(UsageSnapshotRow.thread_id == thread_id)
    sums = _summed(session.execute(query), prices, lambda row: str(row.key))
    items = [
        Spend(
            key=name,
            model_calls=total.calls,
            input_tokens=total.input_tokens,
            output_tokens=total.output_tokens,
            cost_usd=total.cost_usd(prices),
            unpriced_calls=total.unpriced_calls(prices),
        )
        for name, total in sums.items()
    ]
    if by == "day":
        items.sort(key=lambda item: item.key)
    else:
        items.sort(key=lambda i: (-(i.cost_usd or 0.0), -(i.input_tokens + i.output_tokens), i.key))
    return limited(items, by, limit)


def limited(items: Sequence[Spend], by: SpendBy, limit: int | None) -> list[Spend]:
    """At most ``limit`` of `spend`'s rows: by day the newest (still oldest first), else the
    first (the most spent)."""
    if limit is None or len(items) <= limit:
        return list(items)
    return list(items[len(items) - limit :] if by == "day" else items[:limit])


def thread_costs(
    session: Session, prices: ModelPrices | None, thread_ids: Collection[str]
) -> dict[str, float | None]:
    """The dollars of each listed thread's recorded calls (None for all without prices; a
    thread with no call costs 0). One query per `THREAD_CHUNK` ids."""
    if prices is None:
        return dict.fromkeys(thread_ids)
    ids = sorted(set(thread_ids))
    sums: dict[Any, _Sum] = {}
    for start in range(0, len(ids), THREAD_CHUNK):
        chunk = ids[start : start + THREAD_CHUNK]
        query = _calls_query([Conversation.thread_id.label("key")], Conversation.agent_slug)
        query = query.where(UsageSnapshotRow.thread_id.in_(chunk))
        sums.update(_summed(session.execute(query), prices, lambda row: str(row.key)))
    return {
        thread_id: (sums[thread_id].cost_usd(prices) if thread_id in sums else 0.0)
        for thread_id in thread_ids
    }


def spend_per_agent_day(
    session: Session,
    prices: ModelPrices | None,
    *,
    top: Collection[str],
    since: datetime | None = None,
) -> list[AgentDaySpend]:
    """Per UTC day and agent label (the ``top`` agents, then ``other``: `store.labels`), the
    recorded calls and their cost (priced by each call's model or real agent, then summed per
    label)."""
    day = day_column(session).label("day")
    label = agent_label_column(top).label("label")
    query = _calls_query([day, label], Conversation.agent_slug)
    if since is not None:
        query = query.where(UsageSnapshotRow.measured_at >= since)
    sums = _summed(session.execute(query), prices, lambda row: (str(row.day), str(row.label)))
    return [
        AgentDaySpend(
            day=day_value,
            agent=agent,
            model_calls=total.calls,
            input_tokens=total.input_tokens,
            output_tokens=total.output_tokens,
            cost_usd=total.cost_usd(prices),
            unpriced_calls=total.unpriced_calls(prices),
        )
        for (day_value, agent), total in sorted(sums.items())
    ]


def spend_per_agent_label(
    session: Session, prices: ModelPrices | None, *, top: Collection[str]
) -> list[Spend]:
    """Every recorded call per agent label (the ``top`` agents, then ``other``: `store.labels`),
    priced by each call's model or real agent: what `/metrics` counts. Ordered by label. Grouped
    by agent and model in SQL and labelled here (no CASE per row); it reads every recorded call (bench/costs.py)."""
    rows = session.execute(_calls_query([], Conversation.agent_slug))
    sums = _summed(rows, prices, lambda row: agent_label(str(row.agent), top))
    return [
        Spend(
            key=name,
            model_calls=total.calls,
            input_tokens=total.input_tokens,
            output_tokens=total.output_tokens,
            cost_usd=total.cost_usd(prices),
            unpriced_calls=total.unpriced_calls(prices),
        )
        for name, total in sorted(sums.items())
    ]
