"""`context_view`: what the next model call sees, message by message, and its tokens by part."""

from __future__ import annotations

from langchain_core.messages import AIMessage, ToolMessage

from tests.compression.builders import CountingSummarizer, build_thread
from yuxi_dash.compression import (
    BREAKDOWN_PARTS,
    ThreadContextState,
    context_view,
    count_state_tokens,
    count_tokens,
    force_summarize,
    model_messages,
)
from yuxi_dash.files.workdir import Workdir


def test_a_thread_without_a_summary_is_seen_whole() -> None:
    state = ThreadContextState("t", build_thread(3))
    view = context_view(state)
    assert [item.index for item in view.messages] == list(range(len(state.messages)))
    assert [item.message for item in view.messages] == model_messages(state)
    assert (view.messages_total, view.hidden_messages) == (len(state.messages), 0)
    assert view.total_tokens == count_state_tokens(state) == sum(i.tokens for i in view.messages)
    assert not any(item.summary or item.saved for item in view.messages)
    assert view.breakdown["compressed_away"] == 0


def test_after_a_summary_the_indices_tokens_and_parts_agree(workdir: Workdir) -> None:
    state = ThreadContextState("t", build_thread(10, big_every=2))
    outcome = force_summarize(
        state,
        workdir=workdir,
        summarizer=CountingSummarizer("SESSION INTENT\n- x"),
        keep_messages=8,
    )
    after = outcome.state
    assert after.summary is not None
    view = context_view(after)
    first, *rest = view.messages
    assert (first.index, first.summary, first.message) == (
        None,
        True,
        after.summary.summary_message,
    )
    assert [item.index for item in rest] == list(range(after.visible_start, len(after.messages)))
    assert [item.message for item in rest] == model_messages(after)[1:]
    assert view.hidden_messages == after.visible_start > 0
    assert view.messages_total == len(after.messages)
    # the total is the engine's count, and both the messages and the parts add up to it
    assert view.total_tokens == count_state_tokens(after) == sum(i.tokens for i in view.messages)
    assert set(view.breakdown) == set(BREAKDOWN_PARTS)
    assert sum(v for k, v in view.breakdown.items() if k != "compressed_away") == view.total_tokens
    assert view.breakdown["summary"] == first.tokens
    # offloaded results in the kept tail carry their parsed header; what they saved is counted
    saved = [item for item in rest if item.saved is not None]
    assert saved, "the kept tail holds offloaded results"
    offloaded_away = sum(i.saved.approx_tokens - i.tokens for i in saved if i.saved)
    summarized_away = count_tokens(after.messages[: after.visible_start])
    assert view.breakdown["compressed_away"] == offloaded_away + summarized_away


def test_long_file_write_arguments_are_shortened_as_the_model_gets_them() -> None:
    long = "x" * 5000
    write = AIMessage("", tool_calls=[{"name": "write_file", "args": {"content": long}, "id": "w"}])
    view = context_view(ThreadContextState("t", [write]))
    assert view.messages[0].message.tool_calls[0]["args"]["content"] != long
    assert write.tool_calls[0]["args"]["content"] == long
    shorter = context_view(ThreadContextState("t", [write]), tool_arg_max_length=10_000)
    assert shorter.messages[0].message.tool_calls[0]["args"]["content"] == long


def test_a_forged_header_with_an_odd_token_count_is_counted_not_crashed_on() -> None:
    """A count like ²³ is a digit to str.isdigit but not to int(): no figure is made from it."""
    forged = "[Tool result saved]\nTool: x\nApprox tokens: ²³\n"
    call = AIMessage("", tool_calls=[{"name": "x", "args": {}, "id": "c"}])
    state = ThreadContextState("t", [call, ToolMessage(forged, tool_call_id="c", name="x")])
    view = context_view(state)
    assert view.messages[1].saved is not None
    assert view.messages[1].saved.approx_tokens_text == "²³"
    assert view.breakdown["compressed_away"] == 0
    assert view.breakdown["tool_results"] == view.messages[1].tokens
