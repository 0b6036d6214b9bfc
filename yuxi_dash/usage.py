"""Token usage of a thread: the snapshot, pressure ratios, the 85% line, the breakdown.

Formulas (DESIGN §4):
``summary_pressure_ratio = round(next_llm_input_tokens / summary_trigger_tokens, 4)``,
``context_usage_ratio = min(1, round(llm_input_tokens / context_window, 4))``,
``summary_trigger_tokens = summary_threshold K × 1024``. The 85% line only
suggests compression to an operator; it never triggers it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import ToolMessage

from yuxi_dash.compression.compaction import parse_saved_header, truncate_tool_args
from yuxi_dash.compression.state import ThreadContextState, is_summary_message
from yuxi_dash.compression.tokens import SystemPrompt, count_tokens, system_messages
from yuxi_dash.records import Record

SUGGESTION_RATIO = 0.85
BREAKDOWN_PARTS = ("system", "tools", "messages", "tool_results", "summary", "compressed_away")


def should_suggest_compression(ratio: float | None) -> bool:
    """True at or above 85% of the summary threshold (0.849 no, 0.85 yes)."""
    return ratio is not None and ratio >= SUGGESTION_RATIO


def summary_trigger_tokens(summary_threshold_k: int) -> int:
    """The one summary threshold in tokens: K × 1024."""
    return int(summary_threshold_k) * 1024


def summary_pressure_ratio(next_llm_input_tokens: int, summary_trigger_tokens: int) -> float:
    """``round(next / trigger, 4)``; 0.0 without a threshold."""
    if summary_trigger_tokens <= 0:
        return 0.0
    return round(next_llm_input_tokens / summary_trigger_tokens, 4)


def context_usage_ratio(llm_input_tokens: int, context_window: int) -> float:
    """``min(1, round(input / window, 4))``; 0.0 without a window."""
    if context_window <= 0:
        return 0.0
    return min(1.0, round(llm_input_tokens / context_window, 4))


@dataclass(frozen=True)
class UsageSnapshot(Record):
    """One measurement of a thread's token usage (a model call or a compression)."""

    llm_input_tokens: int
    next_llm_input_tokens: int
    context_window: int
    context_usage_ratio: float
    summary_trigger_tokens: int
    summary_pressure_ratio: float
    summary_active: bool

    @property
    def suggest_compression(self) -> bool:
        return should_suggest_compression(self.summary_pressure_ratio)


def usage_snapshot(
    *,
    llm_input_tokens: int,
    next_llm_input_tokens: int,
    context_window: int,
    summary_trigger_tokens: int,
    summary_active: bool,
) -> UsageSnapshot:
    """A snapshot with both ratios computed by the DESIGN §4 formulas."""
    return UsageSnapshot(
        llm_input_tokens=int(llm_input_tokens),
        next_llm_input_tokens=int(next_llm_input_tokens),
        context_window=int(context_window),
        context_usage_ratio=context_usage_ratio(llm_input_tokens, context_window),
        summary_trigger_tokens=int(summary_trigger_tokens),
        summary_pressure_ratio=summary_pressure_ratio(
            next_llm_input_tokens, summary_trigger_tokens
        ),
        summary_active=bool(summary_active),
    )


def context_breakdown(
    state: ThreadContextState,
    *,
    system: SystemPrompt = None,
    tools: Sequence[Any] | None = None,
    tool_arg_max_length: int = 2000,
) -> dict[str, int]:
    """Tokens of the next model input by part, plus the tokens compressed away.

    ``system + tools + messages + tool_results + summary`` equals
    ``count_tokens(model view, system, tools)``; ``compressed_away`` is what the
    summary replaced (messages before the cutoff) plus what offloading removed
    from visible tool results (original approx tokens minus the header's).
    """
    view = truncate_tool_args(state.model_visible_messages(), tool_arg_max_length)
    parts = dict.fromkeys(BREAKDOWN_PARTS, 0)
    parts["system"] = count_tokens(system_messages(system)) if system else 0
    parts["tools"] = count_tokens([], tools=tools) if tools else 0
    for message in view:
        tokens = count_tokens([message])
        if is_summary_message(message):
            parts["summary"] += tokens
        elif isinstance(message, ToolMessage):
            parts["tool_results"] += tokens
            saved = parse_saved_header(message.content) if isinstance(message.content, str) else {}
            original = saved.get("Approx tokens", "")
            if original.isdigit():
                parts["compressed_away"] += max(0, int(original) - tokens)
        else:
            parts["messages"] += tokens
    hidden = state.messages[: state.visible_start]
    parts["compressed_away"] += (
        count_tokens([m for m in hidden if not is_summary_message(m)]) if hidden else 0
    )
    return parts
