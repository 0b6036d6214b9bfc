"""Tests for yuxi_dash.simulate: the fake model, the tool outputs, and the sawtooth it drives."""

from __future__ import annotations

import json

import pytest
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


# --- the driver, against the store -------------------------------------------------

TINY_AGENT = "tiny-agent"


def _tiny_agent(settings) -> None:
    from yuxi_dash.service import upsert_agent
    from yuxi_dash.store.db import session_scope

    with session_scope(settings) as session:
        upsert_agent(
            session,
            TINY_AGENT,
            name="Tiny",
            capabilities=["context_compression"],
            context_window=32_000,
            summary_threshold=8,  # 8,192 tokens: several compactions in a few turns
        )


def test_simulate_draws_a_sawtooth_with_one_snapshot_per_model_call() -> None:
    from yuxi_dash.settings import get_settings
    from yuxi_dash.simulate import simulate
    from yuxi_dash.store.db import session_scope
    from yuxi_dash.store.queries import chat_record, get_thread, usage_timeline

    settings = get_settings()
    _tiny_agent(settings)
    report = simulate(settings, threads=1, turns=6, seed=11, agent_slug=TINY_AGENT)
    (thread,) = report.threads
    assert thread.turns == 6 and thread.auto_compactions >= 2
    with session_scope(settings) as session:
        points = usage_timeline(session, thread.thread_id)
        detail = get_thread(session, thread.thread_id)
        chat = chat_record(session, thread.thread_id)
    sources = [point.source for point in points]
    assert sources.count("model_call") == thread.model_calls
    assert sources.count("auto_compaction") == thread.auto_compactions
    assert len(points) == thread.model_calls + thread.auto_compactions
    trigger = 8 * 1024
    rises = drops = exact = 0
    for before, after in zip(points, points[1:], strict=False):
        if after.source == "auto_compaction":
            # fired at the threshold, and it dropped the pressure
            assert after.llm_input_tokens >= trigger
            assert after.next_llm_input_tokens < after.llm_input_tokens
            assert after.summary_pressure_ratio < before.summary_pressure_ratio
            drops += 1
        else:
            # the call saw what the previous measurement said it would (plus, at a new
            # turn, the user's new message)
            assert after.llm_input_tokens >= before.next_llm_input_tokens
            exact += after.llm_input_tokens == before.next_llm_input_tokens
            assert after.llm_input_tokens < trigger  # never called over the threshold
            rises += after.next_llm_input_tokens > after.llm_input_tokens
    assert drops == thread.auto_compactions
    assert rises == thread.model_calls - 1  # every call but the first adds to the context
    assert exact >= thread.model_calls - 6 - thread.auto_compactions
    assert max(point.summary_pressure_ratio for point in points) >= 1.0
    # the current usage is the last snapshot, and the stored state matches it
    assert detail.summary.summary_pressure_ratio == points[-1].summary_pressure_ratio
    assert detail.summary.next_llm_input_tokens == points[-1].next_llm_input_tokens
    assert detail.version == len(points)
    assert [m.role for m in chat].count("user") == 6
    assert detail.summary.busy_reason is None


def test_simulate_goes_through_intake_and_run_lifecycle_and_indexes_files() -> None:
    import sqlalchemy as sa

    from yuxi_dash.settings import get_settings
    from yuxi_dash.simulate import simulate
    from yuxi_dash.store.db import session_scope
    from yuxi_dash.store.models import AgentRun, RunRequest
    from yuxi_dash.tool_results import verify_tool_results

    settings = get_settings()
    _tiny_agent(settings)
    simulate(settings, threads=2, turns=2, seed=5, agent_slug=TINY_AGENT)
    again = simulate(settings, threads=1, turns=1, seed=5)  # continues sim-5-01
    assert again.threads[0].thread_id == "sim-5-01" and again.threads[0].agent == TINY_AGENT
    with session_scope(settings) as session:
        runs = session.execute(
            sa.select(AgentRun.thread_id, AgentRun.status, AgentRun.request_id)
        ).all()
        requests = session.execute(sa.select(RunRequest.thread_id, RunRequest.status)).all()
        report = verify_tool_results(session, settings=settings)
    assert sorted(r.thread_id for r in runs) == ["sim-5-01"] * 3 + ["sim-5-02"] * 2
    assert {r.status for r in runs} == {"completed"} and all(r.request_id for r in runs)
    assert {r.status for r in requests} == {"dispatched"} and len(requests) == 5
    assert report.results and report.all_ok


def test_simulate_is_deterministic_across_databases(tmp_path) -> None:
    from yuxi_dash.settings import Settings
    from yuxi_dash.simulate import simulate
    from yuxi_dash.store.db import session_scope
    from yuxi_dash.store.queries import chat_record

    contents = []
    for name in ("a", "b"):
        settings = Settings(
            database_url=f"sqlite:///{tmp_path / name / 'db.sqlite'}",
            workdir=tmp_path / name / "workdir",
        )
        simulate(settings, threads=1, turns=3, seed=99)
        with session_scope(settings) as session:
            contents.append([(m.role, m.content) for m in chat_record(session, "sim-99-01")])
    assert contents[0] == contents[1] and len(contents[0]) > 6


def test_simulate_refuses_an_unknown_agent_and_bad_counts() -> None:
    from yuxi_dash.errors import AgentNotFound, InvalidInput
    from yuxi_dash.simulate import simulate

    with pytest.raises(AgentNotFound):
        simulate(threads=1, turns=1, agent_slug="no-such-agent")
    with pytest.raises(InvalidInput):
        simulate(threads=0, turns=1)


def test_simulate_on_postgresql(postgres_url: str, tmp_path) -> None:
    from yuxi_dash.settings import Settings
    from yuxi_dash.simulate import simulate
    from yuxi_dash.store.db import session_scope
    from yuxi_dash.store.queries import usage_timeline

    settings = Settings(database_url=postgres_url, workdir=tmp_path / "workdir")
    report = simulate(settings, threads=1, turns=4, seed=8, thread_prefix="pg-sim")
    (thread,) = report.threads
    with session_scope(settings) as session:
        points = usage_timeline(session, thread.thread_id)
    assert thread.thread_id == "pg-sim-8-01"
    assert len(points) == thread.model_calls + thread.auto_compactions >= 8
    assert points[-1].summary_pressure_ratio == thread.summary_pressure_ratio
