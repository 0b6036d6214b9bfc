"""Tests for yuxi_dash.demo.threads: the seeded threads, idempotence, reset, and the story in them."""

from __future__ import annotations

import hashlib
import json
import shutil
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.fixtures.app import SEED_RECORD, copy_demo
from yuxi_dash.compression.state_format import SUMMARIZATION_EVENT_KEY
from yuxi_dash.demo.plan import DEMO_PREFIX
from yuxi_dash.demo.seed import seed_demo
from yuxi_dash.demo.threads import DemoReport
from yuxi_dash.files.workdir import Workdir
from yuxi_dash.settings import Settings
from yuxi_dash.sim.story import DEMO_USERS
from yuxi_dash.store.db import get_engine, session_scope
from yuxi_dash.store.models import (
    AgentRun,
    AuditEntry,
    ChatMessage,
    Conversation,
    RunRequest,
    ToolResult,
    UsageSnapshotRow,
)
from yuxi_dash.store.queries import busy_reasons, list_agents
from yuxi_dash.store.thread_store import state_store
from yuxi_dash.tool_results.index import verify_tool_results


def _settings(root: Path) -> Settings:
    return Settings(
        database_url=f"sqlite:///{root / 'yuxi_dash.db'}",
        workdir=root / "workdir",
        falkordb_data_dir=root / "falkordb",
    )


@pytest.fixture(scope="module")
def seeded(
    demo_seed: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Settings, DemoReport]:
    """A copy of the run's demo seed (threads only), shared by this module's tests."""
    root = copy_demo(demo_seed, tmp_path_factory.mktemp("demo"))
    record = json.loads((root / SEED_RECORD).read_text())
    return _settings(root), DemoReport(**record["report"])


@pytest.fixture(scope="module")
def anchor(demo_seed: Path) -> datetime:
    """The seed's "now": every story time is before it."""
    return datetime.fromisoformat(
        json.loads((demo_seed / SEED_RECORD).read_text())["report"]["anchor"]
    )


def _copy(settings: Settings, target: Path) -> Settings:
    get_engine(settings).dispose()  # fold the WAL into the file before copying
    root = Path(settings.workdir).parent
    shutil.copytree(root, target)
    return _settings(target)


def _checkpoint_digest(settings: Settings, thread_ids: list[str], *, content_only: bool) -> str:
    """A digest of each thread's newest checkpoint; `content_only`: its messages and summary."""
    store = state_store(settings)
    parts = []
    for thread_id in thread_ids:
        if content_only and thread_id.startswith(f"{DEMO_PREFIX}live"):
            continue  # live threads carry wall-clock data
        latest = store.latest(thread_id)
        if latest is None:
            parts.append(f"{thread_id}: none")
            continue
        if not content_only:
            parts.append(f"{thread_id}: {latest.checkpoint_id}")
            continue
        state = latest.context()
        messages = [
            (
                m.type,
                str(m.content),
                getattr(m, "tool_call_id", None),
                str(getattr(m, "tool_calls", "")),
            )
            for m in state.messages
        ]
        summary = (
            (state.summary.cutoff_index, str(state.summary.summary_message.content))
            if state.summary
            else None
        )
        parts.append(json.dumps([thread_id, messages, summary]))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _fingerprint(settings: Settings, *, content_only: bool = False) -> dict[str, str]:
    """A digest per table (and of the workdir files); `content_only` leaves out times and ids."""
    volatile = {"id", "created_at", "updated_at", "at", "measured_at", "started_at"}
    volatile |= {"finished_at", "dispatched_at", "deleted_at", "last_activity_at"}
    volatile |= {"usage_measured_at", "last_compression_at", "request_id"}
    volatile |= {"checkpoint_id", "message_id"}  # LangGraph's ids: time-based or random
    digests: dict[str, str] = {}
    with session_scope(settings) as session:
        thread_ids = sorted(
            session.scalars(
                sa.select(Conversation.thread_id).where(
                    Conversation.thread_id.like(f"{DEMO_PREFIX}%")
                )
            )
        )
        for model in (
            Conversation,
            UsageSnapshotRow,
            ChatMessage,
            ToolResult,
            AgentRun,
            RunRequest,
            AuditEntry,
        ):
            table = model.__table__
            columns = [c for c in table.columns if not (content_only and c.name in volatile)]
            query = sa.select(*columns)
            if "thread_id" in table.columns:
                query = query.where(table.c.thread_id.like(f"{DEMO_PREFIX}%"))
                if content_only:  # live threads and operator compressions carry wall-clock data
                    query = query.where(table.c.thread_id.not_like(f"{DEMO_PREFIX}live%"))
            if content_only and model is AuditEntry:
                continue
            rows = sorted(json.dumps(list(row), default=str) for row in session.execute(query))
            digests[table.name] = hashlib.sha256("\n".join(rows).encode()).hexdigest()
    digests["checkpoints"] = _checkpoint_digest(settings, thread_ids, content_only=content_only)
    # history files stamp the wall-clock time of each summary: content-only leaves them out
    pattern = "*.txt" if content_only else "*"
    files = sorted(path for path in Path(settings.workdir).rglob(pattern) if path.is_file())
    digests["files"] = hashlib.sha256(
        b"".join(path.name.encode() + path.read_bytes() for path in files)
    ).hexdigest()
    return digests


def test_demo_has_about_200_threads_over_30_users_and_3_agents(
    seeded: tuple[Settings, DemoReport],
) -> None:
    settings, report = seeded
    assert 190 <= report.threads <= 210
    assert report.users == len(DEMO_USERS) == 30
    assert report.tool_results > 100
    with session_scope(settings) as session:
        agents = {agent.slug: agent for agent in list_agents(session)}
        assert len(agents) == 3
        assert sum(1 for agent in agents.values() if not agent.capable) == 1
        users = set(session.scalars(sa.select(Conversation.user_id).distinct()))
        assert users == set(DEMO_USERS)
        per_agent = dict(
            session.execute(
                sa.select(Conversation.agent_slug, sa.func.count()).group_by(
                    Conversation.agent_slug
                )
            ).all()
        )
        assert set(per_agent) == set(agents) and min(per_agent.values()) >= 30


def test_demo_pressure_spread_and_enough_threads_to_compress(
    seeded: tuple[Settings, DemoReport],
) -> None:
    settings, _ = seeded
    with session_scope(settings) as session:
        rows = session.execute(
            sa.select(
                Conversation.thread_id,
                Conversation.summary_pressure_ratio,
                Conversation.agent_slug,
                Conversation.status,
            ).where(Conversation.status != "deleted")
        ).all()
        pressures = [row.summary_pressure_ratio for row in rows]
        assert min(pressures) < 0.2
        assert max(pressures) > 1.0
        hot = [row for row in rows if row.summary_pressure_ratio >= 0.85]
        assert len(hot) >= 20
        reasons = busy_reasons(session, [row.thread_id for row in hot])
        agents = {agent.slug: agent for agent in list_agents(session)}
        idle_capable = [
            row
            for row in hot
            if row.thread_id not in reasons
            and agents[row.agent_slug].capable
            and row.status == "active"
        ]
        assert len(idle_capable) >= 5  # the dashboard has something to compress
        # every decile of pressure below 1.0 is populated: a spread, not two clusters
        deciles = {min(9, int(p * 10)) for p in pressures if p < 1.0}
        assert deciles == set(range(10))


def test_demo_has_busy_deleted_and_archived_threads(seeded: tuple[Settings, DemoReport]) -> None:
    settings, _ = seeded
    with session_scope(settings) as session:
        statuses = dict(
            session.execute(
                sa.select(Conversation.status, sa.func.count()).group_by(Conversation.status)
            ).all()
        )
        assert statuses.get("deleted", 0) >= 3 and statuses.get("archived", 0) >= 3
        ids = list(session.scalars(sa.select(Conversation.thread_id)))
        reasons = list(busy_reasons(session, ids).values())
        for reason in ("running", "queued", "interrupted"):
            assert reasons.count(reason) >= 3, reason


def test_demo_records_chats_snapshots_compressions_and_files(
    seeded: tuple[Settings, DemoReport],
) -> None:
    settings, _ = seeded
    with session_scope(settings) as session:
        sources = dict(
            session.execute(
                sa.select(UsageSnapshotRow.source, sa.func.count()).group_by(
                    UsageSnapshotRow.source
                )
            ).all()
        )
        assert sources["model_call"] > 1000
        assert sources["auto_compaction"] >= 20
        assert sources.get("manual_compression", 0) >= 3
        audits = session.scalars(
            sa.select(AuditEntry.outcome).where(AuditEntry.action == "compress")
        ).all()
        assert audits.count("completed") >= 3
        summarized = session.scalar(
            sa.select(sa.func.count()).select_from(Conversation).where(Conversation.summary_active)
        )
        assert summarized >= 5
        # the chat record holds every turn's user message, even where the state is summarized
        thread_id = session.scalar(
            sa.select(Conversation.thread_id).where(Conversation.summary_active).limit(1)
        )
        roles = session.scalars(
            sa.select(ChatMessage.role).where(ChatMessage.thread_id == thread_id)
        ).all()
        assert roles.count("user") >= 3 and "assistant" in roles and "tool" in roles
        report = verify_tool_results(session, settings=settings)
    assert report.results and report.all_ok
    history = list((Path(settings.workdir) / "outputs" / "conversation_history").glob("*.md"))
    assert len(history) >= 5


def test_second_seed_changes_nothing(seeded: tuple[Settings, DemoReport], anchor: datetime) -> None:
    settings, first = seeded
    before = _fingerprint(settings)
    again = seed_demo(settings, memory=False, now=anchor)
    assert _fingerprint(settings) == before
    assert (again.threads, again.users, again.tool_results) == (
        first.threads,
        first.users,
        first.tool_results,
    )


def test_reset_starts_clean_and_rebuilds_the_same_demo(
    seeded: tuple[Settings, DemoReport], anchor: datetime, tmp_path: Path
) -> None:
    from yuxi_dash.access.roles import cli_actor
    from yuxi_dash.service import import_thread
    from yuxi_dash.sources import compress_thread_context

    settings = _copy(seeded[0], tmp_path / "copy")
    original = _fingerprint(settings, content_only=True)
    # tamper: an operator compresses a hot thread, a file disappears, another is edited,
    # and a thread that is not demo data arrives (it must survive the reset)
    with session_scope(settings) as session:
        hot = session.scalar(
            sa.select(Conversation.thread_id)
            .where(
                Conversation.agent_slug == "ops-copilot",
                Conversation.summary_pressure_ratio >= 0.85,
                Conversation.status == "active",
            )
            .order_by(Conversation.thread_id)
        )
        paths = session.scalars(sa.select(ToolResult.path).order_by(ToolResult.id).limit(2)).all()
    compress_thread_context(hot, actor=cli_actor("tester"), settings=settings)
    workdir = Workdir(settings.workdir)
    workdir.resolve(paths[0]).unlink()
    workdir.resolve(paths[1]).write_text("edited", encoding="utf-8")
    sample = json.loads((Path(__file__).parents[1] / "data" / "thread.json").read_text())
    import_thread(sample, actor=cli_actor("tester"), settings=settings)
    assert _fingerprint(settings, content_only=True) != original

    report = seed_demo(settings, reset=True, memory=False, now=anchor)

    assert any("reset" in note for note in report.notes)
    assert _fingerprint(settings, content_only=True) == original
    with session_scope(settings) as session:
        assert session.scalar(
            sa.select(Conversation.id).where(Conversation.thread_id == sample["thread_id"])
        )
        assert verify_tool_results(session, settings=settings).all_ok
        stale_audit = session.scalar(
            sa.select(sa.func.count())
            .select_from(AuditEntry)
            .where(AuditEntry.target == f"thread:{hot}", AuditEntry.actor == "tester")
        )
        assert stale_audit == 0


def test_every_demo_user_says_their_statements_and_never_the_planted_claim(
    seeded: tuple[Settings, DemoReport],
) -> None:
    """The demo's one story (yuxi_dash.sim.story) is in each user's own chat messages."""
    from yuxi_dash.demo.plan import assistant_claim, planted_facts
    from yuxi_dash.memory.views.chat_compare import compare_facts, user_words
    from yuxi_dash.sim.story import user_statements
    from yuxi_dash.store.queries import user_chat_messages

    settings, _ = seeded
    with session_scope(settings) as session:
        for user_id in DEMO_USERS:
            name = " ".join(part.capitalize() for part in user_id.split("_"))
            everything = user_chat_messages(session, user_id, limit=100_000)
            own = [m.content for m in everything if m.role == "user"]
            # the page reads the latest 500 messages: every statement is among them
            latest = user_chat_messages(session, user_id, limit=500)
            latest_own = " ".join(m.content for m in latest if m.role == "user").lower()
            statements = user_statements(user_id)
            assert len(statements) >= 4
            for statement in statements:
                assert statement.said.lower() in latest_own, (user_id, statement.said)
            suspect, derived = planted_facts(user_id)
            facts = [
                {"fact": s.fact_for(name), "source_kind": "user_asserted"} for s in statements
            ] + [
                {"fact": suspect.fact_for(name), "source_kind": suspect.source_kind},
                {"fact": derived.fact_for(name), "source_kind": derived.source_kind},
            ]
            compared = compare_facts(facts, latest, user_name=name)
            assert [f["fact"] for f in compared if f["suspect"]] == [suspect.fact_for(name)]
            assert compared[0]["fact"] == suspect.fact_for(name)
            assert sum(f["supported_by_chat"] for f in compared) >= len(statements)
            # the planted claim: none of its key terms in anything the user ever wrote
            assert not set(compared[0]["key_terms"]) & user_words(everything), user_id
            assert not any(term in " ".join(own).lower() for term in compared[0]["key_terms"])
            # the assistant_derived one restates what the assistant told this user
            _, claim = assistant_claim(user_id)
            assert any(claim in m.content for m in everything if m.role == "assistant"), user_id
            assert derived.source_kind == "assistant_derived"


def _live(column: Any) -> Any:
    return column.like(f"{DEMO_PREFIX}live%")


def test_demo_threads_were_played_by_the_agent_and_their_compactions_are_its_own(
    seeded: tuple[Settings, DemoReport],
) -> None:
    """Each automatic compaction in a timeline is a summary the agent's middleware wrote."""
    settings, _ = seeded
    with session_scope(settings) as session:
        auto = session.execute(
            sa.select(UsageSnapshotRow.thread_id, UsageSnapshotRow.measured_at).where(
                UsageSnapshotRow.source == "auto_compaction",
                sa.not_(_live(UsageSnapshotRow.thread_id)),
            )
        ).all()
    by_thread: dict[str, list[str]] = {}
    for thread_id, measured_at in auto:
        by_thread.setdefault(thread_id, []).append(measured_at.isoformat())
    assert len(by_thread) >= 10
    store = state_store(settings)
    for thread_id in sorted(by_thread)[:6]:
        history = list(store.history(thread_id))[::-1]  # oldest first
        summarized = [
            checkpoint
            for previous, checkpoint in zip(history, history[1:], strict=False)
            if checkpoint.values.get(SUMMARIZATION_EVENT_KEY)
            != previous.values.get(SUMMARIZATION_EVENT_KEY)
            and checkpoint.source == "loop"  # written by the agent's run, not an update of ours
        ]
        assert sorted(c.values["token_usage"]["measured_at"] for c in summarized) == sorted(
            by_thread[thread_id]
        ), thread_id
        assert {c.source for c in history} <= {"input", "loop", "update"}


def test_demo_busy_threads_are_paused_mid_turn_with_their_tool_calls_pending(
    seeded: tuple[Settings, DemoReport],
) -> None:
    from langchain_core.messages import AIMessage

    settings, _ = seeded
    with session_scope(settings) as session:
        ids = list(session.scalars(sa.select(Conversation.thread_id)))
        reasons = busy_reasons(session, ids)
    store = state_store(settings)
    paused = [tid for tid, reason in reasons.items() if reason in ("running", "interrupted")]
    assert len(paused) >= 6
    for thread_id in paused:
        latest = store.latest(thread_id)
        assert latest is not None
        last = latest.values["messages"][-1]
        assert isinstance(last, AIMessage) and last.tool_calls, thread_id


def test_demo_times_follow_the_story(seeded: tuple[Settings, DemoReport], anchor: datetime) -> None:
    """Days of conversations: every time before the anchor, chat in time order, and the
    newest checkpoint states the time its usage snapshot has (the middleware's clock)."""
    settings, _ = seeded
    with session_scope(settings) as session:
        convs = session.execute(
            sa.select(
                Conversation.thread_id,
                Conversation.created_at,
                Conversation.last_activity_at,
                Conversation.usage_measured_at,
            ).where(sa.not_(_live(Conversation.thread_id)))
        ).all()
        reasons = busy_reasons(session, [c.thread_id for c in convs])
        manual = set(
            session.scalars(
                sa.select(UsageSnapshotRow.thread_id).where(
                    UsageSnapshotRow.source == "manual_compression"
                )
            )
        )
        chat = session.execute(
            sa.select(ChatMessage.thread_id, ChatMessage.sequence, ChatMessage.created_at)
            .where(sa.not_(_live(ChatMessage.thread_id)))
            .order_by(ChatMessage.thread_id, ChatMessage.sequence)
        ).all()
    # an operator's compression happens now (wall clock), after the story's anchor
    story = [c for c in convs if c.thread_id not in manual]
    assert all(c.created_at <= c.last_activity_at <= anchor for c in story)
    assert min(c.created_at for c in convs) < anchor - timedelta(days=5)
    running = [c for c in convs if reasons.get(c.thread_id) == "running"]
    assert running and all(anchor - c.last_activity_at < timedelta(minutes=15) for c in running)
    for (thread, _, at), (next_thread, _, next_at) in zip(chat, chat[1:], strict=False):
        assert thread != next_thread or at <= next_at, thread
    store = state_store(settings)
    for conv in story[:40]:
        latest = store.latest(conv.thread_id)
        assert latest is not None
        stated = latest.values["token_usage"]["measured_at"]
        assert stated == conv.usage_measured_at.isoformat(), conv.thread_id
