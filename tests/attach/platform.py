"""Another "platform" for the attach tests, run as a separate process.

`python -m tests.attach.platform SPEC.json` runs a real `langchain.agents.create_agent`
graph (a scripted chat model, a `query_kb` tool, our compression middleware)
with LangGraph's PostgresSaver in the platform's own database, the saver's
tables set up by the saver itself, as the platform owner would. The spec:

    {"conninfo": "postgresql://...", "workdir": "/path",
     "clock_offset_seconds": 0,            # a replica whose clock runs behind: negative
     "threads": [{"thread_id": "p1", "user_id": "alice", "agent": "research",
                  "turns": 3, "result_words": 300, "round": 1}]}

Each thread's run config carries ``user_id`` in ``configurable`` and the agent in
``metadata["assistant_id"]`` (LangGraph copies both into checkpoint metadata).
Prints JSON: per thread, its newest checkpoint id, token_usage and checkpoint count.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import id as checkpoint_ids
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg import Connection
from psycopg.rows import dict_row

from tests.compression.agents import query_kb_tool, research_script, scripted_model
from yuxi_dash.compression.middleware import context_compression_middleware

CONTEXT_WINDOW = 8000
SUMMARY_THRESHOLD = 2  # thousand tokens: 2048 trigger tokens
KEEP_MESSAGES = 4


def skew_clock(offset_seconds: float) -> None:
    """Make this process name checkpoints as a replica whose clock is off by ``offset_seconds``."""
    if not offset_seconds:
        return
    real = checkpoint_ids.time.time_ns
    offset = int(offset_seconds * 1_000_000_000)
    checkpoint_ids.time = types.SimpleNamespace(time_ns=lambda: real() + offset)  # type: ignore[attr-defined,assignment]


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


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    skew_clock(float(spec.get("clock_offset_seconds", 0)))
    workdir = Path(spec["workdir"])
    with Connection.connect(spec["conninfo"], autocommit=True, row_factory=dict_row) as conn:
        saver = PostgresSaver(conn)  # type: ignore[arg-type]
        saver.setup()  # the platform owns its tables
        results = [run_thread(saver, workdir, thread) for thread in spec["threads"]]
    sys.stdout.write(json.dumps({"threads": results}) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
