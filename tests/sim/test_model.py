"""Tests for yuxi_dash.sim.model and .loop: the fake chat model in a real `create_agent` graph."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    messages_to_dict,
)
from langgraph.checkpoint.memory import InMemorySaver

from yuxi_dash.compression import ExtractiveSummarizer
from yuxi_dash.compression.middleware import ContextCompressionMiddleware, TokenUsageMiddleware
from yuxi_dash.files.workdir import Workdir
from yuxi_dash.sim.loop import (
    SIM_AGENTS,
    AgentProfile,
    agent_middleware,
    build_agent,
    play_turn,
    run_config,
    turns_played,
)
from yuxi_dash.sim.model import SimChatModel, user_message
from yuxi_dash.sim.topics import TOPICS, stable_rng, topic_for

# an agent without context_compression: only the token-usage middleware, never a compaction
PLAIN_AGENT = AgentProfile(
    slug="plain", name="Plain", capabilities=(), context_window=128_000, summary_threshold=100
)


def _conversation(seed: str, thread_id: str, turns: int) -> list[BaseMessage]:
    """`turns` turns of a real agent graph (in-memory checkpointer), the state's messages."""
    agent = build_agent(PLAIN_AGENT, checkpointer=InMemorySaver(), seed=seed)
    topic = topic_for(thread_id)
    for turn in range(turns):
        play_turn(agent, thread_id, user_message(stable_rng(seed, turn), topic, turn))
    values = agent.get_state(run_config(thread_id)).values
    assert turns_played(values) == turns
    return list(values["messages"])


def _without_ids(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """The messages as dicts, without the ids LangGraph gives user and tool messages."""
    dumped = messages_to_dict(messages)
    for message in dumped:
        message["data"]["id"] = None
    return dumped


def test_same_seed_replays_the_same_conversation_and_another_seed_does_not() -> None:
    first = _without_ids(_conversation("s3", "t-1", 4))
    again = _without_ids(_conversation("s3", "t-1", 4))
    other = _without_ids(_conversation("s4", "t-1", 4))
    assert first == again
    assert first != other


def test_turns_alternate_user_tools_answer_with_matching_tool_call_ids() -> None:
    messages = _conversation("s1", "t-shape", 5)
    humans = [m for m in messages if isinstance(m, HumanMessage)]
    assert len(humans) == 5
    pending: set[str] = set()
    call_ids: list[str] = []
    for message in messages:
        if isinstance(message, AIMessage) and message.tool_calls:
            assert not pending
            pending = {call["id"] for call in message.tool_calls}
            call_ids.extend(call["id"] for call in message.tool_calls)
        elif isinstance(message, ToolMessage):
            assert message.tool_call_id in pending
            pending.discard(message.tool_call_id)
            assert message.name in ("query_kb", "web_search", "run_command", "write_file")
    assert not pending
    assert len(call_ids) == len(set(call_ids))  # a call id names one call of the thread
    # every turn starts with tools and ends with a text answer, within four tool rounds
    for index, message in enumerate(messages):
        if isinstance(message, HumanMessage) and index:
            previous = messages[index - 1]
            assert isinstance(previous, AIMessage) and not previous.tool_calls and previous.content
    rounds = 0
    for message in messages:
        if isinstance(message, HumanMessage):
            rounds = 0
        elif isinstance(message, AIMessage) and message.tool_calls:
            rounds += 1
            assert rounds <= 4


def test_model_calls_write_file_with_large_content_in_the_tool_call_args() -> None:
    topic = TOPICS[2]
    thread_id = next(f"t-{n}" for n in range(500) if topic_for(f"t-{n}") == topic)
    model = SimChatModel(seed="writes")
    found = None
    for turn in range(200):
        reply = model.reply(thread_id, [HumanMessage(content=f"go {turn}")])
        found = next((c for c in reply.tool_calls if c["name"] == "write_file"), None)
        if found:
            break
    assert found is not None
    assert found["args"]["path"] in topic.files
    assert len(found["args"]["content"]) > 2_000


def test_the_model_reads_what_it_is_shown_but_not_tool_results_or_arguments() -> None:
    """An offload or an argument truncation leaves the next reply alone; a new message does not."""
    model = SimChatModel(seed="view")
    first = model.reply("t-view", [HumanMessage("Find the refund policy.")])
    assert first.tool_calls and model.bind_tools([]) is model
    results = [
        ToolMessage(f"result {i}" * 500, tool_call_id=call["id"], name=call["name"])
        for i, call in enumerate(first.tool_calls)
    ]
    shown = [HumanMessage("Find the refund policy."), first, *results]
    offloaded = [
        HumanMessage("Find the refund policy."),
        first.model_copy(update={"tool_calls": [{**c, "args": {}} for c in first.tool_calls]}),
        *[r.model_copy(update={"content": "[Tool result saved] ..."}) for r in results],
    ]
    assert model.reply("t-view", shown) == model.reply("t-view", offloaded)
    assert model.reply("t-view", shown) != model.reply("t-view", [*shown, HumanMessage("more")])
    assert model.reply("t-view", shown) != model.reply("t-other", shown)


def test_a_compacting_agent_needs_a_workdir_and_a_summarizer(tmp_path) -> None:
    """An agent with context_compression gets the compression middleware and needs a workdir;
    one without gets only the token-usage middleware."""
    capable = next(agent for agent in SIM_AGENTS if agent.capable)
    with pytest.raises(ValueError, match="workdir"):
        build_agent(capable, checkpointer=InMemorySaver())
    workdir = Workdir(tmp_path / "workdir")
    workdir.initialize()
    chain = agent_middleware(capable, workdir=workdir, summarizer=ExtractiveSummarizer())
    assert [type(m) for m in chain] == [ContextCompressionMiddleware, TokenUsageMiddleware]
    assert [type(m) for m in agent_middleware(PLAIN_AGENT)] == [TokenUsageMiddleware]


def test_a_paused_turn_stops_before_the_tools_with_the_calls_pending() -> None:
    agent = build_agent(PLAIN_AGENT, checkpointer=InMemorySaver(), seed="pause")
    play_turn(agent, "t-pause", "Check the deploy.", max_model_calls=1)
    state = agent.get_state(run_config("t-pause"))
    assert state.next == ("tools",)
    last = state.values["messages"][-1]
    assert isinstance(last, AIMessage) and last.tool_calls
    assert state.values["token_usage"]["llm_input_tokens"] > 0
