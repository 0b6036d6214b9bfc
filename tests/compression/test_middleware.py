"""The engine as agent middleware, in real `create_agent` graphs with real checkpointers."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from tests.compression.agents import query_kb_tool, research_script, scripted_model
from yuxi_dash.compression import count_tokens, is_summary_message
from yuxi_dash.compression.engine import model_messages
from yuxi_dash.compression.middleware import (
    ContextCompressionMiddleware,
    TokenUsageMiddleware,
    context_compression_middleware,
    summary_trigger,
)
from yuxi_dash.compression.state_format import (
    SUMMARIZATION_EVENT_KEY,
    TOKEN_USAGE_KEY,
    context_state,
)
from yuxi_dash.errors import InvalidInput
from yuxi_dash.files.workdir import Workdir

CONFIG: Any = {"configurable": {"thread_id": "t-mw"}}


def big_result(q: str) -> str:
    return "\n".join(f"record {q}-{i}: " + "evidence " * 12 for i in range(60))


def run_agent(workdir: Workdir, turns: int, *, result: Any = big_result, threshold: int = 2):
    model = scripted_model(research_script(turns))
    agent = create_agent(
        model,
        [query_kb_tool(result)],
        middleware=context_compression_middleware(
            workdir=workdir, summary_threshold_k=threshold, keep_messages=4, context_window=8000
        ),
        checkpointer=InMemorySaver(),
    )
    for turn in range(turns):
        agent.invoke({"messages": [HumanMessage(f"question {turn}")]}, CONFIG)
    return agent, model


def test_under_the_threshold_the_call_passes_through_and_usage_is_recorded(
    workdir: Workdir,
) -> None:
    agent, model = run_agent(workdir, 1, result=lambda q: "short answer")
    values = agent.get_state(CONFIG).values
    assert values.get(SUMMARIZATION_EVENT_KEY) is None
    assert not any("[Tool result saved]" in str(m.content) for m in values["messages"])
    usage = values[TOKEN_USAGE_KEY]
    assert usage["summary_trigger_tokens"] == 2048 and usage["context_window"] == 8000
    tools = [query_kb_tool(big_result)]  # the same schema the agent sent
    assert usage["llm_input_tokens"] == count_tokens(model.seen[-1], tools=tools)
    expected_next = count_tokens([*model.seen[-1], values["messages"][-1]], tools=tools)
    assert usage["next_llm_input_tokens"] == expected_next
    assert usage["summary_pressure_ratio"] == round(expected_next / 2048, 4)
    assert usage["summary_active"] is False


def test_over_the_threshold_results_are_offloaded_then_summarized(workdir: Workdir) -> None:
    agent, model = run_agent(workdir, 6)
    values = agent.get_state(CONFIG).values
    messages = values["messages"]
    assert len(messages) == 6 * 4  # every message stays in the state
    # offloaded results replaced their originals in place, files byte-exact
    saved = [
        m for m in messages if isinstance(m, ToolMessage) and "[Tool result saved]" in m.content
    ]
    assert saved
    for message in saved:
        path = next(
            line.split(":", 1)[1].strip()
            for line in message.content.splitlines()
            if line.startswith("Full output path:")
        )
        query = next(
            call["args"]["q"]
            for m in messages
            if isinstance(m, AIMessage)
            for call in m.tool_calls
            if call["id"] == message.tool_call_id
        )
        original = big_result(query).encode()
        assert hashlib.sha256((workdir.root / path).read_bytes()).hexdigest() == (
            hashlib.sha256(original).hexdigest()
        )
    # the summary is deepagents' event; the model saw summary + messages[cutoff:]
    event = values[SUMMARIZATION_EVENT_KEY]
    assert set(event) == {"cutoff_index", "summary_message", "file_path", "created_at_index"}
    assert is_summary_message(event["summary_message"])
    assert (workdir.root / event["file_path"]).is_file()
    state_before_last_answer = {**values, "messages": messages[:-1]}
    view = model_messages(context_state("t-mw", state_before_last_answer))
    assert [m.content for m in model.seen[-1]] == [m.content for m in view]
    assert model.seen[-1][0].content == event["summary_message"].content
    assert values[TOKEN_USAGE_KEY]["summary_active"] is True


def test_a_context_overflow_summarizes_once_and_retries(workdir: Workdir) -> None:
    model = scripted_model(research_script(4))
    agent = create_agent(
        model,
        [query_kb_tool(lambda q: f"result for {q}")],
        middleware=context_compression_middleware(
            workdir=workdir, summary_threshold_k=100, keep_messages=2
        ),
        checkpointer=InMemorySaver(),
    )
    for turn in range(3):
        agent.invoke({"messages": [HumanMessage(f"question {turn}")]}, CONFIG)
    assert agent.get_state(CONFIG).values.get(SUMMARIZATION_EVENT_KEY) is None
    model.fail_first_with = ContextOverflowError("prompt is too long")
    calls_before = len(model.seen)
    agent.invoke({"messages": [HumanMessage("question 3")]}, CONFIG)
    refused, retried = model.seen[calls_before], model.seen[calls_before + 1]
    assert not is_summary_message(refused[0])
    assert is_summary_message(retried[0]) and len(retried) < len(refused)
    assert agent.get_state(CONFIG).values[SUMMARIZATION_EVENT_KEY] is not None


def test_a_failing_summarizer_fails_the_call_and_writes_no_event(workdir: Workdir) -> None:
    class Broken:
        name = "broken"
        extractive = False

        def summarize(self, messages: Any, *, previous_summary: str | None = None) -> str:
            raise RuntimeError("provider down")

    model = scripted_model(research_script(6))
    middleware = context_compression_middleware(
        workdir=workdir, summarizer=Broken(), summary_threshold_k=2, keep_messages=4
    )
    agent = create_agent(
        model, [query_kb_tool(big_result)], middleware=middleware, checkpointer=InMemorySaver()
    )
    with pytest.raises(Exception, match="summarizer"):
        for turn in range(6):
            agent.invoke({"messages": [HumanMessage(f"question {turn}")]}, CONFIG)
    history = Path(workdir.root) / "outputs" / "conversation_history"
    assert not history.exists() or list(history.iterdir()) == []


def test_the_trigger_is_named_by_its_unit(workdir: Workdir) -> None:
    by_k = context_compression_middleware(
        workdir=workdir, context_window=128_000, summary_threshold_k=16
    )
    by_tokens = context_compression_middleware(
        workdir=workdir, context_window=128_000, summary_trigger_tokens=16_000
    )
    assert by_k[0].threshold_tokens == 16_384
    assert by_k[1].trigger_tokens == 16_384
    assert by_tokens[0].threshold_tokens == 16_000
    assert by_tokens[1].trigger_tokens == 16_000
    default = context_compression_middleware(workdir=workdir)
    assert default[0].threshold_tokens == 100 * 1024


def test_a_trigger_above_the_window_is_refused_and_names_the_unit(workdir: Workdir) -> None:
    # 16000 meant as tokens but given as K: 16,384,000 tokens, past any window
    with pytest.raises(InvalidInput, match=r"thousands of tokens.*summary_trigger_tokens"):
        context_compression_middleware(
            workdir=workdir, context_window=128_000, summary_threshold_k=16_000
        )
    with pytest.raises(InvalidInput, match="above the context window"):
        TokenUsageMiddleware(context_window=8_000, summary_trigger_tokens=9_000)
    with pytest.raises(InvalidInput, match="not both"):
        ContextCompressionMiddleware(
            workdir=workdir, summary_threshold_k=8, summary_trigger_tokens=8_000
        )
    with pytest.raises(InvalidInput, match="positive"):
        summary_trigger(context_window=8_000, summary_trigger_tokens=0)


def test_each_call_records_its_reported_model_and_output_tokens(workdir: Workdir) -> None:
    long_name = "m" * 200
    script = iter(
        [
            AIMessage(
                "",
                tool_calls=[{"name": "query_kb", "args": {"q": "q0"}, "id": "c0"}],
                response_metadata={"model_name": "gpt-test"},
                usage_metadata={"input_tokens": 90, "output_tokens": 17, "total_tokens": 107},
            ),
            AIMessage("answer 0", response_metadata={"model": long_name}),
            AIMessage("answer 1"),
        ]
    )
    agent = create_agent(
        scripted_model(script),
        [query_kb_tool(lambda q: "short answer")],
        middleware=context_compression_middleware(
            workdir=workdir, context_window=200_000, summary_threshold_k=100
        ),
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [HumanMessage("question 0")]}, CONFIG)
    usages = [
        snapshot.values[TOKEN_USAGE_KEY]
        for snapshot in reversed(list(agent.get_state_history(CONFIG)))
        if TOKEN_USAGE_KEY in snapshot.values
    ]
    calls = {(u["model"], u["output_tokens"], u["llm_input_tokens"]) for u in usages}
    assert ("gpt-test", 17, 90) in calls  # the provider's figures, as reported
    assert any(u["model"] == "m" * 128 and u["output_tokens"] is None for u in usages)
    agent.invoke({"messages": [HumanMessage("question 1")]}, CONFIG)
    latest = agent.get_state(CONFIG).values[TOKEN_USAGE_KEY]
    assert latest["model"] is None and latest["output_tokens"] is None  # nothing reported
