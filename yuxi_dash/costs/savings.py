"""What each compression of a thread saved: the input tokens it kept out of the model calls
that followed it, until the next compression, and their price (`compression_savings`).

Formula, per compression record (`store.compressions`) of a thread, oldest first:
``tokens_saved_per_call = max(0, before_tokens - after_tokens)``;
``model_calls_after`` = the thread's recorded model calls (`spend.MODEL_CALL_SOURCES`)
measured at or after the compression's time and before the next compression's (none next:
up to now); ``tokens_avoided = tokens_saved_per_call × model_calls_after``;
``saved_usd`` = those tokens priced as input at the thread's agent's price (None without
prices, or with no entry for the agent and no ``*``).

Rules: one query per thread (the next compression's time by a window function, the calls
counted by a join), nothing per compression.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

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
        )
        .order_by(following.c.at, following.c.id)
    )
    savings = []
    for row in session.execute(query):
        price = prices.price_for(None, row.agent) if prices is not None else None
        per_call = max(0, int(row.before_tokens) - int(row.after_tokens))
        avoided = per_call * int(row.calls)
        savings.append(
            CompressionSaving(
                compression_id=int(row.id),
                at=row.at,
                trigger=str(row.trigger),
                before_tokens=int(row.before_tokens),
                after_tokens=int(row.after_tokens),
                tokens_saved_per_call=per_call,
                model_calls_after=int(row.calls),
                tokens_avoided=avoided,
                saved_usd=price.cost(avoided, 0) if price is not None else None,
            )
        )
    return savings
