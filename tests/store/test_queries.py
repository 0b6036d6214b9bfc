"""Read side of the store (yuxi_dash.store.queries) on SQLite and real PostgreSQL."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from langchain_core.messages import HumanMessage

from yuxi_dash import service
from yuxi_dash.compression import ThreadContextState
from yuxi_dash.compression.state_format import TOKEN_USAGE_KEY
from yuxi_dash.errors import ThreadNotFound
from yuxi_dash.service.usage_writes import append_chat, apply_usage
from yuxi_dash.settings import get_settings
from yuxi_dash.store import queries
from yuxi_dash.store.db import get_engine, is_sqlite, session_scope
from yuxi_dash.store.models import AgentRun, RunRequest
from yuxi_dash.store.thread_store import load_state, replace_messages, write_state
from yuxi_dash.usage import UsageSnapshot

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _usage(next_tokens: int, *, trigger: int = 10_000, window: int = 20_000) -> UsageSnapshot:
    return UsageSnapshot(
        llm_input_tokens=next_tokens,
        next_llm_input_tokens=next_tokens,
        context_window=window,
        summary_trigger_tokens=trigger,
        summary_active=False,
    )


def _model_call(
    thread_id: str,
    *,
    state: ThreadContextState,
    expected_checkpoint_id: str,
    usage: UsageSnapshot,
    measured_at: datetime,
    chat_messages: list[tuple[str, str]],
) -> str:
    """One model call's writes under the row lock: the checkpoint (all messages replaced),
    its usage snapshot and current usage, the chat lines; returns the checkpoint id."""
    with service.thread_lock(thread_id) as (session, conv):
        assert conv is not None
        written = write_state(
            thread_id,
            {"messages": replace_messages(state.messages), TOKEN_USAGE_KEY: usage.to_dict()},
            expected_checkpoint_id=expected_checkpoint_id,
        )
        apply_usage(session, conv, usage, source="model_call", measured_at=measured_at)
        append_chat(session, thread_id, chat_messages, at=measured_at)
        conv.checkpoint_id = written.checkpoint_id
        return written.checkpoint_id


def _seed() -> dict[str, str]:
    """Five threads: pressures 0.5, 0.85, 0.849, 1.2 (deleted) and 0.9 on an incapable agent.

    Returns each thread's newest checkpoint id (the third: an empty one, then two model calls).
    """
    checkpoints: dict[str, str] = {}
    with session_scope() as session:
        service.upsert_agent(session, "capable", capabilities=["context_compression"])
        service.upsert_agent(session, "plain", capabilities=[])
        specs = [
            ("t-low", "u1", "capable", "active"),
            ("t-85", "u1", "capable", "active"),
            ("t-849", "u2", "capable", "active"),
            ("t-del", "u2", "capable", "active"),
            ("t-plain", "u3", "plain", "archived"),
        ]
        for thread_id, user, agent, status in specs:
            service.create_thread(
                session, thread_id, user_id=user, agent_slug=agent, status=status, created_at=T0
            )
            written = write_state(thread_id, {"messages": []}, expected_checkpoint_id=None)
            checkpoints[thread_id] = written.checkpoint_id
    pressures = {"t-low": 5000, "t-85": 8500, "t-849": 8490, "t-del": 12000, "t-plain": 9000}
    for thread_id, tokens in pressures.items():
        for step, fraction in enumerate((0.3, 1.0)):
            checkpoints[thread_id] = _model_call(
                thread_id,
                state=ThreadContextState(thread_id, [HumanMessage(f"m{step}")]),
                expected_checkpoint_id=checkpoints[thread_id],
                usage=_usage(int(tokens * fraction)),
                measured_at=T0 + timedelta(minutes=step),
                chat_messages=[("user", f"{thread_id} question {step}"), ("assistant", "answer")],
            )
    service.set_thread_status("t-del", "deleted")
    return checkpoints


def test_list_threads_highest_pressure_first_from_current_usage(db_url: str) -> None:
    checkpoints = _seed()
    with session_scope() as session:
        rows = queries.list_threads(session)
        assert [r.thread_id for r in rows] == ["t-plain", "t-85", "t-849", "t-low"]
        assert [r.summary_pressure_ratio for r in rows] == [0.9, 0.85, 0.849, 0.5]
        assert [r.thread_id for r in queries.list_threads(session, min_pressure=0.85)] == [
            "t-plain",
            "t-85",
        ]
        assert queries.count_threads(session, min_pressure=0.85) == 2
        assert queries.count_threads(session) == 4
        assert queries.count_threads(session, include_deleted=True) == 5
        assert [r.thread_id for r in queries.list_threads(session, status="deleted")] == ["t-del"]
        assert [r.thread_id for r in queries.list_threads(session, agent="plain")] == ["t-plain"]
        assert {r.thread_id for r in queries.list_threads(session, user_id="u1")} == {
            "t-low",
            "t-85",
        }
        page = queries.list_threads(session, limit=2, offset=1)
        assert [r.thread_id for r in page] == ["t-85", "t-849"]
        top = rows[1]
        newest = load_state("t-85")
        assert newest is not None and newest.checkpoint_id == checkpoints["t-85"]
        assert (top.capable, top.checkpoint_id, top.context_usage_ratio) == (
            True,
            newest.checkpoint_id,
            0.425,
        )
        assert (top.next_llm_input_tokens, top.summary_trigger_tokens) == (8500, 10_000)
        assert rows[0].capable is False
        # the Compression label: attached whatever the agent supports, else the capability
        assert [r.compression for r in rows] == ["unsupported", *["supported"] * 3]
        assert replace(top, attached=True).compression == "attached: platform"
        assert replace(rows[0], attached=True, platform="db:5432/a").compression == (
            "attached: db:5432/a"
        )
        assert "compression" not in top.to_dict()  # derived: the JSON form is the fields
        future = T0 + timedelta(days=1)
        assert queries.list_threads(session, active_since=future) == []
        # the picker's ids: same order and population as the list, nothing else
        assert queries.list_thread_ids(session) == [r.thread_id for r in rows]
        assert queries.list_thread_ids(session, limit=2) == ["t-plain", "t-85"]


def test_busy_reasons_in_the_list(db_url: str) -> None:
    _seed()
    with session_scope() as session:
        session.add(AgentRun(thread_id="t-low", run_type="chat", status="running"))
        session.add(RunRequest(thread_id="t-85", run_type="chat", status="queued", payload={}))
        session.add(AgentRun(thread_id="t-849", run_type="resume", status="interrupted"))
    with session_scope() as session:
        reasons = {r.thread_id: r.busy_reason for r in queries.list_threads(session)}
    assert reasons == {
        "t-plain": None,
        "t-85": "queued",
        "t-849": "interrupted",
        "t-low": "running",
    }


def test_get_thread_timeline_and_chat(db_url: str) -> None:
    checkpoints = _seed()
    newest = load_state("t-85")
    assert newest is not None and newest.checkpoint_id == checkpoints["t-85"]
    with session_scope() as session:
        detail = queries.get_thread(session, "t-85")
        assert detail.checkpoint_id == newest.checkpoint_id
        assert detail.summary.checkpoint_id == newest.checkpoint_id  # projection is current
        assert detail.agent is not None and detail.agent.capable
        assert detail.agent.summary_trigger_tokens == 100 * 1024
        assert [m.content for m in detail.state.messages] == ["m1"]
        assert detail.token_usage["next_llm_input_tokens"] == 8500
        with pytest.raises(ThreadNotFound):
            queries.get_thread(session, "t-85", user_id="u2")
        with pytest.raises(ThreadNotFound):
            queries.get_thread(session, "nope")
        timeline = queries.usage_timeline(session, "t-85")
        assert [p.next_llm_input_tokens for p in timeline] == [2550, 8500]
        assert [p.source for p in timeline] == ["model_call", "model_call"]
        assert [
            p.next_llm_input_tokens for p in queries.usage_timeline(session, "t-85", limit=1)
        ] == [8500]
        chat = queries.chat_record(session, "t-85")
        assert [(m.sequence, m.role) for m in chat] == [
            (1, "user"),
            (2, "assistant"),
            (3, "user"),
            (4, "assistant"),
        ]
        mine = queries.user_chat_messages(session, "u1", role="user")
        assert {m.content for m in mine} == {
            "t-low question 0",
            "t-low question 1",
            "t-85 question 0",
            "t-85 question 1",
        }
        assert len(queries.user_chat_messages(session, "u1", limit=3)) == 3


def test_agents_and_users(db_url: str) -> None:
    _seed()
    with session_scope() as session:
        agents = queries.list_agents(session)
        assert [(a.slug, a.capable) for a in agents] == [("capable", True), ("plain", False)]
        users = queries.list_users(session)
        assert [(u.user_id, u.threads) for u in users] == [("u1", 2), ("u2", 1), ("u3", 1)]
        assert [u.threads for u in queries.list_users(session, include_deleted=True)] == [2, 2, 1]


def test_thread_list_uses_the_pressure_index(db_url: str) -> None:
    """The 'at or above 85%' page is answered from ix_conversations_pressure, not a snapshot scan."""
    _seed()
    engine = get_engine()
    with engine.connect() as conn:
        if is_sqlite(get_settings().database_url):
            plan = conn.exec_driver_sql(
                "EXPLAIN QUERY PLAN SELECT thread_id FROM conversations "
                "WHERE summary_pressure_ratio >= 0.85 AND status != 'deleted' "
                "ORDER BY summary_pressure_ratio DESC, thread_id DESC LIMIT 50"
            ).all()
            text = " ".join(str(row[-1]) for row in plan)
        else:
            conn.exec_driver_sql("SET enable_seqscan = off")  # a 5-row table: force the choice
            plan = conn.execute(
                sa.text(
                    "EXPLAIN SELECT thread_id FROM conversations "
                    "WHERE summary_pressure_ratio >= :r AND status != 'deleted' "
                    "ORDER BY summary_pressure_ratio DESC, thread_id DESC LIMIT 50"
                ),
                {"r": 0.85},
            ).all()
            text = " ".join(row[0] for row in plan)
    assert "ix_conversations_pressure" in text
    assert "usage_snapshots" not in text
