"""The agent state format the engine reads and writes: deepagents' keys in a LangGraph state.

A thread's state is a LangGraph checkpoint of a ``langchain.agents.create_agent`` agent:
- ``messages``: every message of the thread, never dropped (``add_messages`` reducer: a
  message with the id of an existing one replaces it, which is how an offloaded tool result
  takes the place of the original);
- ``_summarization_event``: the latest summary as deepagents 0.7 writes it
  (``cutoff_index``, ``summary_message``, ``file_path``, ``created_at_index``);
- ``_summarization_session_id``: the id naming the history file;
- ``token_usage``: the usage snapshot of the latest model call or compression
  (``summary_pressure_ratio``, ``summary_trigger_tokens``, ..., and a call's reported
  ``model``, at most `MODEL_NAME_MAX` characters, and ``output_tokens``, else None).

This module converts between those values and the engine's ``ThreadContextState``, and
builds the state update a change amounts to.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware.types import AgentState, PrivateStateAttr
from langchain_core.messages import BaseMessage, HumanMessage

from yuxi_dash.compression.thread_state import SummaryEvent, ThreadContextState

SUMMARIZATION_EVENT_KEY = "_summarization_event"
SUMMARIZATION_SESSION_ID_KEY = "_summarization_session_id"
TOKEN_USAGE_KEY = "token_usage"
MODEL_NAME_MAX = 128  # characters of a reported model name kept (`usage_snapshots.model`)


class CompressedContextState(AgentState[Any]):
    """The agent state channels the compression middleware reads and writes."""

    _summarization_event: Annotated[NotRequired[dict[str, Any] | None], PrivateStateAttr]
    _summarization_session_id: Annotated[NotRequired[str | None], PrivateStateAttr]
    token_usage: Annotated[NotRequired[dict[str, Any]], PrivateStateAttr]


def summary_from_event(event: Any) -> SummaryEvent | None:
    """The engine's SummaryEvent of a ``_summarization_event`` value (None if absent or malformed)."""
    if not isinstance(event, Mapping):
        return None
    message = event.get("summary_message")
    cutoff = event.get("cutoff_index")
    if not isinstance(message, HumanMessage) or not isinstance(cutoff, int):
        return None
    created = event.get("created_at_index")
    return SummaryEvent(
        cutoff_index=cutoff,
        summary_message=message,
        file_path=str(event.get("file_path") or ""),
        created_at_index=created if isinstance(created, int) else None,
    )


def event_from_summary(summary: SummaryEvent) -> dict[str, Any]:
    """The ``_summarization_event`` value of a SummaryEvent, field for field as deepagents has it."""
    event: dict[str, Any] = {
        "cutoff_index": summary.cutoff_index,
        "summary_message": summary.summary_message,
        "file_path": summary.file_path or None,
    }
    if summary.created_at_index is not None:
        event["created_at_index"] = summary.created_at_index
    return event


def context_state(thread_id: str, values: Mapping[str, Any]) -> ThreadContextState:
    """The engine's view of an agent state's values."""
    messages = values.get("messages") or []
    session_id = values.get(SUMMARIZATION_SESSION_ID_KEY)
    return ThreadContextState(
        thread_id=thread_id,
        messages=[m for m in messages if isinstance(m, BaseMessage)],
        summary=summary_from_event(values.get(SUMMARIZATION_EVENT_KEY)),
        history_session_id=session_id if isinstance(session_id, str) else "",
    )


def state_update(before: ThreadContextState, after: ThreadContextState) -> dict[str, Any]:
    """The agent state update that turns ``before`` into ``after`` ({} when nothing changed).

    Changed messages are sent with their ids, so the ``add_messages`` reducer
    replaces them in place; the summary event and the history session id are
    sent when the summary changed.
    """
    update: dict[str, Any] = {}
    replaced = [
        new for old, new in zip(before.messages, after.messages, strict=False) if new is not old
    ]
    added = after.messages[len(before.messages) :]
    if replaced or added:
        update["messages"] = [*replaced, *added]
    if after.summary is not None and after.summary != before.summary:
        update[SUMMARIZATION_EVENT_KEY] = event_from_summary(after.summary)
        update[SUMMARIZATION_SESSION_ID_KEY] = after.history_session_id or None
    return update
