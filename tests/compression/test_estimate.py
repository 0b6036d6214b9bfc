"""The engine's estimate of a manual summary and its no-op reason (compression.estimate)."""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from tests.compression.builders import build_thread
from yuxi_dash.compression import (
    ExtractiveSummarizer,
    ThreadContextState,
    count_state_tokens,
    estimate_summary,
    force_summarize,
    summary_readiness,
)
from yuxi_dash.files.workdir import Workdir


def test_with_the_extractive_summarizer_the_estimate_is_the_result(tmp_path: Path) -> None:
    """Issue 29 item 7: the same engine path as the compress, so the same figures."""
    workdir = Workdir(tmp_path / "w")
    workdir.initialize()
    for state in (
        ThreadContextState("t1", build_thread(14, big_every=3, big_chars=30_000)),
        ThreadContextState("t2", build_thread(20)),
    ):
        estimate = estimate_summary(state, summarizer=ExtractiveSummarizer(), keep_messages=6)
        outcome = force_summarize(
            state, workdir=workdir, summarizer=ExtractiveSummarizer(), keep_messages=6
        )
        assert estimate.exact and estimate.before_tokens == count_state_tokens(state)
        assert estimate.before_tokens == outcome.before_tokens
        assert estimate.messages_to_summarize == outcome.compressed_messages
        assert estimate.after_tokens == outcome.after_tokens


def test_without_a_deterministic_summarizer_it_is_an_estimate(tmp_path: Path) -> None:
    state = ThreadContextState("t1", build_thread(14, big_every=3, big_chars=30_000))
    estimate = estimate_summary(state, keep_messages=6)  # a model's summary: stood in for
    assert not estimate.exact and estimate.messages_to_summarize > 0
    assert estimate.after_tokens < estimate.before_tokens
    assert not list(Path.cwd().glob("*history*"))  # nothing was written


def test_a_no_op_says_why_and_names_one_large_tool_result_it_keeps() -> None:
    """Issue 29 item 6: too little history, and most of the input one kept tool result."""
    messages = [
        HumanMessage("find the incident report", id="h1"),
        AIMessage("", id="a1", tool_calls=[{"name": "query_kb", "args": {"q": "x"}, "id": "c1"}]),
        ToolMessage("incident evidence " * 2000, tool_call_id="c1", name="query_kb", id="t1"),
        AIMessage("Here it is.", id="a2"),
    ]
    state = ThreadContextState("t1", messages)
    ready = summary_readiness(state, keep_messages=10)
    assert ready.reason == "insufficient_history"
    assert ready.note is not None
    assert ready.note.startswith("nothing to summarize: 4 messages since the last summary")
    assert "is one query_kb result among the kept messages" in ready.note
    assert estimate_summary(state, keep_messages=10).messages_to_summarize == 0
    long = ThreadContextState("t2", build_thread(20))
    assert summary_readiness(long, keep_messages=6).reason is None
