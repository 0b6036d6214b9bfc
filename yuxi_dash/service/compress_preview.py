"""The compress dialog's preview: what a compress would do now, read-only.

`preview_own_thread` (ours) and `sources.attached` (the platform's, read from its
checkpointer) lock nothing and write nothing; both end in `estimated_preview`. It runs
the engine's estimate of the compress's own path (`compression.estimate`: the real
summary when the summarizer is deterministic, as the extractive default is; no model is
ever called), and says why a compress would not summarize: the refusal the caller found
first, else the engine's reason (insufficient_history). Busy "compressing": another
compress holds the thread's lease.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash import validation
from yuxi_dash.agents import DEFAULT_SUMMARY_KEEP_MESSAGES, DEFAULT_TOOL_RESULT_TOKEN_LIMIT
from yuxi_dash.compression import (
    Summarizer,
    estimate_summary,
    get_summarizer,
    summary_readiness,
)
from yuxi_dash.compression.thread_state import ThreadContextState
from yuxi_dash.printable_record import Record
from yuxi_dash.service.locking import COMPRESS_BUSY_REASON, compress_in_progress, require_thread
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Agent, Conversation
from yuxi_dash.store.queries import busy_reason
from yuxi_dash.store.thread_store import (
    StoredState,
    load_state,
)


@dataclass(frozen=True)
class CompressionPreview(Record):
    """What a compress would do now, read-only: nothing is locked, summarized or written."""

    thread_id: str
    messages_to_summarize: int
    estimated_before_tokens: int
    estimated_after_tokens: int
    checkpoint_id: str | None  # the checkpoint the preview read (the stale-click guard's value)
    busy_reason: str | None
    capable: bool
    reason: str | None  # why a compress would not summarize (insufficient_history, ...)
    note: str | None = None  # insufficient_history in words (`compression.summary_readiness`)
    cited_total: int = 0  # items the assistant cited in the part a compress would summarize
    cited_in_view: int = 0  # of them, the ones the summary would keep in view


def preview_own_thread(
    thread_id: str,
    settings: Settings | None = None,
    *,
    user_id: str | None = None,
    summarizer: Summarizer | None = None,
) -> CompressionPreview:
    """What a compress of our own thread would summarize now, and the estimate; writes nothing."""
    settings = settings or get_settings()
    thread_id = validation.thread_id(thread_id)
    with session_scope(settings) as session:
        conv = session.scalar(sa.select(Conversation).where(Conversation.thread_id == thread_id))
        conv = require_thread(conv, thread_id, user_id=user_id)
        agent = session.scalar(sa.select(Agent).where(Agent.slug == conv.agent_slug))
        reason_busy = lease_or_busy_reason(session, conv)
        limits = agent_limits(agent)
        capable = bool(agent and agent.compression_capable)
        refusal = None
        if agent is None:
            refusal = "agent_not_found"
        elif not capable:
            refusal = "compression_unsupported"
        elif reason_busy:
            refusal = "thread_busy"
    return estimated_preview(
        thread_id,
        load_state(thread_id, settings),
        limits,
        summarizer=summarizer or get_summarizer(settings),
        evidence_budget_tokens=settings.summary_evidence_budget_tokens,
        busy=reason_busy,
        refusal=refusal,
        capable=capable,
    )


def lease_or_busy_reason(session: Session, conv: Conversation) -> str | None:
    """Why the thread is busy: its run or request, else another compress's live lease."""
    return busy_reason(session, conv.thread_id) or (
        COMPRESS_BUSY_REASON if compress_in_progress(conv) else None
    )


def agent_limits(agent: Agent | None) -> tuple[int, int]:
    """The agent's (messages kept, tool-result token limit); our defaults without one."""
    if agent is None:
        return DEFAULT_SUMMARY_KEEP_MESSAGES, DEFAULT_TOOL_RESULT_TOKEN_LIMIT
    return agent.summary_keep_messages, agent.summary_tool_result_token_limit


def estimated_preview(
    thread_id: str,
    stored: StoredState | None,
    limits: tuple[int, int],
    *,
    summarizer: Summarizer,
    evidence_budget_tokens: int,
    busy: str | None,
    refusal: str | None,
    capable: bool,
) -> CompressionPreview:
    """The engine's estimate of a compress of ``stored`` with the agent's `agent_limits`;
    ``refusal`` (an error code) is the reason when given."""
    keep, tool_limit = limits
    state = stored.state if stored else ThreadContextState(thread_id=thread_id, messages=[])
    estimate = estimate_summary(
        state,
        summarizer=summarizer,
        keep_messages=keep,
        tool_result_token_limit=tool_limit,
        summary_evidence_budget_tokens=evidence_budget_tokens,
    )
    readiness = summary_readiness(state, keep_messages=keep)
    reason = refusal
    if reason is None and estimate.messages_to_summarize == 0:
        reason = readiness.reason or "insufficient_history"
    return CompressionPreview(
        thread_id=thread_id,
        messages_to_summarize=estimate.messages_to_summarize,
        estimated_before_tokens=estimate.before_tokens,
        estimated_after_tokens=estimate.after_tokens,
        checkpoint_id=stored.checkpoint_id if stored else None,
        busy_reason=busy,
        capable=capable,
        reason=reason,
        note=readiness.note if reason == "insufficient_history" else None,
        cited_total=estimate.cited_total,
        cited_in_view=estimate.cited_in_view,
    )
