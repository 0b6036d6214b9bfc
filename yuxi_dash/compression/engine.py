"""The entry points of the compression engine: ``force_summarize`` and ``auto_compact``.

- ``force_summarize`` is the operator's manual action: compaction, then a summary regardless
  of the threshold, or ``no_op``/``insufficient_history`` writing nothing. It is
  ``prepare_summary`` (plan the offloads, call the summarizer: no I/O of ours) followed by
  ``write_summary`` (every write), so a service can hold its lock only around the writes and
  never across the summarizer call.
- ``auto_compact`` is the automatic path at a model call: under the threshold pass through;
  at or over it compact and recount; summarize only if still at or over the same threshold
  or the provider reported a context overflow.

Whatever the summarizer, a summary keeps the cited evidence in view and the rest in an index
beside the history (``compression.evidence_keep``, ``outcome.evidence``). A summarizer failure
is SummarizerFailed with nothing written. History sections are keyed by the first message
index they cover: a retry replaces its section. The caller persists ``outcome.state``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from yuxi_dash.agents import (
    DEFAULT_SUMMARY_EVIDENCE_BUDGET_TOKENS,
    DEFAULT_SUMMARY_KEEP_MESSAGES,
    DEFAULT_TOOL_RESULT_TOKEN_LIMIT,
)
from yuxi_dash.compression import evidence_keep
from yuxi_dash.compression.compaction import (
    PendingOffload,
    SavedRecord,
    plan_offload,
    truncate_tool_args,
    write_offloads,
)
from yuxi_dash.compression.cutoff import find_cutoff
from yuxi_dash.compression.previews.salvage import shared_parses
from yuxi_dash.compression.summarizers import Summarizer
from yuxi_dash.compression.thread_state import (
    SUMMARY_SOURCE,
    CompressionOutcome,
    SummaryEvent,
    ThreadContextState,
    is_summary_message,
    message_text,
)
from yuxi_dash.compression.token_count import SystemPrompt, count_tokens
from yuxi_dash.errors import SummarizerFailed, WorkdirUnavailable
from yuxi_dash.files.workdir import HistorySection, Workdir, safe_name

DEFAULT_TOOL_ARG_MAX_LENGTH = 2000


def model_messages(
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
    return count_tokens(model_messages(state), system=system, tools=tools)


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


@dataclass(frozen=True)
class PreparedSummary:
    """A summary made from a state but not written anywhere yet: the slow, lock-free half.

    ``planned`` is the state with every planned offload's header in place and
    ``pending`` the files those headers point at; ``cutoff`` is None when there is
    too little history to summarize (``write_summary`` then writes nothing and
    answers no_op). ``write_summary`` does every write of the summary.
    """

    planned: ThreadContextState
    pending: tuple[PendingOffload, ...]
    cutoff: int | None
    summary: str
    summarized_count: int
    before_tokens: int


def _make_summary(
    state: ThreadContextState, cutoff: int, summarizer: Summarizer
) -> tuple[str, int]:
    """Call the summarizer on ``messages[start:cutoff]``: (summary text, messages summarized).

    No I/O of ours happens here; any failure or an empty answer is SummarizerFailed.
    """
    start = state.visible_start
    summarized_range = state.messages[start:cutoff]
    to_summarize = [m for m in summarized_range if not is_summary_message(m)]
    previous_parts = []
    if state.summary is not None:
        previous_parts.append(_summary_body(message_text(state.summary.summary_message)))
    previous_parts.extend(
        _summary_body(message_text(m)) for m in summarized_range if is_summary_message(m)
    )  # an earlier kept-evidence block is not carried: this summary's covers what it did
    previous = "\n\n".join(evidence_keep.without_kept_lines(p) for p in previous_parts if p)
    try:
        summary = summarizer.summarize(to_summarize, previous_summary=previous or None)
    except SummarizerFailed:
        raise
    except Exception as exc:
        raise SummarizerFailed(
            f"summarizer {getattr(summarizer, 'name', 'unknown')} failed "
            f"({type(exc).__name__}); nothing was written"
        ) from exc
    if not isinstance(summary, str) or not summary.strip():
        raise SummarizerFailed("summarizer returned an empty summary; nothing was written")
    return summary.strip(), len(to_summarize)


def _write_summary_files(
    state: ThreadContextState,
    cutoff: int,
    summary: str,
    *,
    workdir: Workdir | None,
    pending: Sequence[PendingOffload] = (),
    budget_tokens: int = DEFAULT_SUMMARY_EVIDENCE_BUDGET_TOKENS,
) -> tuple[ThreadContextState, str, list[SavedRecord], evidence_keep.KeptEvidence]:
    """Write the offloads, history section and evidence index of a made summary; the new state.

    The history section is keyed by the first message index it covers (the
    state's ``visible_start``): a retry of the same summary, or one after an
    attempt that never committed, replaces that section instead of adding a
    second copy. A failed offload write puts its message back, as compaction
    always does; a failed history or index write raises WorkdirUnavailable.
    """
    if workdir is None:
        raise WorkdirUnavailable("no workdir configured: the history file cannot be written")
    start = state.visible_start
    saved: list[SavedRecord] = []
    if pending:
        messages, saved = write_offloads(state.messages, pending, workdir)
        state = replace(state, messages=messages)
    session_id = history_session_id(state)
    history = render_history(
        state.thread_id, state.messages[start:cutoff], start, datetime.now(UTC)
    )
    try:
        file_path = workdir.write_history_section(session_id, start, history)
    except OSError as exc:
        raise WorkdirUnavailable(
            f"history file could not be written ({type(exc).__name__}); "
            "the thread's state was not changed"
        ) from exc
    kept = evidence_keep.keep_evidence(
        evidence_keep.with_originals(state, pending),  # the ledger's "before"
        summary,
        lambda text: summarized_state(state, cutoff, text, file_path),
        key=start,
        budget_tokens=budget_tokens,
        workdir=workdir,
        written=[record[2].path for record in saved],
    )
    return summarized_state(state, cutoff, kept.summary, file_path), file_path, saved, kept


def summarized_state(
    state: ThreadContextState, cutoff: int, summary: str, file_path: str
) -> ThreadContextState:
    """The state a summary leaves: ``state`` (offloads in place) with its summary event.

    Pure: the writer calls it once the history section is written at ``file_path``; the
    estimate (`compression.estimate`) calls it with the path that write would return.
    """
    summary_message = HumanMessage(
        content=summary_message_text(summary, file_path),
        additional_kwargs={"lc_source": SUMMARY_SOURCE},
    )
    return replace(
        state,
        messages=list(state.messages),
        summary=SummaryEvent(
            cutoff_index=cutoff,
            summary_message=summary_message,
            file_path=file_path,
            created_at_index=len(state.messages),
        ),
        history_session_id=history_session_id(state),
    )


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


def committed_history(state: ThreadContextState, workdir: Workdir) -> list[HistorySection]:
    """The history sections behind ``state``'s summary, oldest first.

    A section is keyed by the first message index it covers; one at or past the
    summary's cutoff was written by an attempt that never committed (a crash or a
    failed commit between the history write and the state write) and is not
    history: it is left out here and replaced by the next summary.
    """
    if state.summary is None:
        return []
    sections = workdir.read_history_sections(history_session_id(state))
    return [section for section in sections if section.key < state.summary.cutoff_index]


def _summary_body(text: str) -> str:
    """A summary message's summary text without the pointer paragraph we put in front."""
    if text.startswith("[Conversation summary]"):
        _pointer, sep, body = text.partition("\n\n")
        return body if sep else ""
    return text


def _plan_summary(
    state: ThreadContextState, workdir: Workdir | None, keep: int, token_limit: int
) -> tuple[int | None, list[BaseMessage], list[PendingOffload]]:
    """Where a summary would cut, and the offloads it makes first: planned, nothing written."""
    cutoff = plan_cutoff(state, keep)
    if cutoff is None:
        return None, [], []
    planned, pending = plan_offload(
        state.messages, workdir, tool_result_token_limit=token_limit, start=state.visible_start
    )
    return cutoff, planned, pending


def prepare_summary(
    state: ThreadContextState,
    *,
    workdir: Workdir | None,
    summarizer: Summarizer,
    keep_messages: int = DEFAULT_SUMMARY_KEEP_MESSAGES,
    tool_result_token_limit: int = DEFAULT_TOOL_RESULT_TOKEN_LIMIT,
    system: SystemPrompt = None,
    tools: Sequence[Any] | None = None,
) -> PreparedSummary:
    """The manual action's slow half: plan the offloads and call the summarizer; writes nothing.

    A service runs this with no lock held, then ``write_summary`` under its lock
    once it has checked that the state did not move in between.
    """
    before = count_state_tokens(state, system=system, tools=tools)
    cutoff, planned, pending = _plan_summary(state, workdir, keep_messages, tool_result_token_limit)
    if cutoff is None:
        return PreparedSummary(state, (), None, "", 0, before)
    planned_state = replace(state, messages=planned)
    summary, count = _make_summary(planned_state, cutoff, summarizer)
    return PreparedSummary(planned_state, tuple(pending), cutoff, summary, count, before)


def write_summary(
    prepared: PreparedSummary,
    *,
    workdir: Workdir | None,
    system: SystemPrompt = None,
    tools: Sequence[Any] | None = None,
    summary_evidence_budget_tokens: int = DEFAULT_SUMMARY_EVIDENCE_BUDGET_TOKENS,
) -> CompressionOutcome:
    """The manual action's write half: offloads, history section, evidence index, new state."""
    if prepared.cutoff is None:
        return _no_op(prepared.planned, "insufficient_history", prepared.before_tokens)
    new_state, file_path, saved, kept = _write_summary_files(
        prepared.planned,
        prepared.cutoff,
        prepared.summary,
        workdir=workdir,
        pending=prepared.pending,
        budget_tokens=summary_evidence_budget_tokens,
    )
    return CompressionOutcome(
        status="completed",
        reason=None,
        before_tokens=prepared.before_tokens,
        after_tokens=count_state_tokens(new_state, system=system, tools=tools),
        compressed_messages=prepared.summarized_count,
        file_path=file_path,
        state=new_state,
        summarized=True,
        saved_files=saved,
        evidence=kept,
    )


@shared_parses()  # each call: the ledger reuses the parses its previews made
def force_summarize(
    state: ThreadContextState,
    *,
    workdir: Workdir | None,
    summarizer: Summarizer,
    keep_messages: int = DEFAULT_SUMMARY_KEEP_MESSAGES,
    tool_result_token_limit: int = DEFAULT_TOOL_RESULT_TOKEN_LIMIT,
    system: SystemPrompt = None,
    tools: Sequence[Any] | None = None,
    summary_evidence_budget_tokens: int = DEFAULT_SUMMARY_EVIDENCE_BUDGET_TOKENS,
) -> CompressionOutcome:
    """The manual action: compaction, then a summary regardless of the threshold."""
    prepared = prepare_summary(
        state,
        workdir=workdir,
        summarizer=summarizer,
        keep_messages=keep_messages,
        tool_result_token_limit=tool_result_token_limit,
        system=system,
        tools=tools,
    )
    return write_summary(
        prepared,
        workdir=workdir,
        system=system,
        tools=tools,
        summary_evidence_budget_tokens=summary_evidence_budget_tokens,
    )


@shared_parses()  # each call: the ledger reuses the parses its previews made
def auto_compact(
    state: ThreadContextState,
    *,
    workdir: Workdir | None,
    summarizer: Summarizer,
    threshold_tokens: int,
    keep_messages: int = DEFAULT_SUMMARY_KEEP_MESSAGES,
    tool_result_token_limit: int = DEFAULT_TOOL_RESULT_TOKEN_LIMIT,
    context_overflow: bool = False,
    system: SystemPrompt = None,
    tools: Sequence[Any] | None = None,
    summary_evidence_budget_tokens: int = DEFAULT_SUMMARY_EVIDENCE_BUDGET_TOKENS,
) -> CompressionOutcome:
    """The automatic path: pass through, compact, or compact and summarize (module docstring)."""
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
    summary, summarized = _make_summary(compacted_state, cutoff, summarizer)
    new_state, file_path, written, kept = _write_summary_files(
        compacted_state,
        cutoff,
        summary,
        workdir=workdir,
        pending=pending,
        budget_tokens=summary_evidence_budget_tokens,
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
        evidence=kept,
    )
