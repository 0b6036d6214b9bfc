"""Shared builders of the alert tests: threads at a pressure, rules, PostgreSQL only."""

from __future__ import annotations

import sqlalchemy as sa

from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.alerts import rules
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import ORIGIN_ATTACHED, ORIGIN_DASHBOARD, AuditEntry, Conversation

ADMIN = Actor(id="admin@example.com", role=Role.ADMIN)
OPERATOR = Actor(id="ops@example.com", role=Role.OPERATOR)
TRIGGER = 8 * 1024
SECRET = "s3cret-for-tests"  # the webhook's shared secret in tests


def put_thread(
    thread_id: str,
    pressure: float,
    *,
    agent: str = "agent-a",
    origin: str = ORIGIN_DASHBOARD,
    status: str = "active",
) -> None:
    """A thread row at `pressure` (created, or its current usage moved as a projection does)."""
    with session_scope() as session:
        conv = session.scalar(sa.select(Conversation).where(Conversation.thread_id == thread_id))
        if conv is None:
            conv = Conversation(thread_id=thread_id, user_id="u1", agent_slug=agent, origin=origin)
            session.add(conv)
        conv.status = status
        conv.summary_trigger_tokens = TRIGGER
        conv.next_llm_input_tokens = int(pressure * TRIGGER)
        conv.summary_pressure_ratio = pressure


def add_rule(name: str = "hot", **fields: object) -> None:
    """A rule over every thread unless told (these threads' agents are not registered)."""
    fields.setdefault("compressible_only", False)
    rules.add_rule(ADMIN, name=name, **fields)  # type: ignore[arg-type]


def alert_audit() -> list[tuple[str, str]]:
    with session_scope() as session:
        rows = session.scalars(
            sa.select(AuditEntry).where(AuditEntry.action == "alert").order_by(AuditEntry.id)
        ).all()
        return [(row.target, row.outcome) for row in rows]


def hot_compressible_thread(thread_id: str = "t1") -> None:
    """A real thread (agent, checkpoint) whose projected pressure is over the line."""
    from tests.service.builders import seed_thread

    seed_thread(thread_id)
    with session_scope() as session:
        conv = session.scalar(sa.select(Conversation).where(Conversation.thread_id == thread_id))
        conv.summary_trigger_tokens = TRIGGER
        conv.summary_pressure_ratio = 0.95


def many_agents(total: int = 409, *, pressure: float = 0.95) -> dict[str, int]:
    """``total`` threads (attached and own, every other one) over many agents: "big-a" has 9,
    "big-b" 7, "big-c" 5, each of the rest one of its own. Returns threads per agent."""
    agents = ["big-a"] * 9 + ["big-b"] * 7 + ["big-c"] * 5
    agents += [f"assistant-{n:04d}" for n in range(total - len(agents))]
    with session_scope() as session:
        for number, agent in enumerate(agents):
            session.add(
                Conversation(
                    thread_id=f"many-{number:04d}",
                    user_id="u1",
                    agent_slug=agent,
                    origin=ORIGIN_ATTACHED if number % 2 else ORIGIN_DASHBOARD,
                    status="active",
                    summary_trigger_tokens=TRIGGER,
                    next_llm_input_tokens=int(pressure * TRIGGER),
                    summary_pressure_ratio=pressure,
                )
            )
    counts: dict[str, int] = {}
    for agent in agents:
        counts[agent] = counts.get(agent, 0) + 1
    return counts
