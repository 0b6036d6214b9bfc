"""`yuxi-dash simulate`: a real agent's turns through the platform's intake, run lifecycle and writes.

Owns `simulate` and its report. Each turn is a real intake (`enqueue_request`:
the user's words go to the chat record), dispatched to a running run; then the
thread's `create_agent` graph (`yuxi_dash.sim.loop.build_agent`: the fake
model, the realistic tools, our compression middleware and the configured
checkpointer) plays the turn, and under the thread's row lock the new
checkpoints are projected into the dashboard's tables (`project_thread`: one
usage snapshot per model call, source `auto_compaction` where the middleware
summarized, the chat record, the tool-results index); the run then finishes
`completed` (or `failed`). The report is read back from those rows and the
checkpoints. Threads owned by a demo user tell that user's story
(`yuxi_dash.sim.story`) in their messages.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from langchain.agents.middleware.types import AgentMiddleware, ModelRequest, ModelResponse
from sqlalchemy.orm import Session

from yuxi_dash.compression import Summarizer, get_summarizer
from yuxi_dash.compression.middleware import Handler
from yuxi_dash.compression.state_format import SUMMARIZATION_EVENT_KEY
from yuxi_dash.errors import AgentNotFound, InvalidInput, ThreadBusy, ThreadNotFound
from yuxi_dash.files.workdir import Workdir
from yuxi_dash.printable_record import Record
from yuxi_dash.service import (
    create_thread,
    dispatch_next_request,
    enqueue_request,
    finish_run,
    thread_lock,
    upsert_agent,
)
from yuxi_dash.service.locking import require_thread
from yuxi_dash.service.projection import checkpoints_since, project_thread
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.sim.loop import (
    DEFAULT_SIM_AGENT,
    Agent,
    AgentProfile,
    build_agent,
    play_turn,
    sim_agent,
    turns_played,
)
from yuxi_dash.sim.model import user_message
from yuxi_dash.sim.story import DEMO_USERS, remark_for
from yuxi_dash.sim.topics import stable_rng, topic_for
from yuxi_dash.store.checkpointer import CheckpointStore
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Agent as AgentRow
from yuxi_dash.store.models import Conversation, ToolResult, UsageSnapshotRow
from yuxi_dash.store.thread_store import state_store


@dataclass
class SimulatedThread(Record):
    """What one thread's turns of this run did (read from the projection and the checkpoints)."""

    thread_id: str
    user_id: str
    agent: str
    turns: int = 0
    model_calls: int = 0  # usage snapshots this run added: one per model call
    auto_compactions: int = 0  # of those, the calls the middleware summarized before
    summaries: int = 0  # checkpoints of this run whose summary event changed
    offloaded_results: int = 0  # tool results this run added to the index
    summary_pressure_ratio: float = 0.0
    peak_pressure_ratio: float = 0.0
    checkpoint_id: str | None = None


@dataclass
class SimulationReport:
    seed: int
    threads: list[SimulatedThread] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "threads": [thread.to_dict() for thread in self.threads]}


class Pace(AgentMiddleware[Any, Any, Any]):
    """Pause after each model call (``--pace``), so a dashboard can be watched as a run goes."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def wrap_model_call(self, request: ModelRequest[Any], handler: Handler) -> ModelResponse[Any]:
        response = handler(request)
        time.sleep(self.seconds)
        return response


def _ensure_agent(session: Session, slug: str) -> AgentProfile:
    row = session.scalar(sa.select(AgentRow).where(AgentRow.slug == slug))
    if row is not None:
        return AgentProfile.from_row(row)
    profile = sim_agent(slug)
    if profile is None:
        raise AgentNotFound(f"agent {slug} not found")
    return AgentProfile.from_row(upsert_agent(session, profile.slug, **profile.agent_fields()))


def _open_thread(
    settings: Settings,
    thread_id: str,
    *,
    owner: str,
    agent_slug: str,
) -> tuple[AgentProfile, str]:
    """The thread's agent and owner, creating the thread the first time."""
    with session_scope(settings) as session:
        conv = session.scalar(sa.select(Conversation).where(Conversation.thread_id == thread_id))
        if conv is None:
            profile = _ensure_agent(session, agent_slug)
            create_thread(
                session,
                thread_id,
                user_id=owner,
                agent_slug=profile.slug,
                title=topic_for(thread_id).title,
            )
            return profile, owner
        if conv.status == "deleted":
            raise ThreadNotFound(f"thread {thread_id} was deleted; pick another seed")
        return _ensure_agent(session, conv.agent_slug), conv.user_id


def _max_id(session: Session, model: Any, thread_id: str) -> int:
    return int(
        session.scalar(sa.select(sa.func.max(model.id)).where(model.thread_id == thread_id)) or 0
    )


def simulate(
    settings: Settings | None = None,
    *,
    threads: int = 3,
    turns: int = 6,
    seed: int = 7,
    user_id: str | None = None,
    agent_slug: str | None = None,
    thread_prefix: str = "sim",
    pace_seconds: float = 0.0,
    summarizer: Summarizer | None = None,
) -> SimulationReport:
    """Play `turns` turns on each of `threads` threads through the service layer.

    Each turn: intake (`enqueue_request` with the user's message), dispatch to
    a running run, the agent graph plays the turn (checkpoints written by the
    checkpointer), the new checkpoints are projected under the row lock, and
    the run finishes `completed` (or `failed` if the turn raised). Threads are
    named `{prefix}-{seed}-{n}`; running again continues them where they stopped.
    """
    settings = settings or get_settings()
    if threads < 1 or turns < 1:
        raise InvalidInput("threads and turns must be at least 1")
    workdir = Workdir(settings.workdir)
    workdir.initialize()  # a simulation seeds a store, like the demo: a set-up step
    workdir.ensure_writable()
    summarizer = summarizer or get_summarizer(settings)
    store = state_store(settings)
    extra = [Pace(pace_seconds)] if pace_seconds else []
    report = SimulationReport(seed=seed)
    for number in range(1, threads + 1):
        thread_id = f"{thread_prefix}-{seed}-{number:02d}"
        profile, owner = _open_thread(
            settings,
            thread_id,
            owner=user_id or DEMO_USERS[(seed + number) % len(DEMO_USERS)],
            agent_slug=agent_slug or DEFAULT_SIM_AGENT,
        )
        agent = build_agent(
            profile,
            checkpointer=store.saver,
            seed=f"simulate:{seed}",
            workdir=workdir,
            summarizer=summarizer,
            extra_middleware=extra,
        )
        result = SimulatedThread(thread_id=thread_id, user_id=owner, agent=profile.slug)
        _play(settings, store, agent, result, turns=turns, seed=seed, number=number)
        report.threads.append(result)
    return report


def _play(
    settings: Settings,
    store: CheckpointStore,
    agent: Agent,
    result: SimulatedThread,
    *,
    turns: int,
    seed: int,
    number: int,
) -> None:
    """The thread's turns, then its report from the rows and checkpoints they added."""
    thread_id, owner = result.thread_id, result.user_id
    latest = store.latest(thread_id)
    start_checkpoint = latest.checkpoint_id if latest else None
    first_turn = turns_played(latest.values if latest else None)
    with session_scope(settings) as session:
        snapshots_before = _max_id(session, UsageSnapshotRow, thread_id)
        results_before = _max_id(session, ToolResult, thread_id)
    topic = topic_for(thread_id)
    for turn in range(first_turn, first_turn + turns):
        # demo users tell their story (yuxi_dash.sim.story) here too
        remark = remark_for(owner, number, turn) if owner in DEMO_USERS else None
        text = user_message(stable_rng("simulate", seed, thread_id, turn), topic, turn, remark)
        enqueue_request(thread_id, content=text, settings=settings)
        run = dispatch_next_request(thread_id, settings=settings)
        if run is None:
            raise ThreadBusy(f"thread {thread_id} has another run in progress")
        try:
            try:
                play_turn(agent, thread_id, text, user_id=owner, agent_slug=result.agent)
            finally:  # what the turn wrote before a failure is the thread's state too
                with thread_lock(thread_id, settings=settings) as (session, conv):
                    project_thread(session, require_thread(conv, thread_id), store)
        except BaseException:
            finish_run(run.id, status="failed", settings=settings)
            raise
        finish_run(run.id, status="completed", settings=settings)
        result.turns += 1
    _fill_report(settings, store, result, start_checkpoint, snapshots_before, results_before)


def _fill_report(
    settings: Settings,
    store: CheckpointStore,
    result: SimulatedThread,
    start_checkpoint: str | None,
    snapshots_before: int,
    results_before: int,
) -> None:
    thread_id = result.thread_id
    with session_scope(settings) as session:
        rows = session.execute(
            sa.select(UsageSnapshotRow.source, UsageSnapshotRow.summary_pressure_ratio).where(
                UsageSnapshotRow.thread_id == thread_id, UsageSnapshotRow.id > snapshots_before
            )
        ).all()
        result.offloaded_results = int(
            session.scalar(
                sa.select(sa.func.count())
                .select_from(ToolResult)
                .where(ToolResult.thread_id == thread_id, ToolResult.id > results_before)
            )
            or 0
        )
        conv = session.scalar(sa.select(Conversation).where(Conversation.thread_id == thread_id))
        if conv is not None:
            result.summary_pressure_ratio = conv.summary_pressure_ratio or 0.0
            result.checkpoint_id = conv.checkpoint_id
    result.model_calls = len(rows)
    result.auto_compactions = sum(1 for row in rows if row.source == "auto_compaction")
    result.peak_pressure_ratio = max((row.summary_pressure_ratio for row in rows), default=0.0)
    baseline, newer = checkpoints_since(store, thread_id, start_checkpoint)
    previous = baseline.values.get(SUMMARIZATION_EVENT_KEY) if baseline else None
    for checkpoint in newer:
        event = checkpoint.values.get(SUMMARIZATION_EVENT_KEY)
        result.summaries += int(event is not None and event != previous)
        previous = event
