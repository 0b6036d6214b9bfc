"""The demo's thread seeder: each planned thread played by a real agent, as a platform would.

Owns `seed_demo_threads` and its parts. Each `ThreadPlan` is played turn by turn by the
simulator's `create_agent` graph (`yuxi_dash.sim.loop.build_agent`), so every offload,
summary and auto-compaction in its timeline is the middleware's own. After each turn the new
checkpoints are projected (`project_thread`) until the thread's pressure is in its band
(`build_thread`). The story's times come from the thread's `StoryClock` and
`yuxi_dash.demo.rows`. A few `demo-live-*` threads go through the real intake and run
lifecycle (`yuxi_dash.sim.run`); a few idle threads are compressed by an operator through
the locked service core (`compress_some`).

A thread that already exists is never touched again; `reset_demo_threads` removes every demo
thread, its rows, checkpoints and files.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.compression import Summarizer, ThreadContextState, get_summarizer
from yuxi_dash.compression.engine import history_session_id
from yuxi_dash.compression.state_format import TOKEN_USAGE_KEY
from yuxi_dash.demo.clock import OffloadClock, story_clock
from yuxi_dash.demo.plan import (
    DEMO_MODEL_SEED,
    DEMO_OPERATOR,
    DEMO_PREFIX,
    LIVE_SEED,
    LIVE_THREADS,
    LIVE_TURNS,
    MANUAL_COMPRESSIONS,
    MAX_TURNS,
    OVERSHOOT_TURNS,
    ThreadPlan,
    demo_user_text,
    plan_threads,
)
from yuxi_dash.demo.rows import (
    BuiltThread,
    finish_conversation,
    record_intake,
    stamp_tool_results,
    stamp_turn,
    write_runs,
)
from yuxi_dash.errors import PathRefused, WorkdirUnavailable
from yuxi_dash.files.workdir import Workdir, history_relpath
from yuxi_dash.service import create_thread, thread_target, upsert_agent
from yuxi_dash.service.projection import project_thread
from yuxi_dash.settings import Settings
from yuxi_dash.sim.loop import SIM_AGENTS, Agent, build_agent, play_turn, sim_agent
from yuxi_dash.sim.run import simulate
from yuxi_dash.sim.topics import stable_rng, topic_for
from yuxi_dash.sources import compress_thread_context
from yuxi_dash.store.checkpointer import CheckpointStore
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import (
    Agent as AgentRow,
)
from yuxi_dash.store.models import (
    AgentRun,
    AuditEntry,
    ChatMessage,
    Conversation,
    RunRequest,
    ToolResult,
    UsageSnapshotRow,
)
from yuxi_dash.store.thread_store import delete_thread_state, load_state, state_store
from yuxi_dash.usage import SUGGESTION_RATIO

log = logging.getLogger(__name__)

Progress = Callable[[str], None]


def quiet(_stage: str) -> None:
    """The default progress sink: say nothing."""


@dataclass
class DemoReport:
    """What a demo run wrote, for the CLI and the `serve --demo` banner."""

    threads: int = 0
    users: int = 0
    tool_results: int = 0
    graphs: int = 0
    notes: list[str] = field(default_factory=list)
    anchor: str | None = None  # the story's "now" of the threads this run built (ISO 8601)

    def to_dict(self) -> dict[str, Any]:
        return {
            "threads": self.threads,
            "users": self.users,
            "tool_results": self.tool_results,
            "graphs": self.graphs,
            "notes": self.notes,
            "anchor": self.anchor,
        }


@dataclass(frozen=True)
class DemoRuntime:
    """What every demo thread's agent shares: the checkpointer, the workdir, the summarizer."""

    store: CheckpointStore
    workdir: Workdir
    summarizer: Summarizer


def build_thread(
    session: Session, plan: ThreadPlan, *, runtime: DemoRuntime, anchor: datetime
) -> BuiltThread:
    """Create `plan`'s thread and play it until its pressure is in its band, then its last turn.

    A running or interrupted thread ends paused in a turn, its last model
    call's tool calls pending; a queued thread has the user's next message queued.
    """
    profile = sim_agent(plan.agent_slug)
    assert profile is not None, plan.agent_slug  # plan_threads only picks SIM_AGENTS
    # checkpoints or a history file of a thread that is not in the database are left over
    # from a run that failed before its commit: start again so they hold this run only
    runtime.store.saver.delete_thread(plan.thread_id)
    empty = ThreadContextState(thread_id=plan.thread_id, messages=[])
    runtime.workdir.remove_file(history_relpath(history_session_id(empty)))
    built = BuiltThread(plan=plan, clock=story_clock(plan, anchor))
    offloads = OffloadClock(built.clock)
    agent = build_agent(
        profile,
        checkpointer=runtime.store.saver,
        seed=DEMO_MODEL_SEED,
        workdir=runtime.workdir,
        summarizer=runtime.summarizer,
        clock=built.clock,
        inner_middleware=[offloads],
    )
    conv = create_thread(
        session,
        plan.thread_id,
        user_id=plan.user_id,
        agent_slug=plan.agent_slug,
        title=f"{topic_for(plan.thread_id).title} #{plan.number}",
        status="active",
        created_at=built.clock.now,
    )
    low, high = plan.band
    for _turn in range(MAX_TURNS):
        usage = _play_turn(session, conv, agent, built, runtime.store)
        if usage.get("next_llm_input_tokens", 0) >= profile.context_window * 0.9:
            break  # without compression the window is the wall
        pressure = float(usage.get("summary_pressure_ratio", 0.0))
        played = len(built.turn_texts)
        if (
            played >= plan.min_turns
            and pressure >= low
            and (pressure < high or not profile.capable)
        ):
            break
        if played >= plan.min_turns + OVERSHOOT_TURNS:
            break  # past its band and not coming back soon: it ends where it is
    busy_rng = stable_rng("demo", plan.thread_id, "busy")
    if plan.busy in ("running", "interrupted"):
        # the turn still open at the anchor began a little before the thread's end
        built.clock.skip_to(built.clock.end - timedelta(seconds=busy_rng.randint(40, 600)))
        _play_turn(session, conv, agent, built, runtime.store, calls=1 + busy_rng.randrange(2))
    elif plan.busy == "queued":
        built.queued_text = demo_user_text(plan, len(built.turn_texts))
    stamp_tool_results(session, plan.thread_id, offloads.saved)
    write_runs(session, built)
    finish_conversation(conv, built)
    return built


def _play_turn(
    session: Session,
    conv: Conversation,
    agent: Agent,
    built: BuiltThread,
    store: CheckpointStore,
    *,
    calls: int | None = None,
) -> dict[str, Any]:
    """One turn: intake, the agent's run, the projection, the story's times; the last usage."""
    thread_id = conv.thread_id
    text = demo_user_text(built.plan, len(built.turn_texts))
    sequence = record_intake(session, thread_id, text, built.clock.turn())
    calls_before = len(built.clock.calls)
    play_turn(
        agent,
        thread_id,
        text,
        max_model_calls=calls,
        user_id=built.plan.user_id,
        agent_slug=built.plan.agent_slug,
    )
    latest = project_thread(session, conv, store)
    stamp_turn(
        session, thread_id, after_sequence=sequence, call_times=built.clock.calls[calls_before:]
    )
    built.turn_texts.append(text)
    built.turn_calls.append(len(built.clock.calls))
    values = latest.values if latest is not None else {}
    usage = values.get(TOKEN_USAGE_KEY) or {}
    built.pressure = float(usage.get("summary_pressure_ratio", 0.0))
    if latest is not None:
        context = latest.context()
        built.visible_messages = len(context.messages) - context.visible_start
    return dict(usage)


def demo_thread_ids(session: Session) -> set[str]:
    return set(
        session.scalars(
            sa.select(Conversation.thread_id).where(Conversation.thread_id.like(f"{DEMO_PREFIX}%"))
        )
    )


def reset_demo_threads(settings: Settings) -> int:
    """Delete every demo thread, its rows, audit entries and workdir files; return how many."""
    demo = f"{DEMO_PREFIX}%"
    with session_scope(settings) as session:
        thread_ids = sorted(demo_thread_ids(session))
        if not thread_ids:
            return 0
        files = _demo_files(session, settings, thread_ids)
        for model in (ToolResult, ChatMessage, UsageSnapshotRow, AgentRun, RunRequest):
            session.execute(sa.delete(model).where(model.thread_id.like(demo)))
        session.execute(sa.delete(AuditEntry).where(AuditEntry.target.like(thread_target(demo))))
        session.execute(sa.delete(Conversation).where(Conversation.thread_id.like(demo)))
        in_use = set(session.scalars(sa.select(Conversation.agent_slug).distinct()))
        unused = [agent.slug for agent in SIM_AGENTS if agent.slug not in in_use]
        if unused:
            session.execute(sa.delete(AgentRow).where(AgentRow.slug.in_(unused)))
    for thread_id in thread_ids:
        delete_thread_state(thread_id, settings)
    workdir = Workdir(settings.workdir)
    for relative in files:
        try:
            workdir.remove_file(relative)
        except (OSError, PathRefused, WorkdirUnavailable) as exc:
            log.warning("could not remove a demo file (%s)", type(exc).__name__)
    return len(thread_ids)


def _demo_files(session: Session, settings: Settings, thread_ids: list[str]) -> list[str]:
    """The workdir files only demo threads use: their tool results and history files."""
    demo = ToolResult.thread_id.like(f"{DEMO_PREFIX}%")
    demo_paths = set(session.scalars(sa.select(ToolResult.path).where(demo)))
    shared_paths = (
        set(
            session.scalars(
                sa.select(ToolResult.path).where(sa.not_(demo), ToolResult.path.in_(demo_paths))
            )
        )
        if demo_paths
        else set()
    )
    sessions = set()
    for thread_id in thread_ids:
        stored = load_state(thread_id, settings)
        if stored is not None:
            sessions.add(history_session_id(stored.state) if stored.state.summary else "")
    return sorted(demo_paths - shared_paths) + [
        history_relpath(session_id) for session_id in sessions if session_id
    ]


def compress_some(settings: Settings, created: list[BuiltThread]) -> list[str]:
    """An operator compresses a few idle, capable, mid-pressure threads (real locked service)."""
    operator = Actor(id=DEMO_OPERATOR, role=Role.OPERATOR, email=DEMO_OPERATOR, via="demo")
    candidates = [
        built
        for built in created
        if built.plan.status == "active"
        and built.plan.busy is None
        and built.plan.agent_slug != "report-writer"
        and 0.4 <= built.pressure < SUGGESTION_RATIO
        and built.visible_messages > 14
    ]
    compressed = []
    for built in candidates[:MANUAL_COMPRESSIONS]:
        result = compress_thread_context(built.plan.thread_id, actor=operator, settings=settings)
        if result.status == "completed":
            compressed.append(built.plan.thread_id)
    return compressed


def _seed_live_threads(settings: Settings, summarizer: Summarizer, progress: Progress) -> None:
    """The `demo-live-*` threads, through the real intake and run lifecycle (once)."""
    live_prefix = f"{DEMO_PREFIX}live"
    with session_scope(settings) as session:
        live_existing = session.scalar(
            sa.select(sa.func.count())
            .select_from(Conversation)
            .where(Conversation.thread_id.like(f"{live_prefix}-%"))
        )
    if live_existing:
        return
    progress(f"simulating {LIVE_THREADS} live threads")
    simulate(
        settings,
        threads=LIVE_THREADS,
        turns=LIVE_TURNS,
        seed=LIVE_SEED,
        thread_prefix=live_prefix,
        summarizer=summarizer,
    )


def _count_demo(settings: Settings, report: DemoReport) -> None:
    """Fill in the report's counts from the database (every demo thread, old and new)."""
    demo = Conversation.thread_id.like(f"{DEMO_PREFIX}%")
    with session_scope(settings) as session:
        report.threads = int(
            session.scalar(sa.select(sa.func.count()).select_from(Conversation).where(demo)) or 0
        )
        report.users = int(
            session.scalar(sa.select(sa.func.count(sa.distinct(Conversation.user_id))).where(demo))
            or 0
        )
        report.tool_results = int(
            session.scalar(
                sa.select(sa.func.count())
                .select_from(ToolResult)
                .where(ToolResult.thread_id.like(f"{DEMO_PREFIX}%"))
            )
            or 0
        )


def seed_demo_threads(
    settings: Settings,
    *,
    reset: bool = False,
    now: datetime | None = None,
    progress: Progress = quiet,
) -> DemoReport:
    """Seed the demo threads (idempotent: existing demo threads are left as they are).

    ``progress`` is told each stage as it starts (one short line), for a CLI to show.
    """
    report = DemoReport()
    if reset:
        removed = reset_demo_threads(settings)
        if removed:
            report.notes.append(f"reset: removed {removed} demo threads and their files")
    workdir = Workdir(settings.workdir)
    workdir.initialize()  # the demo is a first set-up: it may create the workdir
    workdir.ensure_writable()
    summarizer = get_summarizer(settings)
    runtime = DemoRuntime(store=state_store(settings), workdir=workdir, summarizer=summarizer)
    anchor = (now or datetime.now(UTC)).replace(microsecond=0)
    created: list[BuiltThread] = []
    with session_scope(settings) as session:
        for agent in SIM_AGENTS:
            upsert_agent(session, agent.slug, **agent.agent_fields())
        existing = demo_thread_ids(session)
    plans = [plan for plan in plan_threads() if plan.thread_id not in existing]
    if plans:
        progress(f"building {len(plans)} demo threads (each played by a real agent)")
    for plan in plans:
        with session_scope(settings) as session:  # one thread, one transaction
            created.append(build_thread(session, plan, runtime=runtime, anchor=anchor))
    if created:
        report.anchor = anchor.isoformat()
        progress("compressing some threads as an operator would")
        compressed = compress_some(settings, created)
        report.notes.append(f"an operator compressed {len(compressed)} threads")
    _seed_live_threads(settings, summarizer, progress)
    _count_demo(settings, report)
    if not created and not reset:
        report.notes.append("demo threads already present; nothing changed")
    return report
