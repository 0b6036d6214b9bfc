"""`yuxi-dash context THREAD --json` on a thread deepagents wrote: exactly what it gave its model.

deepagents 0.7's own SummarizationMiddleware writes the thread into the
dashboard's checkpoint store (SQLite, then PostgreSQL) and its last model call
fails (tests/compression/deep_agent.py), so the newest checkpoint is the state
that call's input was made from. The console script, run as an operator runs
it, must list exactly that input: the summary message, then messages[cutoff:],
in order. Each entry's `content` is compared literally with what the model got
(a list of content blocks as blocks: reasoning blocks present where the model
got them, absent where deepagents dropped them).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from tests.compression.deep_agent import write_dashboard_thread

THREAD = "deep-thread-1"
ROLES = {"human": "user", "ai": "assistant", "tool": "tool"}


def context_json(thread_id: str, cwd: Path) -> dict[str, Any]:
    """Run the installed console script with this test's settings; its parsed stdout."""
    script = shutil.which("yuxi-dash", path=str(Path(sys.executable).parent))
    assert script, "the yuxi-dash console script is installed next to the interpreter"
    env = {k: v for k, v in os.environ.items() if k != "YUXI_DASH_DEBUG"}
    done = subprocess.run(
        [script, "context", thread_id, "--json"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    view: dict[str, Any] = json.loads(done.stdout)
    return view


def expected(message: BaseMessage) -> dict[str, Any]:
    """The entry of a message deepagents gave its model (after its summary message)."""
    entry: dict[str, Any] = {
        "role": ROLES[message.type],
        "content": message.content,
    }
    if isinstance(message, ToolMessage):
        entry |= {"tool_name": message.name, "tool_call_id": message.tool_call_id}
    if isinstance(message, AIMessage) and message.tool_calls:
        entry["tool_calls"] = [call["name"] for call in message.tool_calls]
    return entry


def test_context_lists_what_deepagents_gave_its_model(db_url: str, tmp_path: Path) -> None:
    seen = write_dashboard_thread(THREAD, tmp_path / "deepagents")
    view = context_json(THREAD, tmp_path)
    summary, *kept = view["messages"]
    assert summary["role"] == "summary" and summary["index"] is None
    assert view["summary"]["content"] == seen[0].content
    cutoff = view["summary"]["cutoff_index"]
    assert [entry["index"] for entry in kept] == list(range(cutoff, cutoff + len(kept)))
    keys = ("role", "content", "tool_name", "tool_call_id", "tool_calls")
    shown = [{key: entry[key] for key in keys if key in entry} for entry in kept]
    assert shown == [expected(message) for message in seen[1:]]
    assert view["messages_visible"] == len(seen)
