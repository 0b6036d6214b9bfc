"""Usage snapshot formulas, the 85% suggestion line, and the context breakdown (context_view)."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from yuxi_dash.compression import (
    ThreadContextState,
    context_view,
    count_tokens,
    force_summarize,
    model_messages,
)
from yuxi_dash.files.workdir import Workdir
from yuxi_dash.usage import (
    SUGGESTION_LABEL,
    UsageSnapshot,
    context_usage_ratio,
    should_suggest_compression,
    summary_pressure_ratio,
    summary_trigger_tokens,
    usage_snapshot,
)


def test_85_percent_line() -> None:
    assert not should_suggest_compression(0.849)
    assert should_suggest_compression(0.85)
    assert should_suggest_compression(1.3)
    assert not should_suggest_compression(None)


def test_trigger_is_k_times_1024() -> None:
    assert summary_trigger_tokens(100) == 102_400
    assert summary_trigger_tokens(8) == 8192


def test_snapshot_formulas() -> None:
    snapshot = usage_snapshot(
        llm_input_tokens=150_000,
        next_llm_input_tokens=87_041,
        context_window=128_000,
        summary_trigger_tokens=102_400,
        summary_active=False,
    )
    assert snapshot.context_usage_ratio == 1.0  # capped
    assert snapshot.summary_pressure_ratio == round(87_041 / 102_400, 4) == 0.85
    assert snapshot.suggest_compression
    assert snapshot.to_dict()["summary_trigger_tokens"] == 102_400
    small = usage_snapshot(
        llm_input_tokens=1000,
        next_llm_input_tokens=1200,
        context_window=3000,
        summary_trigger_tokens=0,
        summary_active=True,
    )
    assert small.context_usage_ratio == 0.3333
    assert small.summary_pressure_ratio == 0.0


def test_the_ratios_are_computed_from_the_fields_never_given() -> None:
    """One usage type: built directly or by `usage_snapshot`, its ratios are the formulas'."""
    for llm, nxt, window, trigger in [(150_000, 87_041, 128_000, 102_400), (1000, 1200, 3000, 0)]:
        inputs = {
            "llm_input_tokens": llm,
            "next_llm_input_tokens": nxt,
            "context_window": window,
            "summary_trigger_tokens": trigger,
            "summary_active": False,
        }
        figures = UsageSnapshot(**inputs)
        snapshot = usage_snapshot(**inputs)
        assert figures.summary_pressure_ratio == snapshot.summary_pressure_ratio
        assert figures.context_usage_ratio == snapshot.context_usage_ratio
        assert figures == snapshot
        assert figures.summary_pressure_ratio == summary_pressure_ratio(nxt, trigger)
        assert figures.context_usage_ratio == context_usage_ratio(llm, window)
        assert figures.to_dict() == {
            **inputs,
            "context_usage_ratio": context_usage_ratio(llm, window),
            "summary_pressure_ratio": summary_pressure_ratio(nxt, trigger),
        }
    with pytest.raises(TypeError):  # a ratio cannot be given, so it cannot disagree
        UsageSnapshot(**inputs, summary_pressure_ratio=0.5)  # type: ignore[call-arg]
    assert SUGGESTION_LABEL == "85%"


def test_breakdown_adds_up_to_the_model_input(tmp_path) -> None:
    messages = []
    for n in range(14):
        messages.append(HumanMessage(content=f"question {n} " * 20))
        messages.append(
            AIMessage(content="", tool_calls=[{"name": "run", "args": {}, "id": f"c{n}"}])
        )
        messages.append(ToolMessage(content="y" * 4000, tool_call_id=f"c{n}", name="run"))
        messages.append(AIMessage(content=f"answer {n} " * 10))
    state = ThreadContextState(thread_id="t", messages=messages)
    tools = [{"name": "run", "description": "run a command", "parameters": {"type": "object"}}]
    plain = context_view(state, system="You are helpful.", tools=tools).breakdown
    total = count_tokens(model_messages(state), system="You are helpful.", tools=tools)
    assert set(plain) == {
        "system",
        "tools",
        "messages",
        "tool_results",
        "summary",
        "compressed_away",
    }
    assert plain["summary"] == 0 and plain["compressed_away"] == 0
    assert plain["system"] > 0 and plain["tools"] > 0 and plain["tool_results"] > 0
    assert sum(v for k, v in plain.items() if k != "compressed_away") == total

    class Fixed:
        name = "fixed"
        extractive = True

        def summarize(self, messages, *, previous_summary=None):
            return "SESSION INTENT\n- test"

    workdir = Workdir(tmp_path / "wd")
    workdir.initialize()
    outcome = force_summarize(state, workdir=workdir, summarizer=Fixed(), keep_messages=4)
    after = context_view(outcome.state).breakdown
    assert after["summary"] > 0
    assert after["compressed_away"] > 0
    assert sum(v for k, v in after.items() if k != "compressed_away") == count_tokens(
        model_messages(outcome.state)
    )
