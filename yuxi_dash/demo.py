"""Demo data for `yuxi-dash demo`: the people, and the orchestration of both seeders.

Threads, chat records and offloaded tool results are seeded by
`seed_demo_threads` (this module); user graphs, Redis hit counters and the
flag file by `yuxi_dash.memory.demo.seed_demo_graphs`. Both use the same
`DEMO_USERS`, so support staff can read a user's memory next to their chats,
and both read `yuxi_dash.demo_story`: the statements a user makes in their
threads' messages are the user_asserted facts of their graph.
Seeding is deterministic and idempotent; `reset=True` starts clean.

About 200 threads (`demo-NNN`) over the 30 demo users and the simulator's three
agents (`report-writer` lacks `context_compression`). Each thread is played by
the simulator's agent loop in memory (fake model, real tool outputs, the
engine's `auto_compact` at the threshold, so offloaded files and history files
land in the workdir) and written in bulk with the store's models and the state
repository; a few `demo-live-*` threads go through the real intake and run
lifecycle (`yuxi_dash.simulate.simulate`), and a few idle threads are
compressed by an operator through the locked service core. Running, queued,
interrupted, archived and deleted threads are among them. Content is a pure
function of the thread id; timestamps are laid out backwards from the time of
the first seed, and a thread that already exists is never touched again.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import sqlalchemy as sa

from yuxi_dash.settings import Settings
from yuxi_dash.usage import SUGGESTION_RATIO

log = logging.getLogger(__name__)

DEMO_USERS: tuple[str, ...] = (
    "alice_chen", "bruno_silva", "chloe_martin", "dmitri_ivanov", "elena_rossi",
    "farah_khan", "gustavo_lima", "hana_sato", "ivan_petrov", "julia_novak",
    "kwame_mensah", "lena_schmidt", "marco_bianchi", "nadia_haddad", "oliver_smith",
    "priya_patel", "quentin_dubois", "rosa_garcia", "samir_aziz", "tara_obrien",
    "umar_farouk", "vera_kowalski", "wei_zhang", "ximena_torres", "yusuf_demir",
    "zoe_muller", "arjun_rao", "bea_lindqvist", "carlos_mendez", "daria_volkova",
)  # fmt: skip


@dataclass
class DemoReport:
    """What a demo run wrote, for the CLI and the `serve --demo` banner."""

    threads: int = 0
    users: int = 0
    tool_results: int = 0
    graphs: int = 0
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "threads": self.threads,
            "users": self.users,
            "tool_results": self.tool_results,
            "graphs": self.graphs,
            "notes": self.notes,
        }


DEMO_PREFIX = "demo-"
DEMO_THREADS = 196  # plus the live simulated ones: about 200
LIVE_THREADS = 4
LIVE_TURNS = 4
LIVE_SEED = 2026
DEMO_OPERATOR = "ops.lead@example.com"
MANUAL_COMPRESSIONS = 8
MAX_TURNS = 18

# (status kind, how many) laid out over the thread numbers by _status_for
_BUSY_EVERY = 25  # per 25 threads: one running, one queued, one interrupted
_LIFECYCLE_EVERY = 40  # per 40 threads: one deleted, one archived

# pressure bands (low, high) and their weights; "over" only for agents without
# compression (the others summarize at the threshold) and for busy threads
_BANDS: tuple[tuple[str, float, float, int], ...] = (
    ("low", 0.04, 0.40, 30),
    ("mid", 0.40, 0.70, 24),
    ("warm", 0.70, SUGGESTION_RATIO, 16),
    ("high", SUGGESTION_RATIO, 1.00, 14),
    ("over", 1.00, 1.35, 8),
)


@dataclass(frozen=True)
class ThreadPlan:
    """What one demo thread will look like (a pure function of its number)."""

    number: int
    thread_id: str
    user_id: str
    agent_slug: str
    status: str  # active | archived | deleted
    busy: str | None  # running | queued | interrupted | None
    band: tuple[float, float]
    min_turns: int  # long-running threads go round the sawtooth several times
    recency: timedelta  # how long before the anchor its last activity was
    ordinal: int = 0  # this is the user's ordinal-th demo thread (0-based): picks their remarks


def _status_for(number: int) -> tuple[str, str | None]:
    slot = number % _BUSY_EVERY
    busy = {3: "running", 11: "queued", 19: "interrupted"}.get(slot)
    if busy:
        return "active", busy
    life = number % _LIFECYCLE_EVERY
    return {7: "deleted", 27: "archived"}.get(life, "active"), None


def plan_threads(count: int = DEMO_THREADS) -> list[ThreadPlan]:
    """The demo's threads, deterministic."""
    from yuxi_dash.simulate import SIM_AGENTS, stable_rng

    plans = []
    per_user: dict[str, int] = {}
    for number in range(count):
        thread_id = f"{DEMO_PREFIX}{number:03d}"
        rng = stable_rng("demo-plan", thread_id)
        agent = SIM_AGENTS[(0, 0, 0, 0, 1, 1, 1, 1, 2, 2)[number % 10]]
        status, busy = _status_for(number)
        bands = [band for band in _BANDS if band[0] != "over" or not agent.capable or busy]
        _, low, high, _ = rng.choices(bands, weights=[band[3] for band in bands])[0]
        if busy in ("running", "interrupted") and agent.capable:
            low, high = 0.0, 9.0  # mid-turn: wherever the pending tool results leave it
        hours = rng.choice((0.2, 0.5, 1, 2, 3, 5, 8, 12, 20, 30, 48, 72, 120, 200, 300, 450))
        recency = timedelta(hours=hours * (0.6 + rng.random() * 0.8))
        if busy == "running":
            recency = timedelta(seconds=rng.randint(5, 120))
        user_id = DEMO_USERS[(number * 7 + number // 30) % len(DEMO_USERS)]
        ordinal = per_user.get(user_id, 0)
        per_user[user_id] = ordinal + 1
        plans.append(
            ThreadPlan(
                number=number,
                thread_id=thread_id,
                user_id=user_id,
                agent_slug=agent.slug,
                status=status,
                busy=busy,
                band=(low, high),
                min_turns=rng.randint(8, 14) if agent.capable and rng.random() < 0.2 else 1,
                recency=recency,
                ordinal=ordinal,
            )
        )
    return plans


@dataclass
class _BuiltThread:
    """One thread played in memory, ready to be written."""

    plan: ThreadPlan
    steps: list[Any]
    turn_starts: list[int]  # index into steps where each turn's first step is
    state: Any
    last_compression: dict[str, Any] | None
    queued_text: str | None = None
    times: list[datetime] = field(default_factory=list)
    turn_times: list[datetime] = field(default_factory=list)


def _build_thread(
    plan: ThreadPlan, *, workdir: Any, summarizer: Any, anchor: datetime
) -> _BuiltThread:
    from yuxi_dash.compression import ThreadContextState
    from yuxi_dash.compression.engine import history_session_id
    from yuxi_dash.demo_story import remark_for
    from yuxi_dash.simulate import AgentLoop, sim_agent, stable_rng, topic_for
    from yuxi_dash.workdir import history_relpath

    profile = sim_agent(plan.agent_slug)
    assert profile is not None
    state = ThreadContextState(thread_id=plan.thread_id, messages=[])
    # a history file of a thread that is not in the database is left over from a run that
    # failed before its commit: start it again so the file holds this thread's history only
    workdir.resolve(history_relpath(history_session_id(state))).unlink(missing_ok=True)
    rng = stable_rng("demo", plan.thread_id)
    loop = AgentLoop(
        state,
        profile,
        rng=rng,
        topic=topic_for(plan.thread_id),
        workdir=workdir,
        summarizer=summarizer,
        remark=partial(remark_for, plan.user_id, plan.ordinal),
    )
    low, high = plan.band
    steps: list[Any] = []
    turn_starts: list[int] = []
    for _turn in range(MAX_TURNS):
        turn_starts.append(len(steps))
        steps.extend(loop.turn())
        pressure = steps[-1].usage.summary_pressure_ratio
        if steps[-1].usage.next_llm_input_tokens >= profile.context_window * 0.9:
            break  # without compression the window is the wall
        if (
            len(turn_starts) >= plan.min_turns
            and pressure >= low
            and (pressure < high or not profile.capable)
        ):
            break
    queued_text = None
    if plan.busy in ("running", "interrupted"):
        turn_starts.append(len(steps))
        steps.extend(loop.turn(max_model_calls=1 + rng.randrange(2)))
    elif plan.busy == "queued":
        queued_text = loop.next_user_text()
    built = _BuiltThread(
        plan=plan,
        steps=steps,
        turn_starts=turn_starts,
        state=loop.state,
        last_compression=loop.last_compression,
        queued_text=queued_text,
    )
    _lay_out_times(built, rng, anchor)
    return built


def _lay_out_times(built: _BuiltThread, rng: random.Random, anchor: datetime) -> None:
    """Timestamps backwards from `anchor - recency`: seconds between calls, minutes between turns."""
    end = anchor - built.plan.recency
    starts = set(built.turn_starts)
    gaps: list[timedelta] = []
    for index in range(len(built.steps)):
        if index in starts and index:
            gaps.append(timedelta(minutes=rng.randint(3, 240)))
        else:
            gaps.append(timedelta(seconds=rng.randint(2, 45)))
    total = sum(gaps[1:], timedelta())
    clock = end - total
    built.times = []
    for index, gap in enumerate(gaps):
        if index:
            clock += gap
        built.times.append(clock)
    built.turn_times = [
        built.times[i] - timedelta(seconds=rng.randint(1, 20)) for i in built.turn_starts
    ]


def _write_thread(session: Any, built: _BuiltThread) -> int:
    """Insert the conversation, checkpoint, snapshots, chat, tool-result index and runs."""
    from yuxi_dash.service import create_thread
    from yuxi_dash.simulate import sim_agent, topic_for
    from yuxi_dash.store.models import (
        AgentRun,
        ChatMessage,
        RunRequest,
        ToolResult,
        UsageSnapshotRow,
    )
    from yuxi_dash.store.state_repository import write_state

    plan = built.plan
    profile = sim_agent(plan.agent_slug)
    assert profile is not None
    first_at = built.turn_times[0]
    last_at = built.times[-1]
    topic = topic_for(plan.thread_id)
    conv = create_thread(
        session,
        plan.thread_id,
        user_id=plan.user_id,
        agent_slug=plan.agent_slug,
        title=f"{topic.title} #{plan.number}",
        status="active",
        created_at=first_at,
    )
    last_compression = None
    if built.last_compression is not None:
        index = max(i for i, step in enumerate(built.steps) if step.compression is not None)
        last_compression = {**built.last_compression, "at": built.times[index].isoformat()}
    last = built.steps[-1]
    write_state(
        session, built.state, expected_version=0, token_usage=last.token_usage(last_compression)
    )

    snapshots = []
    chat = []
    tool_rows: dict[str, dict[str, Any]] = {}
    sequence = 0
    for step, at in zip(built.steps, built.times, strict=True):
        usage = step.usage
        snapshots.append(
            {
                "thread_id": plan.thread_id,
                "measured_at": at,
                "llm_input_tokens": usage.llm_input_tokens,
                "next_llm_input_tokens": usage.next_llm_input_tokens,
                "context_window": usage.context_window,
                "context_usage_ratio": usage.context_usage_ratio,
                "summary_trigger_tokens": usage.summary_trigger_tokens,
                "summary_pressure_ratio": usage.summary_pressure_ratio,
                "summary_active": usage.summary_active,
                "source": step.source,
            }
        )
        for role, content in step.chat:
            sequence += 1
            chat.append(
                {
                    "thread_id": plan.thread_id,
                    "sequence": sequence,
                    "role": role,
                    "content": content,
                    "created_at": at,
                }
            )
        for tool_call_id, tool_name, saved in step.saved_files:
            tool_rows.setdefault(
                saved.path,
                {
                    "thread_id": plan.thread_id,
                    "tool_name": tool_name,
                    "tool_call_id": tool_call_id,
                    "sha256": saved.sha256,
                    "path": saved.path,
                    "chars": saved.chars,
                    "approx_tokens": saved.approx_tokens,
                    "created_at": at,
                },
            )
    if built.queued_text is not None:
        sequence += 1
        queued_at = last_at + timedelta(seconds=30)
        chat.append(
            {
                "thread_id": plan.thread_id,
                "sequence": sequence,
                "role": "user",
                "content": built.queued_text,
                "created_at": queued_at,
            }
        )
    session.execute(sa.insert(UsageSnapshotRow), snapshots)
    session.execute(sa.insert(ChatMessage), chat)
    if tool_rows:
        session.execute(sa.insert(ToolResult), list(tool_rows.values()))

    # the run lifecycle: one request and one run per turn
    turn_ends = [*built.turn_starts[1:], len(built.steps)]
    requests: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    for turn, (start, end) in enumerate(zip(built.turn_starts, turn_ends, strict=True)):
        requested = built.turn_times[turn]
        finished = built.times[end - 1] + timedelta(seconds=2)
        last_turn = turn == len(built.turn_starts) - 1
        status = "completed"
        if last_turn and plan.busy in ("running", "interrupted"):
            status = plan.busy
        requests.append(
            {
                "thread_id": plan.thread_id,
                "run_type": "chat",
                "status": "dispatched",
                "payload": {"content": _turn_user_text(built.steps[start:end])},
                "created_at": requested,
                "dispatched_at": requested,
            }
        )
        runs.append(
            {
                "thread_id": plan.thread_id,
                "run_type": "chat",
                "status": status,
                "created_at": requested,
                "started_at": requested,
                "finished_at": None if status == "running" else finished,
            }
        )
    request_ids = session.scalars(
        sa.insert(RunRequest).returning(RunRequest.id, sort_by_parameter_order=True), requests
    ).all()
    for run, request_id in zip(runs, request_ids, strict=True):
        run["request_id"] = request_id
    session.execute(sa.insert(AgentRun), runs)
    if built.queued_text is not None:
        session.add(
            RunRequest(
                thread_id=plan.thread_id,
                run_type="chat",
                status="queued",
                payload={"content": built.queued_text},
                created_at=last_at + timedelta(seconds=30),
            )
        )

    usage = last.usage
    conv.llm_input_tokens = usage.llm_input_tokens
    conv.next_llm_input_tokens = usage.next_llm_input_tokens
    conv.context_window = usage.context_window
    conv.context_usage_ratio = usage.context_usage_ratio
    conv.summary_trigger_tokens = usage.summary_trigger_tokens
    conv.summary_pressure_ratio = usage.summary_pressure_ratio
    conv.summary_active = usage.summary_active
    conv.usage_measured_at = last_at
    compress_times = [
        at for step, at in zip(built.steps, built.times, strict=True) if step.compression
    ]
    conv.last_compression_at = compress_times[-1] if compress_times else None
    conv.last_activity_at = last_at + timedelta(seconds=30) if built.queued_text else last_at
    conv.updated_at = conv.last_activity_at
    if plan.status != "active":
        conv.status = plan.status
        conv.deleted_at = last_at + timedelta(hours=1) if plan.status == "deleted" else None
    return len(tool_rows)


def _turn_user_text(steps: list[Any]) -> str:
    for step in steps:
        for role, content in step.chat:
            if role == "user":
                return content
    return ""


def _demo_thread_ids(session: Any) -> set[str]:
    from yuxi_dash.store.models import Conversation

    return set(
        session.scalars(
            sa.select(Conversation.thread_id).where(Conversation.thread_id.like(f"{DEMO_PREFIX}%"))
        )
    )


def reset_demo_threads(settings: Settings) -> int:
    """Delete every demo thread, its rows, audit entries and workdir files; return how many."""
    from yuxi_dash.errors import PathRefused
    from yuxi_dash.service import thread_target
    from yuxi_dash.simulate import SIM_AGENTS
    from yuxi_dash.store.db import session_scope
    from yuxi_dash.store.models import (
        Agent,
        AgentRun,
        AuditEntry,
        ChatMessage,
        Conversation,
        RunRequest,
        ThreadState,
        ToolResult,
        UsageSnapshotRow,
    )
    from yuxi_dash.workdir import Workdir, history_relpath

    workdir = Workdir(settings.workdir)
    with session_scope(settings) as session:
        thread_ids = sorted(_demo_thread_ids(session))
        if not thread_ids:
            return 0
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
        sessions = set(
            session.scalars(
                sa.select(ThreadState.history_session_id).where(
                    ThreadState.thread_id.like(f"{DEMO_PREFIX}%")
                )
            )
        )
        for model in (ToolResult, ChatMessage, UsageSnapshotRow, ThreadState, AgentRun, RunRequest):
            session.execute(sa.delete(model).where(model.thread_id.like(f"{DEMO_PREFIX}%")))
        session.execute(
            sa.delete(AuditEntry).where(AuditEntry.target.like(thread_target(f"{DEMO_PREFIX}%")))
        )
        session.execute(
            sa.delete(Conversation).where(Conversation.thread_id.like(f"{DEMO_PREFIX}%"))
        )
        in_use = set(session.scalars(sa.select(Conversation.agent_slug).distinct()))
        unused = [agent.slug for agent in SIM_AGENTS if agent.slug not in in_use]
        if unused:
            session.execute(sa.delete(Agent).where(Agent.slug.in_(unused)))
    for relative in sorted(demo_paths - shared_paths) + [
        history_relpath(session_id) for session_id in sessions if session_id
    ]:
        try:
            workdir.resolve(relative).unlink(missing_ok=True)
        except (OSError, PathRefused) as exc:
            log.warning("could not remove a demo file (%s)", type(exc).__name__)
    return len(thread_ids)


def _compress_some(settings: Settings, created: list[_BuiltThread]) -> list[str]:
    """An operator compresses a few idle, capable, mid-pressure threads (real locked service)."""
    from yuxi_dash.auth import Actor, Role
    from yuxi_dash.service import compress_thread_context

    operator = Actor(id=DEMO_OPERATOR, role=Role.OPERATOR, email=DEMO_OPERATOR, via="demo")
    candidates = [
        built
        for built in created
        if built.plan.status == "active"
        and built.plan.busy is None
        and built.plan.agent_slug != "report-writer"
        and 0.4 <= built.steps[-1].usage.summary_pressure_ratio < SUGGESTION_RATIO
        and len(built.state.messages) - built.state.visible_start > 14
    ]
    compressed = []
    for built in candidates[:MANUAL_COMPRESSIONS]:
        result = compress_thread_context(built.plan.thread_id, actor=operator, settings=settings)
        if result.status == "completed":
            compressed.append(built.plan.thread_id)
    return compressed


Progress = Callable[[str], None]


def _quiet(_stage: str) -> None:
    """The default progress sink: say nothing."""


def seed_demo_threads(
    settings: Settings,
    *,
    reset: bool = False,
    now: datetime | None = None,
    progress: Progress = _quiet,
) -> DemoReport:
    """Seed the demo threads (idempotent: existing demo threads are left as they are).

    ``progress`` is told each stage as it starts (one short line), for a CLI to show.
    """
    from yuxi_dash.compression import get_summarizer
    from yuxi_dash.service import upsert_agent
    from yuxi_dash.simulate import SIM_AGENTS, simulate
    from yuxi_dash.store.db import session_scope
    from yuxi_dash.store.models import Conversation, ToolResult
    from yuxi_dash.workdir import Workdir

    report = DemoReport()
    if reset:
        removed = reset_demo_threads(settings)
        if removed:
            report.notes.append(f"reset: removed {removed} demo threads and their files")
    workdir = Workdir(settings.workdir)
    workdir.ensure_writable()
    summarizer = get_summarizer(settings)
    anchor = (now or datetime.now(UTC)).replace(microsecond=0)
    created: list[_BuiltThread] = []
    with session_scope(settings) as session:
        for agent in SIM_AGENTS:
            upsert_agent(session, agent.slug, **agent.agent_fields())
        existing = _demo_thread_ids(session)
        plans = [plan for plan in plan_threads() if plan.thread_id not in existing]
        if plans:
            progress(f"building {len(plans)} demo threads")
        for plan in plans:
            built = _build_thread(plan, workdir=workdir, summarizer=summarizer, anchor=anchor)
            _write_thread(session, built)
            created.append(built)
    if created:
        progress("compressing some threads as an operator would")
        compressed = _compress_some(settings, created)
        report.notes.append(f"an operator compressed {len(compressed)} threads")
    live_prefix = f"{DEMO_PREFIX}live"
    with session_scope(settings) as session:
        live_existing = session.scalar(
            sa.select(sa.func.count())
            .select_from(Conversation)
            .where(Conversation.thread_id.like(f"{live_prefix}-%"))
        )
    if not live_existing:
        progress(f"simulating {LIVE_THREADS} live threads")
        simulate(
            settings,
            threads=LIVE_THREADS,
            turns=LIVE_TURNS,
            seed=LIVE_SEED,
            thread_prefix=live_prefix,
            summarizer=summarizer,
        )
    with session_scope(settings) as session:
        demo = Conversation.thread_id.like(f"{DEMO_PREFIX}%")
        report.threads = int(
            session.scalar(sa.select(sa.func.count()).select_from(Conversation).where(demo))
        )
        report.users = int(
            session.scalar(sa.select(sa.func.count(sa.distinct(Conversation.user_id))).where(demo))
        )
        report.tool_results = int(
            session.scalar(
                sa.select(sa.func.count())
                .select_from(ToolResult)
                .where(ToolResult.thread_id.like(f"{DEMO_PREFIX}%"))
            )
        )
    if not created and not reset:
        report.notes.append("demo threads already present; nothing changed")
    return report


def seed_demo(
    settings: Settings,
    *,
    reset: bool = False,
    memory: bool = True,
    now: datetime | None = None,
    progress: Progress = _quiet,
) -> DemoReport:
    """Seed threads, then (when `memory`) the users' graphs; `reset` starts both clean."""
    report = seed_demo_threads(settings, reset=reset, now=now, progress=progress)
    if memory:
        try:
            from yuxi_dash.memory.demo import seed_demo_graphs
        except ImportError as exc:
            report.notes.append(f"memory demo not available ({exc.name}); graphs not seeded")
            return report
        progress(f"writing {len(DEMO_USERS)} user memory graphs")
        result = seed_demo_graphs(settings, DEMO_USERS, reset=reset)
        report.graphs = int(result.get("graphs", 0)) + int(result.get("skipped_existing", 0))
        if result.get("skipped_existing"):
            report.notes.append(f"{result['skipped_existing']} user graphs already present")
    return report
