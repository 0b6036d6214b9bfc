"""The locks and checks every memory correction shares: a fact's lock, several facts' locks at
once, the gate-and-graph door, the edge snapshot, and the "changed since" check.

- `fact_lock(settings, group_id, fact)`: one transaction holding one fact's lock until it
  commits (PostgreSQL advisory lock, SQLite write lock; too long is `fact_busy`).
- `hold_facts(settings, group_id, facts)`: one transaction holding the locks of many facts,
  taken in sorted order. Inside it, `fact_lock` on one of those facts yields that same
  transaction: every correction made inside commits or rolls back together. Write nothing in
  another session while holding it (on SQLite that session would wait for the lock).
- `open_graph(user_id, ...)`: the user's gate and graph, the checks every write makes.
- `snap(edge)`: an edge as `memory_corrections` stores it (graphiti-core's save bookkeeping
  left out); `current_edges(...)`: several facts' edges now, snapped.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import sqlalchemy as sa
from graphiti_core.driver.falkordb_driver import FalkorDriver
from graphiti_core.edges import EntityEdge

from yuxi_dash.errors import FactBusy, MemoryGatedOff, UserNotFound
from yuxi_dash.flags import FlagEvaluator
from yuxi_dash.memory.graph import correction_rules as rules
from yuxi_dash.memory.graph.client import GraphClient, get_client
from yuxi_dash.memory.graph.fact_writer import FactWriter, load_edge
from yuxi_dash.memory.views.gate import gate_message, gates_for, group_for
from yuxi_dash.settings import Settings
from yuxi_dash.store.db import is_lock_failure, is_sqlite, locked_session

SAVE_BOOKKEEPING = ("source_uuid", "target_uuid")  # graphiti-core's save adds these
_HELD: ContextVar[tuple[Any, str, frozenset[str]] | None] = ContextVar("held_facts", default=None)


def snap(edge: EntityEdge | None) -> dict[str, Any] | None:
    """An edge as `memory_corrections` stores it; None for no edge."""
    if edge is None:
        return None
    found = rules.snapshot(edge)
    found["attributes"] = {
        k: v for k, v in found["attributes"].items() if k not in SAVE_BOOKKEEPING
    }
    return found


def open_graph(
    user_id: str, settings: Settings, evaluator: FlagEvaluator | None, client: GraphClient | None
) -> tuple[str, GraphClient]:
    """The user's group id and graph client, once the gate is on and the graph exists."""
    group_id = group_for(user_id)
    gates = gates_for(user_id, settings=settings, evaluator=evaluator)
    if not gates.memory_on:
        raise MemoryGatedOff(gate_message(gates))
    client = client or get_client(settings)
    if not client.graph_exists(group_id):
        raise UserNotFound(f"no memory graph for user {user_id}")
    return group_id, client


def _lock_key(group_id: str, fact: str) -> str:
    return f"memory-fact:{group_id}:{fact}"


@contextmanager
def _locked(settings: Settings, group_id: str, facts: list[str], what: str) -> Iterator[Any]:
    try:
        with locked_session(settings, wait_seconds=settings.lock_timeout_seconds) as session:
            if not is_sqlite(session):
                for fact in sorted(set(facts)):  # one order everywhere: no deadlock
                    session.execute(
                        sa.text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"),
                        {"key": _lock_key(group_id, fact)},
                    )
            yield session
    except sa.exc.OperationalError as exc:
        if is_lock_failure(exc):
            raise FactBusy(
                f"{what} is being corrected by another operator; try again shortly"
            ) from exc
        raise


@contextmanager
def fact_lock(settings: Settings, group_id: str, fact: str) -> Iterator[Any]:
    """One transaction holding one fact's lock (or the `hold_facts` one that holds it)."""
    held = _HELD.get()
    if held is not None and held[1] == group_id and fact in held[2]:
        yield held[0]
        return
    with _locked(settings, group_id, [fact], f"fact {fact}") as session:
        yield session


@contextmanager
def hold_facts(settings: Settings, group_id: str, facts: list[str]) -> Iterator[Any]:
    """One transaction holding every one of `facts`' locks (module doc)."""
    with _locked(settings, group_id, facts, "one of these facts") as session:
        token = _HELD.set((session, group_id, frozenset(facts)))
        try:
            yield session
        finally:
            _HELD.reset(token)


def current_edges(
    settings: Settings, group_id: str, client: GraphClient, facts: list[str]
) -> dict[str, dict[str, Any] | None]:
    """Each fact's edge now, as `snap` gives it (graphiti-core's own reads)."""

    async def job(driver: FalkorDriver) -> dict[str, dict[str, Any] | None]:
        return {uuid: snap(await load_edge(driver, uuid)) for uuid in facts}

    return FactWriter(settings, group_id, handle=client.handle).run(job)
