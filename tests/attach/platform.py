"""The stand-in platform's agent runs (`run_threads`), called by its ``POST /_run``.

`run_threads(saver, workdir, spec)` runs a real `langchain.agents.create_agent`
graph (a scripted chat model, a `query_kb` tool, our compression middleware)
with LangGraph's PostgresSaver in the platform's own database, as the platform
owner would. The stand-in server (`platform_server.py`, ``POST /_run``) calls it;
the test process never does. The spec:

    {"clock_offset_seconds": 0,            # a replica whose clock runs behind: negative
     "threads": [{"thread_id": "p1", "user_id": "alice", "agent": "research",
                  "turns": 3, "result_words": 300, "round": 1}]}

Each thread's run config carries ``user_id`` in ``configurable`` and the agent in
``metadata["assistant_id"]`` (LangGraph copies both into checkpoint metadata).
The result, per thread: its newest checkpoint id, token_usage and checkpoint count.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import id as checkpoint_ids
from langgraph.checkpoint.postgres import PostgresSaver

from tests.compression.agents import query_kb_tool, research_script, scripted_model
from yuxi_dash.compression.middleware import context_compression_middleware

CONTEXT_WINDOW = 8000
SUMMARY_THRESHOLD = 2  # thousand tokens: 2048 trigger tokens
KEEP_MESSAGES = 4


@contextmanager
def skewed_clock(offset_seconds: float) -> Iterator[None]:
    """Name checkpoints as a replica whose clock is off by ``offset_seconds``, for the block.

    That replica is another process: it has not seen this process's last id, which
    `uuid6` otherwise never goes below (its module's ``_last_v6_timestamp``).
    """
    if not offset_seconds:
        yield
        return
    clock, last = checkpoint_ids.time, checkpoint_ids._last_v6_timestamp
    offset = int(offset_seconds * 1_000_000_000)
    checkpoint_ids.time = types.SimpleNamespace(time_ns=lambda: clock.time_ns() + offset)  # type: ignore[attr-defined,assignment]
    checkpoint_ids._last_v6_timestamp = None
    try:
        yield
    finally:
        checkpoint_ids.time = clock  # type: ignore[attr-defined]
        checkpoint_ids._last_v6_timestamp = last  # this process's own ids go on from there


def run_thread(saver: PostgresSaver, workdir: Path, spec: dict[str, Any]) -> dict[str, Any]:
    words = int(spec.get("result_words", 300))
    prefix = f"{spec['thread_id']}-r{spec.get('round', 1)}-"
    model = scripted_model(research_script(int(spec["turns"]), prefix=prefix))
    agent = create_agent(
        model,
        [query_kb_tool(lambda q: f"kb result for {q}: " + "evidence " * words)],
        middleware=context_compression_middleware(
            workdir=workdir,
            summary_threshold_k=SUMMARY_THRESHOLD,
            keep_messages=KEEP_MESSAGES,
            context_window=CONTEXT_WINDOW,
        ),
        checkpointer=saver,
    )
    configurable: dict[str, Any] = {"thread_id": spec["thread_id"]}
    if spec.get("user_id"):
        configurable["user_id"] = spec["user_id"]
    config: Any = {"configurable": configurable}
    if spec.get("agent"):
        config["metadata"] = {"assistant_id": spec["agent"]}
    for turn in range(int(spec["turns"])):
        agent.invoke({"messages": [HumanMessage(f"{prefix}question {turn}")]}, config)
    state = agent.get_state(config)
    history = list(agent.get_state_history(config))
    return {
        "thread_id": spec["thread_id"],
        "checkpoint_id": state.config["configurable"]["checkpoint_id"],
        "token_usage": state.values.get("token_usage"),
        "checkpoints": len(history),
        "messages": len(state.values.get("messages") or []),
        "summarized": state.values.get("_summarization_event") is not None,
    }


def run_threads(saver: PostgresSaver, workdir: Path, spec: dict[str, Any]) -> dict[str, Any]:
    """Run every thread of ``spec`` in order; ``{"threads": [result, ...]}``."""
    with skewed_clock(float(spec.get("clock_offset_seconds", 0))):
        return {"threads": [run_thread(saver, workdir, thread) for thread in spec["threads"]]}
