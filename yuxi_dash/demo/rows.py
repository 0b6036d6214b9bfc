"""What a demo thread's story adds to the rows its agent's checkpoints are projected into.

A demo thread's checkpoints and projected rows come from its agent run and
`project_thread`, as on a live platform; only the times are the story's:

- the user's message is recorded as intake writes it (`record_intake`);
- the chat rows of a turn move to the story time of the model call that made
  them (`stamp_turn`), and each indexed tool result to the time of the call that
  offloaded it (`stamp_tool_results`, from `yuxi_dash.demo.clock.OffloadClock`);
- the run lifecycle is written with story times (`write_runs`);
- the thread's final status (`finish_conversation`).

Owns `BuiltThread`, what the seeder keeps of a played thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash.demo.clock import StoryClock
from yuxi_dash.demo.plan import ThreadPlan
from yuxi_dash.service.usage_writes import append_chat
from yuxi_dash.store.models import AgentRun, ChatMessage, Conversation, RunRequest, ToolResult

QUEUED_AFTER = timedelta(seconds=30)  # a queued message arrives this long after the last step
TOOL_AFTER = timedelta(seconds=1)  # a tool's result arrives this long after the call asked
RUN_DONE_AFTER = timedelta(seconds=2)  # a run is marked finished this long after its last call


@dataclass
class BuiltThread:
    """One demo thread as played: its plan, its story times, where it ended."""

    plan: ThreadPlan
    clock: StoryClock
    turn_texts: list[str] = field(default_factory=list)  # what the user wrote each turn
    turn_calls: list[int] = field(default_factory=list)  # model calls so far, after each turn
    pressure: float = 0.0  # summary pressure after the last model call
    visible_messages: int = 0  # messages the model still sees (after the summary)
    queued_text: str | None = None


def record_intake(session: Session, thread_id: str, text: str, at: datetime) -> int:
    """The user's message in the chat record, as intake writes it; return its sequence."""
    append_chat(session, thread_id, [("user", text)], at=at)
    session.flush()
    return int(
        session.scalar(
            sa.select(sa.func.max(ChatMessage.sequence)).where(ChatMessage.thread_id == thread_id)
        )
        or 0
    )


def stamp_turn(
    session: Session, thread_id: str, *, after_sequence: int, call_times: list[datetime]
) -> None:
    """Story times for the chat rows the projection of one turn wrote."""
    session.flush()
    rows = session.scalars(
        sa.select(ChatMessage)
        .where(ChatMessage.thread_id == thread_id, ChatMessage.sequence > after_sequence)
        .order_by(ChatMessage.sequence)
    )
    times = iter(call_times)
    at: datetime | None = None
    for row in rows:
        if row.role == "assistant":
            at = next(times, at)
        if at is not None:
            row.created_at = at + TOOL_AFTER if row.role == "tool" else at


def stamp_tool_results(session: Session, thread_id: str, saved: Mapping[str, datetime]) -> None:
    """Story times for the thread's indexed tool results: when each was offloaded."""
    session.flush()
    for result in session.scalars(sa.select(ToolResult).where(ToolResult.thread_id == thread_id)):
        at = saved.get(result.path)
        if at is not None:
            result.created_at = at


def write_runs(session: Session, built: BuiltThread) -> None:
    """The run lifecycle: one dispatched request and one run per turn, and the queued request."""
    plan, clock = built.plan, built.clock
    requests: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    last_turn = len(built.turn_texts) - 1
    for turn, (text, calls) in enumerate(zip(built.turn_texts, built.turn_calls, strict=True)):
        requested = clock.turns[turn]
        status = "completed"
        if turn == last_turn and plan.busy in ("running", "interrupted"):
            status = plan.busy
        ended = clock.calls[calls - 1] if calls else requested
        requests.append(
            {
                "thread_id": plan.thread_id,
                "run_type": "chat",
                "status": "dispatched",
                "payload": {"content": text},
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
                "finished_at": None if status == "running" else ended + RUN_DONE_AFTER,
            }
        )
    request_ids = session.scalars(
        sa.insert(RunRequest).returning(RunRequest.id, sort_by_parameter_order=True), requests
    ).all()
    for run, request_id in zip(runs, request_ids, strict=True):
        run["request_id"] = request_id
    session.execute(sa.insert(AgentRun), runs)
    if built.queued_text is not None:
        at = clock.now + QUEUED_AFTER
        append_chat(session, plan.thread_id, [("user", built.queued_text)], at=at)
        session.add(
            RunRequest(
                thread_id=plan.thread_id,
                run_type="chat",
                status="queued",
                payload={"content": built.queued_text},
                created_at=at,
            )
        )


def finish_conversation(conv: Conversation, built: BuiltThread) -> None:
    """The conversation's last activity (a queued message counts) and its final status."""
    last_at = built.clock.now
    if built.queued_text is not None:
        conv.last_activity_at = last_at + QUEUED_AFTER
    conv.updated_at = conv.last_activity_at or last_at
    if built.plan.status != "active":
        conv.status = built.plan.status
        conv.deleted_at = last_at + timedelta(hours=1) if built.plan.status == "deleted" else None
