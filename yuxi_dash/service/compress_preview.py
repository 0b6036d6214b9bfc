"""The compress dialog's preview: what a compress would do now, read-only.

`preview_compression` locks nothing and writes nothing. It runs the engine's
estimate of the compress's own path (`compression.estimate`: the real summary
when the summarizer is deterministic, as the extractive default is; no model is
ever called), and says why a compress would not summarize (busy "compressing":
another compress holds the thread's lease). An attached platform's thread is
read from its checkpointer; the platform decides.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from yuxi_dash import validation
from yuxi_dash.agents import DEFAULT_SUMMARY_KEEP_MESSAGES, DEFAULT_TOOL_RESULT_TOKEN_LIMIT
from yuxi_dash.attach.stores import thread_store
from yuxi_dash.compression import (
    Summarizer,
    estimate_summary,
    get_summarizer,
    summary_readiness,
)
from yuxi_dash.compression.thread_view import ThreadContextState
from yuxi_dash.platform.capability import platform_refusals
from yuxi_dash.printable_record import Record
from yuxi_dash.service.locking import COMPRESS_BUSY_REASON, compress_in_progress, require_thread
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import ORIGIN_ATTACHED, Agent, Conversation
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


def preview_compression(
    thread_id: str,
    settings: Settings | None = None,
    *,
    user_id: str | None = None,
    summarizer: Summarizer | None = None,
) -> CompressionPreview:
    """What a compress would summarize now, and the engine's estimate of it; writes nothing."""
    settings = settings or get_settings()
    thread_id = validation.thread_id(thread_id)
    with session_scope(settings) as session:
        conv = session.scalar(sa.select(Conversation).where(Conversation.thread_id == thread_id))
        conv = require_thread(conv, thread_id, user_id=user_id)
        agent = session.scalar(sa.select(Agent).where(Agent.slug == conv.agent_slug))
        reason_busy = busy_reason(session, thread_id) or (
            COMPRESS_BUSY_REASON if compress_in_progress(conv) else None  # another compress's lease
        )
        attached = conv.origin == ORIGIN_ATTACHED
        refused_by_platform = (
            platform_refusals(session).of(conv.thread_id, conv.agent_slug) if attached else None
        )
        if attached:  # the state the platform's checkpointer holds
            latest = thread_store(conv, settings).latest(thread_id)
            stored = StoredState.of(latest) if latest is not None else None
        else:
            stored = load_state(thread_id, settings)
        keep = agent.summary_keep_messages if agent else DEFAULT_SUMMARY_KEEP_MESSAGES
        tool_limit = (
            agent.summary_tool_result_token_limit if agent else DEFAULT_TOOL_RESULT_TOKEN_LIMIT
        )
        agent_capable = bool(agent and agent.compression_capable)
        agent_known = agent is not None
    state = stored.state if stored else ThreadContextState(thread_id=thread_id, messages=[])
    estimate = estimate_summary(
        state,
        summarizer=summarizer or get_summarizer(settings),
        keep_messages=keep,
        tool_result_token_limit=tool_limit,
    )
    reason: str | None = None
    readiness = summary_readiness(state, keep_messages=keep)
    if estimate.messages_to_summarize == 0:
        reason = readiness.reason or "insufficient_history"
    if attached and not settings.platform_configured:
        reason, agent_capable = "thread_attached", False
    elif attached:  # the platform decides; an estimate with our defaults meanwhile
        agent_capable = refused_by_platform is None
        reason = "compression_unsupported" if refused_by_platform else reason
    elif not agent_known:
        reason = "agent_not_found"
    elif not agent_capable:
        reason = "compression_unsupported"
    elif reason_busy:
        reason = "thread_busy"
    return CompressionPreview(
        thread_id=thread_id,
        messages_to_summarize=estimate.messages_to_summarize,
        estimated_before_tokens=estimate.before_tokens,
        estimated_after_tokens=estimate.after_tokens,
        checkpoint_id=stored.checkpoint_id if stored else None,
        busy_reason=reason_busy,
        capable=agent_capable,
        reason=reason,
        note=readiness.note if reason == "insufficient_history" else None,
    )
