"""ThreadContextState storage round trip and the model-visible view."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    HumanMessageChunk,
    SystemMessage,
    SystemMessageChunk,
    ToolMessage,
    ToolMessageChunk,
)

from tests.compression.builders import build_thread
from yuxi_dash.compression import (
    SUMMARY_SOURCE,
    SummaryEvent,
    ThreadContextState,
    is_summary_message,
)
from yuxi_dash.compression.thread_state import chat_role


def test_storage_round_trip_is_json_and_equal() -> None:
    summary = HumanMessage(content="summary", additional_kwargs={"lc_source": SUMMARY_SOURCE})
    state = ThreadContextState(
        "t",
        build_thread(3),
        summary=SummaryEvent(cutoff_index=4, summary_message=summary, file_path="outputs/x.md"),
        history_session_id="t",
    )
    stored = json.loads(json.dumps(state.to_storage()))
    assert set(stored) == {"messages", "summary", "history_session_id"}
    restored = ThreadContextState.from_storage("t", stored)
    assert restored == state
    assert restored.summary_active()
    assert restored.model_visible_messages() == [summary, *state.messages[4:]]


def test_without_summary_every_message_is_visible() -> None:
    state = ThreadContextState.from_storage("t", {"messages": [], "summary": None})
    assert state.model_visible_messages() == [] and not state.summary_active()
    full = ThreadContextState("t", build_thread(2))
    assert full.model_visible_messages() == full.messages


def test_summary_marker_is_the_lc_source() -> None:
    assert is_summary_message(
        HumanMessage(content="x", additional_kwargs={"lc_source": SUMMARY_SOURCE})
    )
    assert not is_summary_message(HumanMessage(content="x"))


@pytest.mark.parametrize(
    ("message", "role"),
    [
        (HumanMessage("hi"), "user"),
        (AIMessage("ok"), "assistant"),
        (ToolMessage("r", tool_call_id="c1"), "tool"),
        (SystemMessage("s"), "system"),
        (HumanMessageChunk(content="hi"), "user"),
        (AIMessageChunk(content="ok"), "assistant"),
        (ToolMessageChunk(content="r", tool_call_id="c1"), "tool"),
        (SystemMessageChunk(content="s"), "system"),
    ],
)
def test_chat_role_names_a_streamed_chunk_as_its_message(message: BaseMessage, role: str) -> None:
    assert chat_role(message) == role
