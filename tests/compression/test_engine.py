"""force_summarize and auto_compact: when the summarizer runs, what is written, what is kept."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from tests.compression.builders import CountingSummarizer, build_thread
from yuxi_dash.compression import (
    SUMMARY_SOURCE,
    ExtractiveSummarizer,
    ThreadContextState,
    auto_compact,
    count_state_tokens,
    force_summarize,
    is_saved_result,
    is_summary_message,
)
from yuxi_dash.errors import SummarizerFailed, WorkdirUnavailable
from yuxi_dash.files.workdir import MARKER_NAME, Workdir


def _files(root: Path) -> list[Path]:
    """Files the engine wrote (the set-up marker of an initialized workdir is not one)."""
    if not root.exists():
        return []
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name != MARKER_NAME)


def test_compaction_alone_suffices_summarizer_not_called(workdir: Workdir) -> None:
    state = ThreadContextState("t1", build_thread(10, big_every=1, big_chars=8000))
    before = count_state_tokens(state)
    summarizer = CountingSummarizer()
    threshold = before - 100  # over the threshold; offloading 10 x 2000 tokens gets far under
    outcome = auto_compact(
        state, workdir=workdir, summarizer=summarizer, threshold_tokens=threshold
    )
    assert summarizer.calls == []
    assert outcome.status == "completed" and outcome.reason == "compaction_sufficient"
    assert not outcome.summarized and outcome.file_path is None
    assert outcome.before_tokens == before
    assert outcome.after_tokens < threshold
    assert outcome.compressed_messages == len(outcome.saved_files) == 10
    assert outcome.state.summary is None
    assert not (workdir.root / "outputs/conversation_history").exists()


def test_failed_offload_writes_keep_messages_and_the_summary_still_runs(
    workdir: Workdir, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compaction would have sufficed, but no file could be written: still over, so summarize."""
    state = ThreadContextState("t1", build_thread(10, big_every=1, big_chars=8000))
    threshold = count_state_tokens(state) - 100

    def refuse(self: Workdir, saved: object, data: bytes) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(Workdir, "write_prepared", refuse)
    summarizer = CountingSummarizer()
    outcome = auto_compact(
        state, workdir=workdir, summarizer=summarizer, threshold_tokens=threshold
    )
    assert len(summarizer.calls) == 1 and outcome.summarized
    assert outcome.reason == "over_threshold" and outcome.saved_files == []
    assert not any(is_saved_result(m) for m in outcome.state.messages)
    assert outcome.state.messages == state.messages  # every tool result kept whole
    assert not (workdir.root / "outputs/large_tool_results").exists()


def test_still_over_threshold_summarizer_called_exactly_once(workdir: Workdir) -> None:
    state = ThreadContextState("t2", build_thread(30, big_every=3, big_chars=8000))
    summarizer = CountingSummarizer()
    outcome = auto_compact(state, workdir=workdir, summarizer=summarizer, threshold_tokens=500)
    assert len(summarizer.calls) == 1
    assert outcome.status == "completed" and outcome.summarized
    assert outcome.reason == "over_threshold"
    summarized_messages, previous = summarizer.calls[0]
    assert previous is None
    # The summarizer saw compacted tool results, never the raw 8000-char bodies.
    assert all(len(m.content) < 8000 for m in summarized_messages)
    visible = outcome.state.model_visible_messages()
    assert is_summary_message(visible[0])
    # keep 10 lands on a tool result, so the cut moves back to its AI call: 11 kept
    assert len(visible) == 1 + 11
    assert isinstance(visible[1], AIMessage) and visible[1].tool_calls
    assert outcome.after_tokens < outcome.before_tokens


def test_under_threshold_passes_through(workdir: Workdir) -> None:
    state = ThreadContextState("t3", build_thread(5, big_every=1))
    summarizer = CountingSummarizer()
    outcome = auto_compact(state, workdir=workdir, summarizer=summarizer, threshold_tokens=10**6)
    assert outcome.status == "no_op" and outcome.reason == "under_threshold"
    assert outcome.state is state
    assert summarizer.calls == [] and _files(workdir.root) == []


def test_context_overflow_summarizes_even_if_compaction_suffices(workdir: Workdir) -> None:
    state = ThreadContextState("t4", build_thread(10, big_every=1, big_chars=8000))
    summarizer = CountingSummarizer()
    threshold = count_state_tokens(state) - 100
    outcome = auto_compact(
        state,
        workdir=workdir,
        summarizer=summarizer,
        threshold_tokens=threshold,
        context_overflow=True,
    )
    assert len(summarizer.calls) == 1
    assert outcome.summarized and outcome.reason == "context_overflow"


def test_force_summarize_writes_history_and_points_summary_at_it(workdir: Workdir) -> None:
    state = ThreadContextState("thread/α", build_thread(6, big_every=2))
    outcome = force_summarize(state, workdir=workdir, summarizer=ExtractiveSummarizer())
    assert outcome.status == "completed" and outcome.summarized and outcome.reason is None
    assert outcome.file_path and outcome.file_path.startswith(
        "outputs/conversation_history/session_"
    )
    summary = outcome.state.summary
    assert summary is not None and summary.file_path == outcome.file_path
    message = summary.summary_message
    assert isinstance(message, HumanMessage)
    assert message.additional_kwargs == {"lc_source": SUMMARY_SOURCE}
    assert outcome.file_path in message.content
    assert "summarized" in message.content
    history = (workdir.root / outcome.file_path).read_text()
    assert "Question 0: please check item 0." in history
    assert outcome.compressed_messages == summary.cutoff_index
    assert len(outcome.state.messages) == len(state.messages)  # nothing dropped from the state
    assert (
        outcome.state.messages[summary.cutoff_index :]
        == outcome.state.messages[-len(outcome.state.model_visible_messages()) + 1 :]
    )
    assert outcome.before_tokens > outcome.after_tokens


def test_forced_right_after_a_summary_is_no_op(workdir: Workdir) -> None:
    state = ThreadContextState("t5", build_thread(6))
    first = force_summarize(state, workdir=workdir, summarizer=CountingSummarizer())
    history = workdir.root / first.file_path
    size = history.stat().st_size
    summarizer = CountingSummarizer()
    second = force_summarize(first.state, workdir=workdir, summarizer=summarizer)
    assert second.status == "no_op" and second.reason == "insufficient_history"
    assert second.state == first.state and summarizer.calls == []
    assert history.stat().st_size == size


def test_insufficient_history_writes_nothing(workdir: Workdir) -> None:
    state = ThreadContextState("t6", build_thread(2, big_every=1))  # 8 messages, keep 10
    summarizer = CountingSummarizer()
    outcome = force_summarize(state, workdir=workdir, summarizer=summarizer)
    assert outcome.status == "no_op" and outcome.reason == "insufficient_history"
    assert outcome.state == state and outcome.compressed_messages == 0
    assert outcome.before_tokens == outcome.after_tokens
    assert summarizer.calls == [] and _files(workdir.root) == []


def test_second_summary_carries_the_first_and_appends_history(workdir: Workdir) -> None:
    state = ThreadContextState("t7", build_thread(6))
    first = force_summarize(state, workdir=workdir, summarizer=ExtractiveSummarizer())
    grown = ThreadContextState(
        "t7",
        [*first.state.messages, *build_thread(5)],
        summary=first.state.summary,
        history_session_id=first.state.history_session_id,
    )
    summarizer = CountingSummarizer()
    second = force_summarize(grown, workdir=workdir, summarizer=summarizer)
    assert second.status == "completed"
    ((seen, previous),) = summarizer.calls
    assert previous is not None and "SESSION INTENT" in previous
    assert not any(is_summary_message(m) for m in seen)  # the old summary is not history
    assert second.file_path == first.file_path
    history = (workdir.root / second.file_path).read_text()
    assert history.count("## Summarized at") == 2
    assert "[Conversation summary]" not in history
    assert second.state.summary.cutoff_index > first.state.summary.cutoff_index


@pytest.mark.parametrize("failure", ["raise", "empty", "blank", "boom"])
def test_summarizer_failure_leaves_state_untouched(workdir: Workdir, failure: str) -> None:
    class Failing:
        name = "failing"
        extractive = False

        def summarize(self, messages, *, previous_summary=None):
            if failure == "raise":
                raise SummarizerFailed("model down")
            if failure == "boom":
                raise RuntimeError("connection reset")
            return "" if failure == "empty" else "   \n"

    state = ThreadContextState("t8", build_thread(6, big_every=2))
    snapshot = state.to_storage()
    with pytest.raises(SummarizerFailed):
        force_summarize(state, workdir=workdir, summarizer=Failing())
    with pytest.raises(SummarizerFailed):
        auto_compact(state, workdir=workdir, summarizer=Failing(), threshold_tokens=10)
    assert state.to_storage() == snapshot
    assert not (workdir.root / "outputs/conversation_history").exists()
    # nor the large tool results the summary would have offloaded
    assert not (workdir.root / "outputs/large_tool_results").exists()


def test_no_workdir_cannot_summarize(workdir: Workdir) -> None:
    state = ThreadContextState("t9", build_thread(6))
    with pytest.raises(WorkdirUnavailable):
        force_summarize(state, workdir=None, summarizer=CountingSummarizer())


def test_cutoff_keeps_tool_call_with_its_results(workdir: Workdir) -> None:
    messages = [HumanMessage(content=f"m{n}") for n in range(8)]
    messages.append(
        AIMessage(
            content="",
            tool_calls=[
                {"name": "a", "args": {}, "id": "x1"},
                {"name": "b", "args": {}, "id": "x2"},
            ],
        )
    )
    messages.append(ToolMessage(content="r1", tool_call_id="x1", name="a"))
    messages.append(ToolMessage(content="r2", tool_call_id="x2", name="b"))
    messages.append(AIMessage(content="done"))
    state = ThreadContextState("t10", messages)
    outcome = force_summarize(
        state, workdir=workdir, summarizer=CountingSummarizer(), keep_messages=2
    )
    assert outcome.state.summary.cutoff_index == 8  # moved back to the AI call, not 10
    assert isinstance(outcome.state.model_visible_messages()[1], AIMessage)


def test_offloaded_results_are_persisted_in_state(workdir: Workdir) -> None:
    state = ThreadContextState("t11", build_thread(12, big_every=1, big_chars=6000))
    outcome = force_summarize(state, workdir=workdir, summarizer=CountingSummarizer())
    tool_messages = [m for m in outcome.state.messages if isinstance(m, ToolMessage)]
    assert all(is_saved_result(m) for m in tool_messages)
    assert len(outcome.saved_files) == 12
    for _call_id, _name, saved in outcome.saved_files:
        assert workdir.verify(saved.path, saved.sha256) == "ok"


def test_auto_over_threshold_with_too_little_history(workdir: Workdir) -> None:
    small = ThreadContextState("t12", build_thread(2))  # 8 messages, nothing large
    summarizer = CountingSummarizer()
    outcome = auto_compact(small, workdir=workdir, summarizer=summarizer, threshold_tokens=10)
    assert outcome.status == "no_op" and outcome.reason == "insufficient_history"
    assert outcome.state == small and summarizer.calls == []
    big = ThreadContextState("t13", build_thread(2, big_every=1, big_chars=8000))
    outcome = auto_compact(big, workdir=workdir, summarizer=summarizer, threshold_tokens=10)
    assert outcome.status == "completed" and outcome.reason == "insufficient_history"
    assert not outcome.summarized and len(outcome.saved_files) == 2 and summarizer.calls == []


def test_text_block_results_are_offloaded_on_both_paths(workdir: Workdir) -> None:
    """MCP-style content-block results get under the threshold without a summary, and a forced
    summary persists them offloaded too (the summary path plans, then writes)."""

    def as_blocks(messages: list) -> list:
        return [
            m.model_copy(update={"content": [{"type": "text", "text": m.content}]})
            if isinstance(m, ToolMessage)
            else m
            for m in messages
        ]

    state = ThreadContextState("t-blocks", as_blocks(build_thread(10, big_every=1, big_chars=8000)))
    summarizer = CountingSummarizer()
    threshold = count_state_tokens(state) - 100
    outcome = auto_compact(
        state, workdir=workdir, summarizer=summarizer, threshold_tokens=threshold
    )
    assert summarizer.calls == [] and outcome.reason == "compaction_sufficient"
    assert outcome.compressed_messages == len(outcome.saved_files) == 10

    state = ThreadContextState(
        "t-blocks-2", as_blocks(build_thread(12, big_every=1, big_chars=6000))
    )
    forced = force_summarize(state, workdir=workdir, summarizer=CountingSummarizer())
    tool_messages = [m for m in forced.state.messages if isinstance(m, ToolMessage)]
    assert tool_messages and all(is_saved_result(m) for m in tool_messages)
    for _call_id, _name, saved in forced.saved_files:
        assert workdir.verify(saved.path, saved.sha256) == "ok"
