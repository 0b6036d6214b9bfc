"""Tests for yuxi_dash.simulate: the fake model, the tool outputs, and the sawtooth it drives."""

from __future__ import annotations

import json

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, messages_to_dict

from yuxi_dash.simulate import (
    TOPICS,
    FakeChatModel,
    ToolOutputs,
    play_turn,
    stable_rng,
    topic_for,
    user_message,
)


def _conversation(seed: int, thread_id: str, turns: int) -> list:
    topic = topic_for(thread_id)
    rng = stable_rng(seed, thread_id)
    model, tools = FakeChatModel(rng, topic), ToolOutputs(rng, topic)
    messages: list = []
    for turn in range(turns):
        play_turn(messages, model=model, tools=tools, user_text=user_message(rng, topic, turn))
    return messages


def test_same_seed_replays_the_same_conversation_and_another_seed_does_not() -> None:
    first = messages_to_dict(_conversation(3, "t-1", 4))
    again = messages_to_dict(_conversation(3, "t-1", 4))
    other = messages_to_dict(_conversation(4, "t-1", 4))
    assert first == again
    assert first != other


def test_turns_alternate_user_tools_answer_with_matching_tool_call_ids() -> None:
    messages = _conversation(1, "t-shape", 5)
    humans = [m for m in messages if isinstance(m, HumanMessage)]
    assert len(humans) == 5
    pending: set[str] = set()
    for message in messages:
        if isinstance(message, AIMessage) and message.tool_calls:
            assert not pending
            pending = {call["id"] for call in message.tool_calls}
        elif isinstance(message, ToolMessage):
            assert message.tool_call_id in pending
            pending.discard(message.tool_call_id)
    assert not pending
    # every turn ends with a text answer
    for index, message in enumerate(messages):
        if isinstance(message, HumanMessage) and index:
            previous = messages[index - 1]
            assert isinstance(previous, AIMessage) and not previous.tool_calls and previous.content


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
    assert tools.run("write_file", {"path": "a.md", "content": content}).startswith(
        f"Wrote {len(content)} characters"
    )


def test_model_calls_write_file_with_large_content_in_the_tool_call_args() -> None:
    topic = TOPICS[2]
    rng = stable_rng("writes")
    model = FakeChatModel(rng, topic)
    found = None
    for _ in range(200):
        reply = model.invoke([HumanMessage(content="go")])
        for call in reply.tool_calls:
            if call["name"] == "write_file":
                found = call
                break
        if found:
            break
    assert found is not None
    assert found["args"]["path"] in topic.files
    assert len(found["args"]["content"]) > 2_000
