"""A thread compressed by our own core, so a real compression record exists (a builder).

The thread holds a knowledge-base search (offloaded to a file: its late records are
recoverable there, at line 1), a run lookup whose ``thread_id`` only the history file
keeps (recoverable at its line), and a web search offloaded before whose file is gone (a
cited, lost saved result). Used by the page, browser and saved-line tests.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from tests.compression.builders import kb_payload
from tests.service.builders import OPERATOR, seed_thread
from yuxi_dash import sources
from yuxi_dash.compression.compaction import saved_result_header
from yuxi_dash.files.workdir import SavedFile
from yuxi_dash.service.compress import CompressResult
from yuxi_dash.store.compressions import list_compressions
from yuxi_dash.store.db import session_scope

GONE_PATH = "outputs/large_tool_results/web_search-0123456789abcdef.txt"
HISTORY_ONLY = "th-0007"  # a thread id only the history file keeps


def evidence_messages(tag: str = "") -> list[BaseMessage]:
    gone = SavedFile(GONE_PATH, "0123456789abcdef" + "0" * 48, 5000, 1250)
    preview = '{"results": [{"url": "https://example.org/a", "title": "A"}]}'
    messages: list[BaseMessage] = [
        HumanMessage(f"What is our retention policy{tag}? Start from https://example.com/brief."),
        AIMessage(
            "", tool_calls=[{"name": "query_kb", "args": {"query": "retention"}, "id": "c1"}]
        ),
        ToolMessage(content=kb_payload(20), tool_call_id="c1", name="query_kb"),
        AIMessage("Retention is 30 days. Sources: [chunk-13]"),
        AIMessage("", tool_calls=[{"name": "get_run", "args": {}, "id": "g"}]),
        ToolMessage(
            content=f'{{"run_id": "run-0042", "thread_id": "{HISTORY_ONLY}"}}',
            tool_call_id="g",
            name="get_run",
        ),
        AIMessage("Run run-0042 did it."),
        AIMessage("", tool_calls=[{"name": "web_search", "args": {"q": "x"}, "id": "w"}]),
        ToolMessage(
            content=saved_result_header("web_search", gone, preview, 5000),
            tool_call_id="w",
            name="web_search",
        ),
        AIMessage(f"The search is in {GONE_PATH}."),
    ]
    for turn in range(6):
        messages += [HumanMessage(f"Follow-up {turn}?"), AIMessage(f"Reply {turn}.")]
    return messages


def compressed_thread(
    thread_id: str = "t1", *, agent_slug: str = "agent-a", user_id: str = "u1"
) -> tuple[CompressResult, dict[str, Any]]:
    """Seed the thread, compress it as an operator; (the result, its record as a dict)."""
    seed_thread(
        thread_id, user_id=user_id, agent_slug=agent_slug, messages=evidence_messages(),
        keep_messages=4,
    )  # fmt: skip
    result = sources.compress_thread_context(thread_id, actor=OPERATOR)
    assert result.status == "completed"
    with session_scope() as session:
        [view] = list_compressions(session, thread_id)
    return result, view.to_dict()


def item_index(record: dict[str, Any], value: str) -> int:
    """The ledger index of the item holding ``value``."""
    items = record["ledger"]["items"]
    return next(index for index, item in enumerate(items) if item["value"] == value)
