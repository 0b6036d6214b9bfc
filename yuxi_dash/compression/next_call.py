"""What the next model call of a thread sees, and its tokens by part: `context_view(state)`.

The one place that computes it: the `yuxi-dash context` command and the thread detail loader
(its "what the next model call gets" list and breakdown chart) read a `ContextView`. Pure:
no database, no files, no Streamlit.

The view is the engine's `model_messages` (the summary message first, then the messages from the
cutoff on, long file-write arguments shortened), so `total_tokens` is what the engine counts
for the next call. The breakdown splits that total into its parts (``system + tools +
messages + tool_results + summary`` equals it) and adds ``compressed_away``: the messages
the summary replaced plus what offloading removed from the visible tool results (from the
saved-result header). The system prompt and the tool schemas are counted only when given;
``unmeasured`` names the parts that were not (the dashboard does not know an agent's prompt
or tools).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage

from yuxi_dash.compression.compaction import (
    SavedResult,
    parse_saved_result,
    truncate_tool_args,
)
from yuxi_dash.compression.engine import DEFAULT_TOOL_ARG_MAX_LENGTH, model_messages
from yuxi_dash.compression.thread_state import ThreadContextState, is_summary_message
from yuxi_dash.compression.token_count import SystemPrompt, count_tokens, system_messages

BREAKDOWN_PARTS = ("system", "tools", "messages", "tool_results", "summary", "compressed_away")


@dataclass(frozen=True)
class VisibleMessage:
    """One message of the next model input."""

    index: int | None  # its index in the thread's messages; None for the summary message
    message: BaseMessage  # as the model gets it (long file-write arguments shortened)
    tokens: int
    summary: bool
    saved: SavedResult | None  # the header of an offloaded tool result, else None


@dataclass(frozen=True)
class ContextView:
    """The next model input of a thread, message by message, with its token figures."""

    messages: tuple[VisibleMessage, ...]
    total_tokens: int  # the whole next input: system prompt, tool schemas and messages
    breakdown: dict[str, int]  # tokens by part (BREAKDOWN_PARTS)
    messages_total: int  # every message the thread holds, summarized ones included
    hidden_messages: int  # the messages before the cutoff, replaced by the summary
    unmeasured: tuple[str, ...] = ()  # parts not counted: "system" / "tools" when not given


def context_view(
    state: ThreadContextState,
    *,
    system: SystemPrompt = None,
    tools: Sequence[Any] | None = None,
    tool_arg_max_length: int = DEFAULT_TOOL_ARG_MAX_LENGTH,
) -> ContextView:
    """What the next model call of `state` sees, with tokens per message and per part."""
    view = model_messages(state, tool_arg_max_length)
    has_summary = state.summary is not None
    hidden = state.visible_start
    parts = dict.fromkeys(BREAKDOWN_PARTS, 0)
    parts["system"] = count_tokens(system_messages(system)) if system else 0
    parts["tools"] = count_tokens([], tools=tools) if tools else 0
    visible: list[VisibleMessage] = []
    for position, message in enumerate(view):
        tokens = count_tokens([message])
        summary = is_summary_message(message)
        saved = parse_saved_result(message.content) if isinstance(message, ToolMessage) else None
        if summary:
            parts["summary"] += tokens
        elif isinstance(message, ToolMessage):
            parts["tool_results"] += tokens
            original = saved.approx_tokens if saved is not None else None
            if original is not None:
                parts["compressed_away"] += max(0, original - tokens)
        else:
            parts["messages"] += tokens
        first = has_summary and position == 0  # the summary event's message: no index
        index = None if first else hidden + position - (1 if has_summary else 0)
        visible.append(VisibleMessage(index, message, tokens, summary, saved))
    replaced = [m for m in state.messages[:hidden] if not is_summary_message(m)]
    if replaced:  # as the model was sent them: long file-write arguments already shortened
        parts["compressed_away"] += count_tokens(truncate_tool_args(replaced, tool_arg_max_length))
    return ContextView(
        messages=tuple(visible),
        total_tokens=count_tokens(view, system=system, tools=tools),
        breakdown=parts,
        messages_total=len(state.messages),
        hidden_messages=hidden,
        unmeasured=tuple(
            part for part, given in (("system", system), ("tools", tools)) if given is None
        ),
    )
