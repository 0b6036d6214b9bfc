"""Shared builders of the forecast tests: threads whose growth is known, written as projection
and compress write usage (`service.usage_writes.apply_usage`), ending a given time before now.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import sqlalchemy as sa

from yuxi_dash import service
from yuxi_dash.service.usage_writes import apply_usage
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Conversation
from yuxi_dash.usage import usage_snapshot

TRIGGER = 8 * 1024  # the trigger of `tests.service.builders.seed_thread`'s agent (8 K)


def grow(
    thread_id: str,
    *tokens: int,
    last_at: datetime,
    every: timedelta = timedelta(minutes=1),
    source: str = "model_call",
    agent: str = "agent-a",
    user_id: str = "u1",
) -> None:
    """One snapshot per next-input figure, ``every`` apart, the newest at ``last_at``; the
    thread (and its agent, able to compress) is created on first use. Checks that the
    thread's current usage is then the last figure, measured at ``last_at``."""
    with session_scope() as session:
        conv = session.scalar(sa.select(Conversation).where(Conversation.thread_id == thread_id))
        if conv is None:
            service.upsert_agent(session, agent, capabilities=["context_compression"])
            conv = service.create_thread(session, thread_id, user_id=user_id, agent_slug=agent)
        first = last_at - every * (len(tokens) - 1)
        for i, figure in enumerate(tokens):
            figures = usage_snapshot(
                llm_input_tokens=figure,
                next_llm_input_tokens=figure,
                context_window=128_000,
                summary_trigger_tokens=TRIGGER,
                summary_active=False,
            )
            apply_usage(session, conv, figures, source=source, measured_at=first + every * i)
        if tokens:
            assert conv.next_llm_input_tokens == tokens[-1], "apply_usage moved no usage"
            assert conv.usage_measured_at == last_at, "the newest snapshot is not the last"
