"""app_pages/thread_detail.py on a thread deepagents wrote: the next model input is what it gave its model.

deepagents 0.7's own SummarizationMiddleware writes the thread into the
dashboard's checkpoint store (SQLite, then PostgreSQL) and its last model call
fails (tests/compression/deep_agent.py), so the newest checkpoint is the state
that call's input was made from. The "Next model input" tab must draw exactly
that input: the summary message, then messages[cutoff:], in order, each
message's content shown literally, reasoning blocks included where the model
got them and absent where deepagents dropped them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.element_tree import Block

from tests.compression.deep_agent import write_dashboard_thread
from tests.fixtures.app import APP
from yuxi_dash.ui.loaders import clear_loaders
from yuxi_dash.ui.page_text import code, literal, md

PAGE = "app_pages/thread_detail.py"
THREAD = "deep-thread-1"
SUMMARY_HEADER = "**Summary of earlier history** (what the model sees instead of it)"

Drawn = tuple[str, list[tuple[str, str]]]


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, indent=1)


def expected(message: BaseMessage, *, first: bool) -> Drawn:
    """How a message deepagents gave its model is drawn: (chat role, [(element, text)])."""
    if first:  # deepagents puts its summary message first
        assert isinstance(message.content, str)
        return "summary", [("markdown", SUMMARY_HEADER), ("text", message.content)]
    if isinstance(message, ToolMessage):
        assert isinstance(message.content, str)
        return "tool", [
            ("caption", md("tool result · {}", message.name)),
            ("code", message.content),
        ]
    content = message.content
    blocks: list[dict[str, Any]] = (
        [{"type": "text", "text": content}]
        if isinstance(content, str)
        else [block for block in content if isinstance(block, dict)]
    )
    assert isinstance(content, str) or len(blocks) == len(content)
    drawn: list[tuple[str, str]] = []
    for block in blocks:
        if block["type"] != "text":
            drawn += [("caption", md("{} block", block["type"])), ("code", _json(block))]
    text = "\n".join(block["text"] for block in blocks if block["type"] == "text")
    if text:
        drawn.append(("markdown", literal(text)))
    for call in message.tool_calls if isinstance(message, AIMessage) else []:
        drawn += [("caption", md("calls {}", code(call["name"]))), ("code", _json(call["args"]))]
    return message.type, drawn


def drawn(block: Block) -> Drawn:
    elements = [
        (child.type, str(getattr(child, "value", None))) for child in block.children.values()
    ]
    return str(block.name), elements  # type: ignore[attr-defined]


def test_next_model_input_is_what_deepagents_gave_its_model(db_url: str, tmp_path: Path) -> None:
    seen = write_dashboard_thread(THREAD, tmp_path / "deepagents")
    clear_loaders()
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    at.query_params["thread"] = THREAD
    at.switch_page(PAGE).run()
    assert not at.exception
    context_tab = at.tabs[1]
    assert context_tab.label == "Next model input"
    assert len(seen) <= 40  # the page draws the last 40 by default: all of them
    shown = [drawn(message) for message in context_tab.chat_message]
    assert shown == [expected(m, first=i == 0) for i, m in enumerate(seen)]
    assert f"{len(seen):,} messages" in " ".join(c.value for c in context_tab.caption)
