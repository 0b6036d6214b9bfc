"""Threads written by deepagents 0.7's own SummarizationMiddleware, over a scripted chat model.

`summarizing_agent` is a real ``create_agent`` graph with deepagents'
middleware (a summary at 700 tokens unless told, 5 messages kept) on the
checkpointer it is given; `claude_script` answers like Claude: a reasoning
block, text and a tool call, then an answer, so kept answers carry reasoning
deepagents drops once a summary is made after them. The oracle of every test using it is the input
deepagents actually gave the model (`ScriptedChatModel.seen`).

`write_dashboard_thread` writes such a thread into the dashboard's own
checkpoint store (a `conversations` row first, then the agent's turns, then
the projection under the row lock, as the simulator does) and ends with a
model call that fails: its input is what the dashboard must show as the next
model call's. Used by tests/compression/test_state_format.py, the
thread-detail page tests and the `context` command tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend
from deepagents.middleware import SummarizationMiddleware
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver

from tests.compression.agents import ScriptedChatModel, query_kb_tool, scripted_model
from yuxi_dash.compression.state_format import SUMMARIZATION_EVENT_KEY
from yuxi_dash.service import create_thread, thread_lock, upsert_agent
from yuxi_dash.service.locking import require_thread
from yuxi_dash.service.projection import project_thread
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.thread_store import state_store

TURNS = 7
AGENT_SLUG = "deep-agent"


def claude_script(turns: int) -> Iterator[AIMessage]:
    for turn in range(turns):
        yield AIMessage(
            [
                {"type": "thinking", "thinking": f"plan {turn}", "signature": "sig"},
                {"type": "text", "text": f"looking up {turn}"},
            ],
            tool_calls=[{"name": "query_kb", "args": {"q": f"q{turn}"}, "id": f"c{turn}"}],
            response_metadata={"model_provider": "anthropic", "model_name": "claude-x"},
        )
        yield AIMessage(f"answer {turn}")


def long_result(q: str) -> str:
    return f"result {q} " + "x" * 400


def short_result(q: str) -> str:
    """A result the `context` command's 160-character preview shows whole."""
    return f"result {q} " + "x" * 140


def has_reasoning(message: BaseMessage) -> bool:
    content = message.content
    return isinstance(content, list) and any(
        isinstance(block, dict) and block.get("type") == "thinking" for block in content
    )


def summarizing_agent(
    model: ScriptedChatModel,
    saver: BaseCheckpointSaver[Any],
    fs_root: Path,
    *,
    tool_result: Callable[[str], str] = long_result,
    trigger_tokens: int = 700,
) -> Any:
    """A ``create_agent`` graph: `model`, the query_kb tool, deepagents' summarization."""
    summaries = GenericFakeChatModel(messages=iter([AIMessage(f"summary {i}") for i in range(9)]))
    middleware = SummarizationMiddleware(
        model=summaries,
        backend=FilesystemBackend(root_dir=fs_root, virtual_mode=True),
        trigger=("tokens", trigger_tokens),
        keep=("messages", 5),
    )
    return create_agent(
        model, [query_kb_tool(tool_result)], middleware=[middleware], checkpointer=saver
    )


def play(agent: Any, thread_id: str, turns: int) -> None:
    config: Any = {"configurable": {"thread_id": thread_id}}
    for turn in range(turns):
        agent.invoke({"messages": [HumanMessage(f"question {turn}")]}, config)


def write_dashboard_thread(thread_id: str, fs_root: Path) -> list[BaseMessage]:
    """A deepagents thread the dashboard knows; returns the input of its last (failed) model call.

    The last turn's model call raises after deepagents built its input, so the
    newest checkpoint is the state that input was made from: what the dashboard
    says the next model call gets must be exactly it. Results are short (the
    summary comes at 450 tokens) so the `context` command's previews are whole.
    """
    with session_scope() as session:
        upsert_agent(session, AGENT_SLUG, capabilities=["context_compression"])
        create_thread(session, thread_id, user_id="u1", agent_slug=AGENT_SLUG)
    store = state_store()
    model = scripted_model(claude_script(TURNS))
    agent = summarizing_agent(
        model, store.saver, fs_root, tool_result=short_result, trigger_tokens=450
    )
    play(agent, thread_id, TURNS)
    model.fail_first_with = RuntimeError("the provider is down")
    with pytest.raises(RuntimeError, match="the provider is down"):
        agent.invoke(
            {"messages": [HumanMessage(f"question {TURNS}")]},
            {"configurable": {"thread_id": thread_id}},
        )
    with thread_lock(thread_id) as (session, conv):
        project_thread(session, require_thread(conv, thread_id), store)
    seen = model.seen[-1]
    # the failed call made no new summary: it was given the checkpoint's own summary
    latest = store.latest(thread_id)
    assert latest is not None
    event = latest.values[SUMMARIZATION_EVENT_KEY]
    assert event is not None and event["cutoff_index"] > 0
    assert seen[0] == event["summary_message"] and seen[-1].content == f"question {TURNS}"
    # both sides of deepagents' reasoning rule are in it: Claude answers kept from before
    # the summary lost their reasoning blocks, later ones still carry theirs
    cutoff, created = event["cutoff_index"], event["created_at_index"]
    kept = [m for m in seen[1 : 1 + created - cutoff] if isinstance(m.content, list)]
    later = [m for m in seen[1 + created - cutoff :] if isinstance(m.content, list)]
    assert kept and not any(has_reasoning(m) for m in kept)
    assert later and all(has_reasoning(m) for m in later)
    return seen
