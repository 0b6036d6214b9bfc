"""One recorded thread replayed turn by turn under given compression settings: `replay_thread`.

A turn is a model call (an AI message, sent every message before it). Before each call the
replay runs `compression.auto_compact` (what the middleware runs) on a `DryWorkdir`,
records the ``after_tokens`` the call is sent, and carries the outcome's state on. A
compression is a summary (as the platform and the Overview count); a pass that only
offloaded results is an offload-only pass. ``compress=False`` (an agent without the
middleware) is a pass-through: nothing offloaded or summarized.

Rules: offloads, cutoffs and token counts are the engine's own, exact; summaries are the
given summarizer's. System prompt and tool schemas count as ``overhead_tokens`` through a
stand-in system message (under 5: 0). Evidence kept in view: each summary's cited ledger
items its new view shows; with no summary, the compress preview's. Not replayed: the retry
after a context overflow, manual compressions; the evidence budget is the middleware's
default. Settings are not range-checked here (`tuning.plan` checks the proposal).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

from yuxi_dash.compression import (
    Summarizer,
    ThreadContextState,
    auto_compact,
    count_state_tokens,
    estimate_summary,
)
from yuxi_dash.tuning.dry_workdir import DryWorkdir
from yuxi_dash.usage import SUGGESTION_RATIO, summary_pressure_ratio, summary_trigger_tokens

MIN_OVERHEAD_TOKENS = 5  # the smallest stand-in system message the counter can make exactly


@dataclass(frozen=True)
class CompressionSettings:
    """The three knobs, in the units of the agent's configuration fields."""

    summary_threshold_k: int  # summary_threshold: K tokens (x 1024)
    tool_result_token_limit: int  # summary_tool_result_token_limit: tokens
    keep_messages: int  # summary_keep_messages: messages

    @property
    def trigger_tokens(self) -> int:
        return summary_trigger_tokens(self.summary_threshold_k)


@dataclass(frozen=True)
class RecordedThread:
    """A thread as recorded, ready to replay: its messages with originals put back."""

    thread_id: str
    origin: str  # what pages call its source: "ours" or "attached: <platform>"
    messages: tuple[BaseMessage, ...]
    overhead_tokens: int = 0  # system prompt and tool schemas, as the agent counted them
    unrestored: int = 0  # offloaded results whose original could not be read back


@dataclass(frozen=True)
class ThreadReplay:
    """What one thread's turns would have been under one set of settings."""

    thread_id: str
    input_tokens: tuple[int, ...]  # per turn: what the model call is sent
    compression_turns: tuple[int, ...]  # turns (0-based) a summary ran before
    offload_turns: tuple[int, ...] = ()  # turns a pass only offloaded tool results before
    cited_total: int = 0  # cited items the summaries summarized
    cited_in_view: int = 0  # of them, the ones their new view kept
    end_tokens: int = 0  # the next input after the last recorded message
    trigger_tokens: int = 0
    peak_tokens: int = 0  # the largest input before compression
    evidence_from: str = "none"  # "ledger" (its summaries'), "preview" (no summary) or "none"

    @property
    def turns(self) -> int:
        return len(self.input_tokens)

    @property
    def end_ratio(self) -> float:
        return summary_pressure_ratio(self.end_tokens, self.trigger_tokens)

    @property
    def at_or_above_85(self) -> bool:
        return self.end_ratio >= SUGGESTION_RATIO


@dataclass
class _Tally:
    inputs: list[int] = field(default_factory=list)
    summaries: list[int] = field(default_factory=list)
    offloads: list[int] = field(default_factory=list)
    cited_total: int = 0
    cited_in_view: int = 0
    peak: int = 0


def stand_in_system(overhead_tokens: int) -> SystemMessage | None:
    """A system message the engine's counter counts as ``overhead_tokens`` (None under 5).

    The counter gives a message ceil((chars + len("system")) / 4) + 3 tokens.
    """
    if overhead_tokens < MIN_OVERHEAD_TOKENS:
        return None
    return SystemMessage(content="x" * (4 * (overhead_tokens - 3) - len("system")))


def model_call_indices(messages: Sequence[BaseMessage]) -> list[int]:
    """The index of every AI message: each is one model call, sent the messages before it."""
    return [index for index, message in enumerate(messages) if isinstance(message, AIMessage)]


def replay_thread(
    thread: RecordedThread,
    settings: CompressionSettings,
    *,
    summarizer: Summarizer,
    compress: bool = True,
) -> ThreadReplay:
    """The thread's model calls under ``settings``, through the engine's automatic path
    (``compress=False``: an agent without the middleware, every message sent every turn)."""
    system = stand_in_system(thread.overhead_tokens)
    workdir = DryWorkdir()
    threshold = settings.trigger_tokens
    messages = thread.messages
    state = ThreadContextState(thread_id=thread.thread_id, messages=[])
    fed = 0
    tally = _Tally()
    for turn, index in enumerate(model_call_indices(messages)):
        state = replace(state, messages=[*state.messages, *messages[fed:index]])
        fed = index
        if not compress:
            tokens = count_state_tokens(state, system=system)
            tally.peak = max(tally.peak, tokens)
            tally.inputs.append(tokens)
            continue
        outcome = auto_compact(
            state,
            workdir=workdir,
            summarizer=summarizer,
            threshold_tokens=threshold,
            keep_messages=settings.keep_messages,
            tool_result_token_limit=settings.tool_result_token_limit,
            system=system,
        )
        tally.peak = max(tally.peak, outcome.before_tokens)
        tally.inputs.append(outcome.after_tokens)
        if outcome.status == "completed" and not outcome.summarized:
            tally.offloads.append(turn)
        if outcome.summarized:
            tally.summaries.append(turn)
            if outcome.evidence is not None:
                cited = [item for item in outcome.evidence.ledger.items if item.cited]
                tally.cited_total += len(cited)
                tally.cited_in_view += sum(item.state == "visible" for item in cited)
        state = outcome.state
    state = replace(state, messages=[*state.messages, *messages[fed:]])
    end = count_state_tokens(state, system=system)
    evidence = "ledger" if tally.summaries else "none"
    if not tally.summaries:  # no ledger: what the preview of a summary now would keep
        estimate = estimate_summary(
            state,
            summarizer=summarizer,
            keep_messages=settings.keep_messages,
            tool_result_token_limit=settings.tool_result_token_limit,
            system=system,
        )
        tally.cited_total, tally.cited_in_view = estimate.cited_total, estimate.cited_in_view
        evidence = "preview" if estimate.cited_total else "none"
    return ThreadReplay(
        thread_id=thread.thread_id,
        input_tokens=tuple(tally.inputs),
        compression_turns=tuple(tally.summaries),
        offload_turns=tuple(tally.offloads),
        cited_total=tally.cited_total,
        cited_in_view=tally.cited_in_view,
        end_tokens=end,
        trigger_tokens=threshold,
        peak_tokens=max(tally.peak, end),
        evidence_from=evidence,
    )
