"""What a manual summary of a state would do, and whether it would do anything; no writes.

`estimate_summary` runs the manual compress's own path: `engine.prepare_summary`
(the offload plan, the cutoff, the summarizer) and `engine.summarized_state` with the
history path the write would return, then the engine's token count. With a
deterministic summarizer (the extractive one: ``extractive = True``) that summary is
the one a compress writes, so the estimate is the result. A model's summary is
unknown until it is written: it is stood in for by the previous summary, else a tenth
of the summarized text, inside the same pointer paragraph. The evidence the summary keeps
is added as the compress adds it (``compression.evidence_keep``), from the thread and its
previews: a cited record that only the file of a result offloaded by an earlier compression
holds is not counted (that file is not opened), the one way an exact estimate can differ.
`summary_readiness` says why a compress would write nothing (`insufficient_history`)
and whether one large tool result among the kept messages is most of the input.
Nothing here opens a file: planning an offload only hashes and names it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import ToolMessage

from yuxi_dash.agents import (
    DEFAULT_SUMMARY_EVIDENCE_BUDGET_TOKENS,
    DEFAULT_SUMMARY_KEEP_MESSAGES,
    DEFAULT_TOOL_RESULT_TOKEN_LIMIT,
)
from yuxi_dash.compression.engine import (
    count_state_tokens,
    history_session_id,
    plan_cutoff,
    prepare_summary,
    summarized_state,
)
from yuxi_dash.compression.evidence_keep import kept_evidence
from yuxi_dash.compression.next_call import context_view
from yuxi_dash.compression.previews.salvage import shared_parses
from yuxi_dash.compression.summarizers import Summarizer
from yuxi_dash.compression.thread_state import ThreadContextState, is_summary_message, message_text
from yuxi_dash.compression.token_count import SystemPrompt
from yuxi_dash.errors import SummarizerFailed
from yuxi_dash.files.workdir import Workdir, history_relpath

INSUFFICIENT_HISTORY = "insufficient_history"
_NOWHERE = Workdir(".")  # planning only hashes and names files: nothing is opened


@dataclass(frozen=True)
class SummaryEstimate:
    """What a manual summary of a state would do, estimated without any write.

    ``exact``: the summary is the one a compress would write (a deterministic summarizer).
    """

    messages_to_summarize: int
    before_tokens: int
    after_tokens: int
    exact: bool = False
    cited_total: int = 0  # items the assistant cited in the part to summarize
    cited_in_view: int = 0  # of them, the ones the new view keeps (the rest: the evidence index)


def _stand_in(state: ThreadContextState, planned: ThreadContextState, cutoff: int) -> str:
    """A model summary's stand-in: the previous summary's text, else a tenth of the range."""
    if state.summary is not None:
        return message_text(state.summary.summary_message)
    to_summarize = [
        m for m in planned.messages[state.visible_start : cutoff] if not is_summary_message(m)
    ]
    return "x" * max(4, sum(len(message_text(m)) for m in to_summarize) // 10)


def estimate_summary(
    state: ThreadContextState,
    *,
    summarizer: Summarizer | None = None,
    keep_messages: int = DEFAULT_SUMMARY_KEEP_MESSAGES,
    tool_result_token_limit: int = DEFAULT_TOOL_RESULT_TOKEN_LIMIT,
    system: SystemPrompt = None,
    tools: Sequence[Any] | None = None,
    summary_evidence_budget_tokens: int = DEFAULT_SUMMARY_EVIDENCE_BUDGET_TOKENS,
) -> SummaryEstimate:
    """The engine's estimate of ``force_summarize`` on ``state`` (module docstring)."""
    with shared_parses():  # the kept evidence reads each result its preview decoded once
        return _estimate(
            state,
            summarizer,
            keep_messages,
            tool_result_token_limit,
            system,
            tools,
            summary_evidence_budget_tokens,
        )


def _estimate(
    state: ThreadContextState,
    summarizer: Summarizer | None,
    keep_messages: int,
    tool_result_token_limit: int,
    system: SystemPrompt,
    tools: Sequence[Any] | None,
    budget_tokens: int,
) -> SummaryEstimate:
    exact = bool(summarizer is not None and getattr(summarizer, "extractive", False))
    try:
        prepared = prepare_summary(
            state,
            workdir=_NOWHERE,
            summarizer=summarizer if exact and summarizer is not None else _StandIn(),
            keep_messages=keep_messages,
            tool_result_token_limit=tool_result_token_limit,
            system=system,
            tools=tools,
        )
    except SummarizerFailed:  # the real compress would fail too: nothing would change
        before = count_state_tokens(state, system=system, tools=tools)
        return SummaryEstimate(0, before, before)
    before = prepared.before_tokens
    if prepared.cutoff is None:
        return SummaryEstimate(0, before, before, exact)
    summary = prepared.summary if exact else _stand_in(state, prepared.planned, prepared.cutoff)
    path = history_relpath(history_session_id(prepared.planned))  # what the write returns
    cutoff, planned = prepared.cutoff, prepared.planned
    kept = kept_evidence(  # no workdir: no file is opened
        state,
        summary,
        lambda text: summarized_state(planned, cutoff, text, path),
        key=state.visible_start,
        budget_tokens=budget_tokens,
    )
    after_state = summarized_state(planned, cutoff, kept.summary, path)
    after = count_state_tokens(after_state, system=system, tools=tools)
    after = after if exact else min(before, after)
    cited = [item for item in kept.ledger.items if item.cited]
    in_view = sum(item.state == "visible" for item in cited)
    return SummaryEstimate(prepared.summarized_count, before, after, exact, len(cited), in_view)


class _StandIn:
    """A summarizer that answers at once: a model's summary is stood in for afterwards."""

    name = "estimate"
    extractive = False

    def summarize(self, messages: Sequence[Any], *, previous_summary: str | None = None) -> str:
        return "x"


@dataclass(frozen=True)
class Readiness:
    """Whether a compress would summarize: ``reason`` None, or why not with a ``note``."""

    reason: str | None = None
    note: str | None = None


def summary_readiness(
    state: ThreadContextState, *, keep_messages: int = DEFAULT_SUMMARY_KEEP_MESSAGES
) -> Readiness:
    """Why a compress of ``state`` would be a no-op, in one line; ``Readiness()`` when it
    would summarize. Where one tool result among the kept messages is most of the next
    input, the note says so (a summary cannot shrink what it keeps)."""
    if plan_cutoff(state, keep_messages) is not None:
        return Readiness()
    since = sum(1 for m in state.messages[state.visible_start :] if not is_summary_message(m))
    note = (
        f"nothing to summarize: {since:,} messages since the last summary, and the newest "
        f"{keep_messages:,} are always kept"
    )
    view = context_view(state)
    results = [item for item in view.messages if isinstance(item.message, ToolMessage)]
    largest = max(results, key=lambda item: item.tokens, default=None)
    total, in_results = view.total_tokens, sum(item.tokens for item in results)
    if largest is not None and total and largest.tokens * 2 > total:
        note += (
            f"; most of its input ({largest.tokens:,} of {total:,} tokens) is one "
            f"{largest.message.name or 'tool'} result among the kept messages"
        )
    elif largest is not None and total and in_results * 2 > total:
        note += (
            f"; most of its input ({in_results:,} of {total:,} tokens) is {len(results):,} "
            f"tool results among the kept messages, the largest one "
            f"{largest.message.name or 'tool'} result of {largest.tokens:,} tokens"
        )
    return Readiness(INSUFFICIENT_HISTORY, note)


__all__ = [
    "INSUFFICIENT_HISTORY",
    "Readiness",
    "SummaryEstimate",
    "estimate_summary",
    "summary_readiness",
]
