"""Tests for yuxi_dash.sim.tools: outputs like the real tools', and the agent's LangChain tools."""

from __future__ import annotations

import json

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool

from yuxi_dash.sim.tools import (
    SIM_TOOLS,
    ToolOutputs,
    query_kb,
    run_command,
    web_search,
    write_file,
)
from yuxi_dash.sim.topics import TOPICS, stable_rng, topic_for


def test_query_kb_returns_document_records_with_metadata_and_noise() -> None:
    tools = ToolOutputs(stable_rng("kb"), TOPICS[0])
    payload = json.loads(tools.query_kb("refund policy", "kb_support", top_k=9))
    assert payload["query"] == "refund policy" and payload["kb_id"] == "kb_support"
    assert len(payload["results"]) == 9
    record = payload["results"][0]
    for key in ("id", "kb_id", "file_id", "title", "source", "score", "distance", "content"):
        assert key in record
    metadata = record["metadata"]
    for key in (
        "source",
        "filename",
        "title",
        "chunk_index",
        "score",
        "rerank_score",
        "hybrid_score",
        "graph_score",
        "distance",
        "internal_host_path",
    ):
        assert key in metadata
    scores = [item["score"] for item in payload["results"]]
    assert scores == sorted(scores, reverse=True)


def test_web_search_run_command_and_write_file_look_like_real_tools() -> None:
    tools = ToolOutputs(stable_rng("web"), TOPICS[1])
    web = json.loads(tools.web_search("postgres index", max_results=6))
    assert len(web["results"]) == 6
    for hit in web["results"]:
        assert hit["url"].startswith("https://")
        assert {"title", "site_name", "publish_time", "score", "content"} <= set(hit)
    log = tools.run_command("pytest -q", lines=300)
    assert log.startswith("$ pytest -q") and log.count("\n") == 301
    assert len(log) > 20_000  # long enough that the engine offloads it
    content = tools.file_content("reports/x.md", paragraphs=20)
    assert len(content) > 2_000  # beyond the write_file argument truncation limit
    assert write_file.invoke({"path": "a.md", "content": content}) == (
        f"Wrote {len(content)} characters to a.md"
    )


def _call(tool: BaseTool, call_id: str, thread_id: str, **args: str) -> ToolMessage:
    call = {"type": "tool_call", "name": tool.name, "args": args, "id": call_id}
    message = tool.invoke(call, config={"configurable": {"thread_id": thread_id}})
    assert isinstance(message, ToolMessage) and message.tool_call_id == call_id
    return message


def test_the_agent_tools_are_seeded_by_thread_and_call_and_speak_the_threads_topic() -> None:
    """Same thread and call id: the same output; another call or thread: another one."""
    assert [tool.name for tool in SIM_TOOLS] == [
        "query_kb",
        "web_search",
        "run_command",
        "write_file",
    ]
    thread = "t-tools"
    topic = topic_for(thread)
    first = _call(query_kb, "call_a", thread, query="refunds", kb_id=topic.kb_id)
    assert _call(query_kb, "call_a", thread, query="refunds", kb_id=topic.kb_id) == first
    other_call = _call(query_kb, "call_b", thread, query="refunds", kb_id=topic.kb_id)
    assert other_call.content != first.content
    payload = json.loads(str(first.content))
    assert payload["query"] == "refunds" and payload["kb_id"] == topic.kb_id
    assert all(r["file_id"].startswith(f"file-{topic.key}-") for r in payload["results"])
    log = _call(run_command, "call_c", thread, command="pytest -q")
    assert str(log.content).startswith("$ pytest -q") and "exit status" in str(log.content)
    hits = json.loads(str(_call(web_search, "call_d", thread, query="latency").content))
    assert hits["results"] and all(h["url"].startswith("https://") for h in hits["results"])
    # the tool-call id is injected by the tool node, never shown to the model as an argument
    assert set(query_kb.tool_call_schema.model_json_schema()["properties"]) == {"query", "kb_id"}
