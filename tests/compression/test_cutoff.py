"""The summary cutoff: property-based over random message sequences."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from tests.compression.builders import CountingSummarizer
from tests.fixtures.profiles import examples
from yuxi_dash.compression import ThreadContextState, find_cutoff, force_summarize
from yuxi_dash.files.workdir import Workdir


@st.composite
def message_sequences(draw: st.DrawFn) -> list[BaseMessage]:
    """Human turns, plain answers and AI tool calls whose results follow (maybe interleaved)."""
    messages: list[BaseMessage] = []
    pending: list[tuple[str, str]] = []
    call_counter = 0
    for _ in range(draw(st.integers(min_value=0, max_value=40))):
        kind = draw(st.sampled_from(["human", "ai", "tools", "result"]))
        if kind == "human":
            messages.append(HumanMessage(content=f"h{len(messages)}"))
        elif kind == "ai":
            messages.append(AIMessage(content=f"a{len(messages)}"))
        elif kind == "tools":
            calls = []
            for _ in range(draw(st.integers(min_value=1, max_value=3))):
                call_counter += 1
                # ids are sometimes reused across calls, as some providers do
                call_id = f"c{draw(st.integers(min_value=0, max_value=3)) if draw(st.booleans()) else call_counter}"
                calls.append({"name": "t", "args": {}, "id": call_id})
            messages.append(AIMessage(content="", tool_calls=calls))
            results = [(c["id"], "t") for c in calls]
            if draw(st.booleans()):
                messages.extend(
                    ToolMessage(content="r", tool_call_id=i, name=n) for i, n in results
                )
            else:
                pending.extend(results)
        elif pending:
            call_id, name = pending.pop(0)
            messages.append(ToolMessage(content="late", tool_call_id=call_id, name=name))
    return messages


def _owner(messages: list[BaseMessage], result_index: int) -> int | None:
    call_id = messages[result_index].tool_call_id
    for index in range(result_index - 1, -1, -1):
        message = messages[index]
        if isinstance(message, AIMessage) and any(c["id"] == call_id for c in message.tool_calls):
            return index
    return None


@settings(max_examples=examples(300))
@given(message_sequences(), st.integers(min_value=0, max_value=12), st.data())
def test_cutoff_never_splits_a_tool_call_from_its_results(
    messages: list[BaseMessage], keep: int, data: st.DataObject
) -> None:
    start = data.draw(st.integers(min_value=0, max_value=len(messages)))
    cutoff = find_cutoff(messages, keep, start)
    assert start <= cutoff <= len(messages)
    if cutoff > start:
        assert len(messages) - cutoff >= keep  # at least the last `keep` are kept
    for index in range(cutoff, len(messages)):
        if isinstance(messages[index], ToolMessage):
            owner = _owner(messages, index)
            assert owner is None or owner >= cutoff or owner < start
    summarized, kept = messages[start:cutoff], messages[cutoff:]
    assert messages[:start] + summarized + kept == messages


@settings(max_examples=examples(60))
@given(message_sequences(), st.integers(min_value=0, max_value=8))
def test_force_summarize_loses_no_message(
    tmp_path_factory, messages: list[BaseMessage], keep: int
) -> None:
    workdir = Workdir(tmp_path_factory.mktemp("wd"))
    state = ThreadContextState("prop", messages)
    summarizer = CountingSummarizer()
    outcome = force_summarize(state, workdir=workdir, summarizer=summarizer, keep_messages=keep)
    assert outcome.state.messages == messages  # nothing dropped or reordered
    if outcome.status == "no_op":
        assert summarizer.calls == [] and outcome.state == state
        return
    cutoff = outcome.state.summary.cutoff_index
    ((seen, _previous),) = summarizer.calls
    assert seen == messages[:cutoff]
    visible = outcome.state.model_visible_messages()
    assert visible[1:] == messages[cutoff:]
    assert seen + visible[1:] == messages
    history = (workdir.root / outcome.file_path).read_text()
    assert history.count("### [") == cutoff
