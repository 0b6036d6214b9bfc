"""Token usage of a thread: the formulas, the one usage type, and the 85% suggestion line.

Formulas:
``summary_pressure_ratio = round(next_llm_input_tokens / summary_trigger_tokens, 4)``,
``context_usage_ratio = min(1, round(llm_input_tokens / context_window, 4))``,
``summary_trigger_tokens = summary_threshold K × 1024``. The 85% line only
suggests compression to an operator; it never triggers it.

`UsageSnapshot` is the one usage type: a `usage_snapshots` row, a thread's
current usage and a checkpoint's `token_usage` are all written from one. Its
two ratios are computed from the other fields, so they cannot disagree with
the formulas. The tokens of the next model input by part are
`yuxi_dash.compression.context_view(state).breakdown`; the one figure every page and
command shows as the next input tokens is `next_input_tokens` (the one pressure divides).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from numbers import Real
from typing import Any

from yuxi_dash.printable_record import Record

SUGGESTION_RATIO = 0.85
SUGGESTION_LABEL = f"{SUGGESTION_RATIO:.0%}"  # "85%", for titles and captions


def should_suggest_compression(ratio: float | None) -> bool:
    """True at or above 85% of the summary threshold (0.849 no, 0.85 yes)."""
    return ratio is not None and ratio >= SUGGESTION_RATIO


def summary_trigger_tokens(summary_threshold_k: int) -> int:
    """The one summary threshold in tokens: K × 1024."""
    return int(summary_threshold_k) * 1024


def next_input_tokens(usage: Mapping[str, Any] | Any) -> int:
    """The next input tokens as every page and command shows them: the projected
    ``next_llm_input_tokens`` (the agent's own count at its last model call, with its system
    prompt and tool schemas), the figure `summary_pressure_ratio` divides. Never a recount of
    the model view, which cannot see the system prompt or the tool schemas.

    ``usage``: a thread row as a mapping (a page's frame row) or an object (`ThreadSummary`).
    """
    value = (
        usage.get("next_llm_input_tokens")
        if isinstance(usage, Mapping)
        else getattr(usage, "next_llm_input_tokens", None)
    )
    return int(float(value)) if isinstance(value, Real) and value == value else 0  # NaN: none


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
    """One measurement of a thread's token usage (a model call, a compression, an import).

    Give the five measured fields; `context_usage_ratio` and
    `summary_pressure_ratio` are computed by the formulas above. `to_dict()`
    holds all seven.
    """

    llm_input_tokens: int
    next_llm_input_tokens: int
    context_window: int
    summary_trigger_tokens: int
    summary_active: bool
    context_usage_ratio: float = field(init=False)
    summary_pressure_ratio: float = field(init=False)

    def __post_init__(self) -> None:
        ratios = {
            "context_usage_ratio": context_usage_ratio(self.llm_input_tokens, self.context_window),
            "summary_pressure_ratio": summary_pressure_ratio(
                self.next_llm_input_tokens, self.summary_trigger_tokens
            ),
        }
        for name, value in ratios.items():
            object.__setattr__(self, name, value)

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
    """A `UsageSnapshot` from numbers of any numeric type (made int and bool first)."""
    return UsageSnapshot(
        llm_input_tokens=int(llm_input_tokens),
        next_llm_input_tokens=int(next_llm_input_tokens),
        context_window=int(context_window),
        summary_trigger_tokens=int(summary_trigger_tokens),
        summary_active=bool(summary_active),
    )
