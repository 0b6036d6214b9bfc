"""What each compression of a thread saved: the input tokens it kept out of the model calls
that followed it, until the next compression, and their price (`compression_savings`).

Formula, per compression record (`store.compressions`) of a thread, oldest first:
``tokens_saved_per_call = max(0, before_tokens - after_tokens)``;
``model_calls_after`` = the thread's recorded model calls (`spend.MODEL_CALL_SOURCES`)
measured at or after the compression's time and before the next compression's (none next:
up to now); ``tokens_avoided = tokens_saved_per_call × model_calls_after``;
``saved_usd`` = those tokens priced as input, each call's at its recorded model's price,
else its thread's agent's, else ``*``'s (`ModelPrices.price_for`; None without prices, or
when no call after it has a price).

Rules: one query per thread (the next compression's time by a window function, the calls
counted by a join and grouped by their model), nothing per compression.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash.costs.prices import ModelPrices
from yuxi_dash.costs.spend import MODEL_CALL_SOURCES
from yuxi_dash.printable_record import Record
from yuxi_dash.store.compressions import CompressionRecord
from yuxi_dash.store.models import Conversation, UsageSnapshotRow


@dataclass(frozen=True)
class CompressionSaving(Record):
    """The input tokens one compression kept out of the calls after it, and their price."""

    compression_id: int
    at: datetime
    trigger: str
    before_tokens: int
    after_tokens: int
    tokens_saved_per_call: int
    model_calls_after: int
    tokens_avoided: int
    saved_usd: float | None


def compression_savings(
    session: Session, prices: ModelPrices | None, thread_id: str
) -> list[CompressionSaving]:
    """The savings of each compression of ``thread_id``, oldest first (none: an empty list)."""
    record = CompressionRecord
    following = (
        sa.select(
            record.id,
            record.thread_id,
            record.at,
            record.trigger,
            record.before_tokens,
            record.after_tokens,
            Conversation.agent_slug.label("agent"),
            sa.func.lead(record.at)
            .over(partition_by=record.thread_id, order_by=(record.at, record.id))
            .label("next_at"),
        )
        .join(Conversation, Conversation.thread_id == record.thread_id)
        .where(record.thread_id == thread_id)
        .subquery()
    )
    call = UsageSnapshotRow
    joined = sa.and_(
        call.thread_id == following.c.thread_id,
        call.source.in_(MODEL_CALL_SOURCES),
        call.measured_at >= following.c.at,
        sa.or_(following.c.next_at.is_(None), call.measured_at < following.c.next_at),
    )
    query = (
        sa.select(
            following.c.id,
            following.c.at,
            following.c.trigger,
            following.c.before_tokens,
            following.c.after_tokens,
            following.c.agent,
            call.model,
            sa.func.count(call.id).label("calls"),
        )
        .select_from(following)
        .outerjoin(call, joined)
        .group_by(
            following.c.id,
            following.c.at,
            following.c.trigger,
            following.c.before_tokens,
            following.c.after_tokens,
            following.c.agent,
            call.model,
        )
        .order_by(following.c.at, following.c.id)
    )
    rows: dict[int, Any] = {}  # compression id -> its first row (the compression's fields)
    calls: dict[int, int] = {}
    dollars: dict[int, Decimal | None] = {}
    for row in session.execute(query):
        key = int(row.id)
        rows.setdefault(key, row)
        per_call = max(0, int(row.before_tokens) - int(row.after_tokens))
        calls[key] = calls.get(key, 0) + int(row.calls)
        price = prices.price_for(row.model, row.agent) if prices is not None else None
        held = dollars.get(key)
        if price is not None:
            dollars[key] = (held or Decimal(0)) + price.exact_cost(per_call * int(row.calls), 0)
        else:
            dollars[key] = held
    savings = []
    for key, row in rows.items():
        per_call = max(0, int(row.before_tokens) - int(row.after_tokens))
        cost = dollars[key]
        savings.append(
            CompressionSaving(
                compression_id=key,
                at=row.at,
                trigger=str(row.trigger),
                before_tokens=int(row.before_tokens),
                after_tokens=int(row.after_tokens),
                tokens_saved_per_call=per_call,
                model_calls_after=calls[key],
                tokens_avoided=per_call * calls[key],
                saved_usd=float(cost) if cost is not None else None,
            )
        )
    return savings
