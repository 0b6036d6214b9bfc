"""Tests for yuxi_dash.sim.run: `simulate` plays a real agent graph through the intake and store."""

from __future__ import annotations

import pytest

TINY_AGENT = "tiny-agent"


def _tiny_agent(settings, *, capable: bool = True) -> None:
    from yuxi_dash.service import upsert_agent
    from yuxi_dash.store.db import session_scope

    with session_scope(settings) as session:
        upsert_agent(
            session,
            TINY_AGENT,
            name="Tiny",
            capabilities=["context_compression"] if capable else [],
            context_window=32_000,
            summary_threshold=8,  # 8,192 tokens: a summary within a few turns
        )


def test_simulate_draws_a_sawtooth_with_one_snapshot_per_model_call() -> None:
    import sqlalchemy as sa

    from yuxi_dash.settings import get_settings
    from yuxi_dash.sim.run import simulate
    from yuxi_dash.store.db import session_scope
    from yuxi_dash.store.models import ChatMessage
    from yuxi_dash.store.queries import get_thread, usage_timeline
    from yuxi_dash.store.thread_store import state_store

    settings = get_settings()
    _tiny_agent(settings)
    report = simulate(settings, threads=1, turns=6, seed=11, agent_slug=TINY_AGENT)
    (thread,) = report.threads
    assert thread.turns == 6 and thread.auto_compactions >= 1
    assert thread.summaries == thread.auto_compactions  # each summary made at a model call
    assert thread.offloaded_results >= 1
    with session_scope(settings) as session:
        points = usage_timeline(session, thread.thread_id)
        detail = get_thread(session, thread.thread_id)
        chat = session.execute(
            sa.select(ChatMessage.role, ChatMessage.message_id).where(
                ChatMessage.thread_id == thread.thread_id
            )
        ).all()
    sources = [point.source for point in points]
    assert len(points) == thread.model_calls  # one snapshot per model call, nothing else
    assert sources.count("auto_compaction") == thread.auto_compactions
    assert set(sources) == {"model_call", "auto_compaction"}
    trigger = 8 * 1024
    first_summary = sources.index("auto_compaction")
    for index, (before, after) in enumerate(zip(points, points[1:], strict=False), start=1):
        # a summary is active from the first automatic compaction on
        assert after.summary_active == (index >= first_summary)
        if after.source == "auto_compaction":
            # the middleware summarized before this call: what it sent dropped
            assert after.llm_input_tokens < before.next_llm_input_tokens
            assert after.summary_pressure_ratio < before.summary_pressure_ratio
    # never sent over the threshold: the middleware compacts first
    assert all(point.llm_input_tokens < trigger for point in points)
    assert max(point.summary_pressure_ratio for point in points) >= 0.9
    # the current usage is the last snapshot; the projection saw the newest checkpoint
    assert detail.summary.summary_pressure_ratio == points[-1].summary_pressure_ratio
    assert detail.summary.next_llm_input_tokens == points[-1].next_llm_input_tokens
    assert detail.checkpoint_id == thread.checkpoint_id
    assert detail.checkpoint_id == state_store(settings).latest(thread.thread_id).checkpoint_id
    # each user message went through intake and was linked to its message in the state
    assert [message_id is not None for role, message_id in chat if role == "user"] == [True] * 6
    assert all(message_id for _, message_id in chat)
    assert detail.summary.busy_reason is None


def test_a_simulated_threads_auto_compactions_are_the_middlewares_own() -> None:
    """The summary and offloads were written by the agent run (not by us), files byte-exact."""
    from langchain_core.messages import ToolMessage

    from yuxi_dash.compression import parse_saved_result
    from yuxi_dash.compression.state_format import SUMMARIZATION_EVENT_KEY
    from yuxi_dash.files.workdir import Workdir, encode_text
    from yuxi_dash.settings import get_settings
    from yuxi_dash.sim.run import simulate
    from yuxi_dash.store.db import session_scope
    from yuxi_dash.store.queries import usage_timeline
    from yuxi_dash.store.thread_store import state_store

    settings = get_settings()
    _tiny_agent(settings)
    (thread,) = simulate(settings, threads=1, turns=6, seed=11, agent_slug=TINY_AGENT).threads
    store = state_store(settings)
    history = list(store.history(thread.thread_id))[::-1]  # oldest first
    event = history[-1].values.get(SUMMARIZATION_EVENT_KEY)
    assert event is not None and event["summary_message"].content and event["cutoff_index"] > 0
    # every checkpoint was written by the agent's own run: its model and tool nodes
    # (LangGraph's "loop"), or its input; none by an update_state of ours
    assert {checkpoint.source for checkpoint in history} <= {"input", "loop"}
    summarized_at = [
        checkpoint
        for previous, checkpoint in zip(history, history[1:], strict=False)
        if checkpoint.values.get(SUMMARIZATION_EVENT_KEY)
        != previous.values.get(SUMMARIZATION_EVENT_KEY)
    ]
    assert len(summarized_at) == thread.summaries >= 1
    with session_scope(settings) as session:
        points = usage_timeline(session, thread.thread_id)
    auto = [point for point in points if point.source == "auto_compaction"]
    assert [point.measured_at.isoformat() for point in auto] == [
        checkpoint.values["token_usage"]["measured_at"] for checkpoint in summarized_at
    ]
    # each offloaded result: the file holds exactly what the tool returned first
    originals: dict[str, str] = {}
    saved: dict[str, str] = {}
    for checkpoint in history:
        for message in checkpoint.values["messages"]:
            if not isinstance(message, ToolMessage):
                continue
            header = parse_saved_result(message.content)
            if header is None:
                originals.setdefault(str(message.id), str(message.content))
            else:
                saved.setdefault(str(message.id), header.path)
    assert saved
    workdir = Workdir(settings.workdir)
    for message_id, path in saved.items():
        assert workdir.resolve(path).read_bytes() == encode_text(originals[message_id])


def test_an_agent_without_compression_runs_past_its_threshold() -> None:
    """Only the token-usage middleware: no offload, no summary, pressure over 100%."""
    from yuxi_dash.compression.state_format import SUMMARIZATION_EVENT_KEY
    from yuxi_dash.settings import get_settings
    from yuxi_dash.sim.run import simulate
    from yuxi_dash.store.thread_store import state_store

    settings = get_settings()
    _tiny_agent(settings, capable=False)
    (thread,) = simulate(settings, threads=1, turns=6, seed=11, agent_slug=TINY_AGENT).threads
    assert thread.peak_pressure_ratio > 1.0 and thread.summary_pressure_ratio > 1.0
    assert (thread.auto_compactions, thread.summaries, thread.offloaded_results) == (0, 0, 0)
    latest = state_store(settings).latest(thread.thread_id)
    assert latest is not None and latest.values.get(SUMMARIZATION_EVENT_KEY) is None


def test_simulate_goes_through_intake_and_run_lifecycle_and_indexes_files() -> None:
    import sqlalchemy as sa

    from yuxi_dash.settings import get_settings
    from yuxi_dash.sim.run import simulate
    from yuxi_dash.store.db import session_scope
    from yuxi_dash.store.models import AgentRun, RunRequest
    from yuxi_dash.tool_results.index import verify_tool_results

    settings = get_settings()
    _tiny_agent(settings)
    simulate(settings, threads=2, turns=2, seed=5, agent_slug=TINY_AGENT)
    again = simulate(settings, threads=1, turns=1, seed=5)  # continues sim-5-01
    assert again.threads[0].thread_id == "sim-5-01" and again.threads[0].agent == TINY_AGENT
    assert again.threads[0].turns == 1 and again.threads[0].model_calls >= 2
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
    from yuxi_dash.sim.run import simulate
    from yuxi_dash.store.db import session_scope
    from yuxi_dash.store.queries import chat_record, usage_timeline

    contents = []
    for name in ("a", "b"):
        settings = Settings(
            database_url=f"sqlite:///{tmp_path / name / 'db.sqlite'}",
            workdir=tmp_path / name / "workdir",
        )
        simulate(settings, threads=1, turns=3, seed=99)
        with session_scope(settings) as session:
            chat = [(m.role, m.content) for m in chat_record(session, "sim-99-01")]
            usage = [
                (p.source, p.llm_input_tokens, p.next_llm_input_tokens)
                for p in usage_timeline(session, "sim-99-01")
            ]
        contents.append((chat, usage))
    assert contents[0] == contents[1] and len(contents[0][0]) > 6


def test_simulate_refuses_an_unknown_agent_and_bad_counts() -> None:
    from yuxi_dash.errors import AgentNotFound, InvalidInput
    from yuxi_dash.sim.run import simulate

    with pytest.raises(AgentNotFound):
        simulate(threads=1, turns=1, agent_slug="no-such-agent")
    with pytest.raises(InvalidInput):
        simulate(threads=0, turns=1)


def test_simulate_on_postgresql(postgres_url: str, tmp_path) -> None:
    from yuxi_dash.settings import Settings
    from yuxi_dash.sim.run import simulate
    from yuxi_dash.store.db import session_scope
    from yuxi_dash.store.queries import usage_timeline
    from yuxi_dash.store.thread_store import state_store

    settings = Settings(database_url=postgres_url, workdir=tmp_path / "workdir")
    report = simulate(settings, threads=1, turns=4, seed=8, thread_prefix="pg-sim")
    (thread,) = report.threads
    with session_scope(settings) as session:
        points = usage_timeline(session, thread.thread_id)
    assert thread.thread_id == "pg-sim-8-01"
    assert len(points) == thread.model_calls >= 8
    assert points[-1].summary_pressure_ratio == thread.summary_pressure_ratio
    latest = state_store(settings).latest(thread.thread_id)
    assert latest is not None and latest.checkpoint_id == thread.checkpoint_id
    assert latest.values["token_usage"]["measured_at"] == points[-1].measured_at.isoformat()
