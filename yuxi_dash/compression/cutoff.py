"""Where a summary cuts a thread: keep the last N messages, never split a tool call.

``find_cutoff`` returns index ``c``: ``messages[start:c]`` is summarized and
``messages[c:]`` is kept. The cut only ever moves earlier (keeping more), until
no ToolMessage is separated from the AI message whose tool call it answers (the
nearest earlier AI message with that call id, so reused ids stay paired right).
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage


def tool_result_owners(messages: Sequence[BaseMessage]) -> dict[int, int]:
    """For each ToolMessage index, the index of the AI message that made its call."""
    latest_call: dict[str, int] = {}
    owners: dict[int, int] = {}
    for index, message in enumerate(messages):
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                call_id = call.get("id")
                if call_id:
                    latest_call[call_id] = index
        elif isinstance(message, ToolMessage) and message.tool_call_id in latest_call:
            owners[index] = latest_call[message.tool_call_id]
    return owners


def safe_cutoff(messages: Sequence[BaseMessage], cutoff: int, start: int = 0) -> int:
    """Move ``cutoff`` earlier (not below ``start``) until no tool call is split from its results."""
    cutoff = max(start, min(cutoff, len(messages)))
    owners = tool_result_owners(messages)
    # A result kept after the cut whose call falls before it pulls the cut back to the call.
    # Moving the cut earlier can only create new violations further back, so one backward
    # pass over the results (latest first) reaches the fixed point.
    for result_index in sorted(owners, reverse=True):
        owner = owners[result_index]
        if result_index >= cutoff and start <= owner < cutoff:
            cutoff = owner
    return max(start, cutoff)


def find_cutoff(messages: Sequence[BaseMessage], keep_messages: int, start: int = 0) -> int:
    """The summary cutoff keeping the last ``keep_messages``; ``start`` when nothing can go."""
    if len(messages) - start <= keep_messages:
        return start
    return safe_cutoff(messages, len(messages) - max(0, keep_messages), start)
