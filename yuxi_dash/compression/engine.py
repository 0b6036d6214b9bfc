"""The two entry points of the compression engine: ``force_summarize`` and ``auto_compact``.

- ``force_summarize`` is the operator's manual action: compaction, then a summary
  regardless of the threshold, or ``no_op``/``insufficient_history`` writing nothing.
- ``auto_compact`` is the automatic path at a model call: under the threshold pass
  through; at/over it compact and recount; summarize only if still at/over the
  same threshold or the provider reported a context overflow.

Order inside a summary: plan the offloads (no I/O) → cutoff → summarizer
(failure: SummarizerFailed, nothing written: no history, no offloaded file) →
write the offloaded files → append the history file → return the new state.
Neither function touches the database; the caller persists ``outcome.state``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from yuxi_dash.compression.compaction import (
    PendingOffload,
    SavedRecord,
    plan_offload,
    truncate_tool_args,
    write_offloads,
)
from yuxi_dash.compression.cutoff import find_cutoff
from yuxi_dash.compression.state import (
    SUMMARY_SOURCE,
    CompressionOutcome,
    SummaryEvent,
    ThreadContextState,
    is_summary_message,
    message_text,
)
from yuxi_dash.compression.summarizers import Summarizer
from yuxi_dash.compression.tokens import SystemPrompt, count_tokens
from yuxi_dash.errors import SummarizerFailed, WorkdirUnavailable
from yuxi_dash.workdir import Workdir, safe_name

DEFAULT_TOOL_ARG_MAX_LENGTH = 2000


def model_view(
    state: ThreadContextState, tool_arg_max_length: int = DEFAULT_TOOL_ARG_MAX_LENGTH
) -> list[BaseMessage]:
    """What the next model call sees: summary + kept messages, long file-write args shortened."""
    return truncate_tool_args(state.model_visible_messages(), tool_arg_max_length)


def count_state_tokens(
    state: ThreadContextState,
    *,
    system: SystemPrompt = None,
    tools: Sequence[Any] | None = None,
) -> int:
    """Tokens of the next model input for ``state``."""
    return count_tokens(model_view(state), system=system, tools=tools)


def history_session_id(state: ThreadContextState) -> str:
    """The state's history session id, or one derived from the thread id (file-name safe)."""
    if state.history_session_id:
        return state.history_session_id
    safe = safe_name(state.thread_id, fallback="thread", max_length=96)
    if safe != state.thread_id:
        safe = f"{safe}-{hashlib.sha256(state.thread_id.encode()).hexdigest()[:8]}"
    return safe


def summary_message_text(summary: str, file_path: str) -> str:
    return (
        "[Conversation summary] The earlier part of this conversation was summarized to keep "
        f"the context small. The full history of the summarized messages is saved at "
        f"`{file_path}` in the workdir; read that file when exact details are needed.\n\n"
        f"{summary}"
    )


def render_history(
    thread_id: str, messages: Sequence[BaseMessage], first_index: int, at: datetime
) -> str:
    """Markdown for one summarized range, appended to the session's history file."""
    last_index = first_index + len(messages) - 1
    lines = [
        f"## Summarized at {at.isoformat(timespec='seconds')}: messages {first_index}-{last_index}"
        f" of thread {thread_id}",
        "",
    ]
    for offset, message in enumerate(messages):
        index = first_index + offset
        if isinstance(message, ToolMessage):
            title = f"tool {message.name or ''} (call {message.tool_call_id})".replace("  ", " ")
        else:
            title = message.type
        lines.append(f"### [{index}] {title}")
        lines.append("")
        lines.append(message_text(message))
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                lines.append(
                    f"- tool call `{call.get('name')}` ({call.get('id')}): {call.get('args')}"
                )
        lines.append("")
    return "\n".join(lines) + "\n"


def _without_summary(
    status: Literal["completed", "no_op"],
    reason: str,
    before: int,
    after: int,
    state: ThreadContextState,
    saved: list[SavedRecord],
) -> CompressionOutcome:
    """An outcome with no summary written: at most the offloads in ``saved``."""
    return CompressionOutcome(
        status=status,
        reason=reason,
        before_tokens=before,
        after_tokens=after,
        compressed_messages=len(saved),
        file_path=None,
        state=state,
        summarized=False,
        saved_files=saved,
    )


def _no_op(state: ThreadContextState, reason: str, tokens: int) -> CompressionOutcome:
    return _without_summary("no_op", reason, tokens, tokens, state, [])


def _summarizable_count(state: ThreadContextState) -> int:
    return sum(1 for m in state.messages[state.visible_start :] if not is_summary_message(m))


def plan_cutoff(state: ThreadContextState, keep_messages: int) -> int | None:
    """The cutoff of a summary, or None when there is too little history to summarize."""
    if _summarizable_count(state) < keep_messages + 1:
        return None
    start = state.visible_start
    cutoff = find_cutoff(state.messages, keep_messages, start)
    if not any(not is_summary_message(m) for m in state.messages[start:cutoff]):
        return None
    return cutoff


def _summarize(
    state: ThreadContextState,
    cutoff: int,
    *,
    workdir: Workdir | None,
    summarizer: Summarizer,
    pending: Sequence[PendingOffload] = (),
) -> tuple[ThreadContextState, str, int, list[SavedRecord]]:
    """Summarize ``messages[start:cutoff]``; return (new state, history path, count, saved files).

    ``state`` carries the planned offloads; their files (``pending``) are written
    only once the summary exists, so a failed summary writes nothing.
    """
    if workdir is None:
        raise WorkdirUnavailable("no workdir configured: the history file cannot be written")
    start = state.visible_start
    summarized_range = state.messages[start:cutoff]
    to_summarize = [m for m in summarized_range if not is_summary_message(m)]
    previous_parts = []
    if state.summary is not None:
        previous_parts.append(_summary_body(message_text(state.summary.summary_message)))
    previous_parts.extend(
        _summary_body(message_text(m)) for m in summarized_range if is_summary_message(m)
    )
    previous = "\n\n".join(part for part in previous_parts if part) or None

    try:
        summary = summarizer.summarize(to_summarize, previous_summary=previous)
    except SummarizerFailed:
        raise
    except Exception as exc:
        raise SummarizerFailed(
            f"summarizer {getattr(summarizer, 'name', 'unknown')} failed "
            f"({type(exc).__name__}); nothing was written"
        ) from exc
    if not isinstance(summary, str) or not summary.strip():
        raise SummarizerFailed("summarizer returned an empty summary; nothing was written")

    saved: list[SavedRecord] = []
    if pending:  # a failed write puts its message back, as compaction always does
        messages, saved = write_offloads(state.messages, pending, workdir)
        state = replace(state, messages=messages)
        summarized_range = state.messages[start:cutoff]
    session_id = history_session_id(state)
    history = render_history(state.thread_id, summarized_range, start, datetime.now(UTC))
    try:
        file_path = workdir.append_history(session_id, history)
    except OSError as exc:
        raise WorkdirUnavailable(
            f"history file could not be written ({type(exc).__name__}); nothing was changed"
        ) from exc
    summary_message = HumanMessage(
        content=summary_message_text(summary.strip(), file_path),
        additional_kwargs={"lc_source": SUMMARY_SOURCE},
    )
    new_state = replace(
        state,
        messages=list(state.messages),
        summary=SummaryEvent(
            cutoff_index=cutoff, summary_message=summary_message, file_path=file_path
        ),
        history_session_id=session_id,
    )
    return new_state, file_path, len(to_summarize), saved


def _write_now(
    state: ThreadContextState,
    planned: list[BaseMessage],
    pending: Sequence[PendingOffload],
    workdir: Workdir | None,
) -> tuple[ThreadContextState, list[SavedRecord]]:
    """Write planned offloads now: the state as it stands after them, and what was saved."""
    if not pending or workdir is None:
        return state, []
    messages, saved = write_offloads(planned, pending, workdir)
    return (replace(state, messages=messages) if saved else state), saved


def _summary_body(text: str) -> str:
    """A summary message's summary text without the pointer paragraph we put in front."""
    if text.startswith("[Conversation summary]"):
        _pointer, sep, body = text.partition("\n\n")
        return body if sep else ""
    return text


def force_summarize(
    state: ThreadContextState,
    *,
    workdir: Workdir | None,
    summarizer: Summarizer,
    keep_messages: int = 10,
    tool_result_token_limit: int = 300,
    system: SystemPrompt = None,
    tools: Sequence[Any] | None = None,
) -> CompressionOutcome:
    """The manual action: compaction, then a summary regardless of the threshold."""
    before = count_state_tokens(state, system=system, tools=tools)
    cutoff = plan_cutoff(state, keep_messages)
    if cutoff is None:
        return _no_op(state, "insufficient_history", before)
    planned, pending = plan_offload(
        state.messages,
        workdir,
        tool_result_token_limit=tool_result_token_limit,
        start=state.visible_start,
    )
    new_state, file_path, summarized, saved = _summarize(
        replace(state, messages=planned),
        cutoff,
        workdir=workdir,
        summarizer=summarizer,
        pending=pending,
    )
    return CompressionOutcome(
        status="completed",
        reason=None,
        before_tokens=before,
        after_tokens=count_state_tokens(new_state, system=system, tools=tools),
        compressed_messages=summarized,
        file_path=file_path,
        state=new_state,
        summarized=True,
        saved_files=saved,
    )


def auto_compact(
    state: ThreadContextState,
    *,
    workdir: Workdir | None,
    summarizer: Summarizer,
    threshold_tokens: int,
    keep_messages: int = 10,
    tool_result_token_limit: int = 300,
    context_overflow: bool = False,
    system: SystemPrompt = None,
    tools: Sequence[Any] | None = None,
) -> CompressionOutcome:
    """The automatic path: pass through, compact, or compact and summarize (DESIGN §4)."""
    before = count_state_tokens(state, system=system, tools=tools)
    if before < threshold_tokens and not context_overflow:
        return _no_op(state, "under_threshold", before)
    planned, pending = plan_offload(
        state.messages,
        workdir,
        tool_result_token_limit=tool_result_token_limit,
        start=state.visible_start,
    )
    compacted_state = replace(state, messages=planned) if pending else state
    after_compaction = count_state_tokens(compacted_state, system=system, tools=tools)
    saved: list[SavedRecord] = []
    if after_compaction < threshold_tokens and not context_overflow:
        compacted_state, saved = _write_now(state, planned, pending, workdir)
        if len(saved) != len(pending):  # a failed write kept its message: count again
            after_compaction = count_state_tokens(compacted_state, system=system, tools=tools)
        pending = []
        if after_compaction < threshold_tokens:
            return _without_summary(
                "completed",
                "compaction_sufficient",
                before,
                after_compaction,
                compacted_state,
                saved,
            )
    cutoff = plan_cutoff(compacted_state, keep_messages)
    if cutoff is None:  # nothing to summarize: the compaction is all there is
        if pending:
            compacted_state, saved = _write_now(state, planned, pending, workdir)
            if len(saved) != len(pending):
                after_compaction = count_state_tokens(compacted_state, system=system, tools=tools)
        return _without_summary(
            "completed" if saved else "no_op",
            "insufficient_history",
            before,
            after_compaction,
            compacted_state,
            saved,
        )
    new_state, file_path, summarized, written = _summarize(
        compacted_state, cutoff, workdir=workdir, summarizer=summarizer, pending=pending
    )
    saved += written
    return CompressionOutcome(
        status="completed",
        reason="context_overflow" if context_overflow else "over_threshold",
        before_tokens=before,
        after_tokens=count_state_tokens(new_state, system=system, tools=tools),
        compressed_messages=summarized,
        file_path=file_path,
        state=new_state,
        summarized=True,
        saved_files=saved,
    )
