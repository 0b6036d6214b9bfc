"""Retirements that look wrong, on a real FalkorDB graph written with graphiti-core's classes.

Who retired each fact (graphiti's pass, matched by episode and time, or our own
correction), the suspicious flag, the fleet count, and the gate (a gated-off user
sends no graph query).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
import sqlalchemy as sa
from graphiti_core.edges import EntityEdge
from graphiti_core.nodes import EpisodeType, EpisodicNode
from ldclient.integrations.test_data import TestData

from tests.fixtures.graph import make_client, memory_audit
from tests.memory.quality.retirement_graph import (
    RETIRE_USER,
    START,
    RetireGraph,
    plant_retirements,
)
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.demo.graph_writer import deterministic_embedding, write_graph
from yuxi_dash.errors import Forbidden, MemoryGatedOff, MemoryQueryTimeout
from yuxi_dash.flags import FlagEvaluator
from yuxi_dash.memory.graph.client import GraphClient
from yuxi_dash.memory.graph.server import ServerHandle
from yuxi_dash.memory.quality import retirement_queries, retirements
from yuxi_dash.memory.support import corrections
from yuxi_dash.memory.views import provenance_queries, retiring_episode
from yuxi_dash.memory.views.gate import open_view
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AuditEntry

VIEWER = Actor(id="viewer@example.com", role=Role.VIEWER)
OPERATOR = Actor(id="ops@example.com", role=Role.OPERATOR)
REASON = "the user says this is still true"


@pytest.fixture
def retire_graph(falkordb_server: ServerHandle, memory_settings) -> Iterator[RetireGraph]:
    client = make_client(falkordb_server, memory_settings)
    try:
        yield plant_retirements(client)
    finally:
        client.close()


def _evaluator(settings, *, on: bool = True, off: tuple[str, ...] = ()) -> FlagEvaluator:
    data = TestData.data_source()
    memory = data.flag("graphiti-memory").variation_for_all(on)
    for user in off:
        memory = memory.variation_for_user(user, False)
    data.update(memory)
    data.update(data.flag("graphiti-communities-enabled").variation_for_all(False))
    return FlagEvaluator.from_test_data(settings, data)


@pytest.fixture
def evaluator(memory_settings) -> Iterator[FlagEvaluator]:
    ev = _evaluator(memory_settings)
    yield ev
    ev.close()


def look(settings, evaluator, client: GraphClient, **kw) -> dict:
    access = open_view(
        RETIRE_USER, "retirements", actor=VIEWER, settings=settings, evaluator=evaluator
    )
    return retirements.retirements(access, client=client, **kw)


def by_uuid(data: dict) -> dict[str, dict]:
    return {row["uuid"]: row for row in data["rows"]}


def test_each_retirement_beside_the_episode_and_facts_that_retired_it(
    retire_graph: RetireGraph, memory_settings, evaluator, graph_client
) -> None:
    data = look(memory_settings, evaluator, graph_client)
    rows = by_uuid(data)
    facts, episodes = retire_graph.facts, retire_graph.episodes
    assert set(rows) == {facts["paris"], facts["rust"], facts["jazz"], facts["liked_tea"]}
    assert data["counts"] == {
        "correction": 0,
        "graphiti": 3,
        "own_episode": 1,
        "unmatched": 0,
        "suspicious": 1,
    }
    # shares the user entity with the fact that retired it: not flagged
    paris = rows[facts["paris"]]
    assert paris["kind"] == "graphiti" and paris["suspicious"] is False
    assert paris["episode_uuid"] == episodes["moved"]
    assert paris["episode"]["content"] == "I moved to Berlin."
    assert [f["uuid"] for f in paris["retiring_facts"]] == [facts["berlin"]]
    assert paris["retiring_facts"][0]["shared"] == ["entity Retire User", "relation LIVES_IN"]
    assert paris["basis"] == "valid_at equals the retired fact's invalid_at"
    # shares nothing with the fact that retired it: flagged
    rust = rows[facts["rust"]]
    assert rust["kind"] == "graphiti" and rust["suspicious"] is True
    assert rust["episode_uuid"] == episodes["tea"]
    assert [f["fact"] for f in rust["retiring_facts"]] == ["Bob likes tea"]
    assert rust["retiring_facts"][0]["shared"] == []
    # shares only the relation name: not flagged
    jazz = rows[facts["jazz"]]
    assert jazz["suspicious"] is False and jazz["episode_uuid"] == episodes["coffee"]
    assert jazz["retiring_facts"][0]["shared"] == ["relation PREFERS"]
    # written already ended in the tea pass: its own episode, not a retirement by another
    liked = rows[facts["liked_tea"]]
    assert liked["kind"] == "own_episode" and liked["suspicious"] is False
    # newest first
    assert [r["uuid"] for r in data["rows"]][:3] == [
        facts["jazz"],
        facts["rust"],
        facts["liked_tea"],
    ]


def test_suspicious_only_and_the_look_is_audited(
    retire_graph: RetireGraph, memory_settings, evaluator, graph_client
) -> None:
    data = look(memory_settings, evaluator, graph_client, suspicious_only=True)
    assert [r["uuid"] for r in data["rows"]] == [retire_graph.facts["rust"]]
    assert data["matching"] == 1 and data["retired"] == 4
    views = [(r.outcome, r.detail["view"]) for r in memory_audit(memory_settings, RETIRE_USER)]
    assert views == [("ok", "retirements")]
    # a page of one, past the end: nothing, counted the same
    assert look(memory_settings, evaluator, graph_client, offset=9)["rows"] == []


def test_our_correction_is_shown_as_such_never_suspicious(
    db_url: str, retire_graph: RetireGraph, memory_settings, evaluator, graph_client
) -> None:
    """On SQLite and PostgreSQL: only the expired_at of each snapshot is read, in SQL."""
    dark = retire_graph.facts["dark"]
    done = corrections.retract(
        RETIRE_USER,
        dark,
        actor=OPERATOR,
        reason=REASON,
        settings=memory_settings,
        evaluator=evaluator,
        client=graph_client,
    )
    # graphiti retired the rust fact; our restore puts it back
    done_rust = corrections.restore(
        RETIRE_USER,
        retire_graph.facts["rust"],
        actor=OPERATOR,
        reason=REASON,
        settings=memory_settings,
        evaluator=evaluator,
        client=graph_client,
    )
    rows = by_uuid(look(memory_settings, evaluator, graph_client))
    row = rows[dark]
    assert row["kind"] == "correction" and row["suspicious"] is False
    assert row["correction"]["audit_id"] == done["audit_id"]
    assert row["correction"]["action"] == "retract" and row["correction"]["actor"] == OPERATOR.id
    assert row["retiring_facts"] == [] and row["episode"] is None
    assert retire_graph.facts["rust"] not in rows  # restored: live again
    # undo the restore: the rust fact is graphiti's retirement again, flagged again
    corrections.undo_correction(
        done_rust["audit_id"],
        actor=OPERATOR,
        settings=memory_settings,
        evaluator=evaluator,
        client=graph_client,
    )
    rows = by_uuid(look(memory_settings, evaluator, graph_client))
    assert rows[retire_graph.facts["rust"]]["suspicious"] is True
    # undo the retract: the dark-mode fact is live and no longer listed
    corrections.undo_correction(
        done["audit_id"],
        actor=OPERATOR,
        settings=memory_settings,
        evaluator=evaluator,
        client=graph_client,
    )
    assert dark not in by_uuid(look(memory_settings, evaluator, graph_client))


def test_a_gated_off_user_sends_no_graph_query(
    retire_graph: RetireGraph, memory_settings, graph_client
) -> None:
    ev = _evaluator(memory_settings, off=(RETIRE_USER,))
    try:
        with pytest.raises(MemoryGatedOff):
            look(memory_settings, ev, graph_client)
        assert graph_client.queries_run == 0
        rows = retirements.retirement_counts(
            actor=OPERATOR, settings=memory_settings, evaluator=ev, client=graph_client
        )
    finally:
        ev.close()
    [mine] = [r for r in rows if r["user_id"] == RETIRE_USER]
    assert mine == {"user_id": RETIRE_USER, "gated_off": True, "reason": "TARGET_MATCH"}
    outcomes = [(r.outcome, r.detail["view"]) for r in memory_audit(memory_settings, RETIRE_USER)]
    assert outcomes == [("gated_off", "retirements")]  # the look; the count skipped the user
    everyone_off = _evaluator(memory_settings, on=False)
    try:
        before = graph_client.queries_run
        rows = retirements.retirement_counts(
            actor=OPERATOR, settings=memory_settings, evaluator=everyone_off, client=graph_client
        )
    finally:
        everyone_off.close()
    assert rows and all(r["gated_off"] for r in rows)
    assert graph_client.queries_run == before  # no user's graph was read


def test_the_fleet_count_reads_each_user_through_the_gate(
    retire_graph: RetireGraph, memory_settings, evaluator, graph_client
) -> None:
    rows = retirements.retirement_counts(
        actor=OPERATOR, settings=memory_settings, evaluator=evaluator, client=graph_client
    )
    [mine] = [r for r in rows if r["user_id"] == RETIRE_USER]
    assert mine["suspicious"] == 1 and mine["retired"] == 4 and mine["by_graphiti"] == 3
    assert mine["gated_off"] is False
    assert rows == sorted(
        rows, key=lambda r: (r["gated_off"], -(r.get("suspicious") or 0), r["user_id"])
    )
    views = [(r.outcome, r.detail["view"]) for r in memory_audit(memory_settings, RETIRE_USER)]
    assert views == [("ok", "retirements")]


def test_the_matcher_reads_label_free_and_paginated(
    retire_graph: RetireGraph, memory_settings, evaluator, graph_client, monkeypatch
) -> None:
    whole = look(memory_settings, evaluator, graph_client)
    monkeypatch.setattr(retirement_queries, "SLICE", 2)  # 15 nodes: eight slices
    monkeypatch.setattr(retiring_episode, "SLICE", 2)
    graph_client.stats.statements.clear()
    assert look(memory_settings, evaluator, graph_client) == whole
    statements = graph_client.stats.statements
    assert sum("e.expired_at IS NOT NULL" in c for c in statements) == 8
    assert sum("any(x IN e.episodes" in c for c in statements) == 8
    for cypher in statements:
        if "e.expired_at IS NOT NULL" in cypher or "any(x IN e.episodes" in cypher:
            assert "(a)-[e:RELATES_TO]->(b)" in cypher and "id(a) < $hi" in cypher
        assert "group_id" not in cypher


_PARAMS = {
    "statuses": [],
    "lo": 0,
    "hi": 5,
    "episodes": 5,
    "windows": [["a", "b"]],
    "wanted": ["x"],
    "uuid": "u",
    "uuids": ["u"],
    "source": "s",
    "target": "t",
    "name": "n",
    "invalid_at": "2020",
    "node": "n",
    "expired_at": "x",
    "limit": 5,
}


@pytest.mark.parametrize(
    ("cypher", "start"),
    [
        (retirement_queries.RETIRED_FACTS, "NodeByIdSeek"),
        (retiring_episode.FACTS_OF_EPISODES, "NodeByIdSeek"),
        (retiring_episode.EPISODES_IN_WINDOWS, "Node By Label Scan | (ep:Episodic)"),
        (retirement_queries.FACT_TEXTS, "All Node Scan"),
        (provenance_queries.FACT_SUMMARIES, "All Node Scan"),
        (provenance_queries.INVALIDATED_BY, "Node By Index Scan | (a:Entity)"),
        (provenance_queries.SAME_BATCH, "Node By Index Scan | (n:Entity)"),
    ],
)
def test_no_statement_reads_through_the_relationship_index(
    retire_graph: RetireGraph, graph_client, cypher: str, start: str
) -> None:
    """The relationship index loses node 0's facts after a restart (HAZARDS 1 and 8), and
    the range index returns wrong rows on string times: no statement may use either."""
    plan = graph_client.explain(retire_graph.group_id, cypher, _PARAMS)
    assert "Edge By Index" not in plan and start in plan
    if "Episodic" in cypher:
        assert "Index" not in plan  # created_at compared through toString: no range index


def test_a_retiring_fact_graphiti_deduplicated_is_found(
    retire_graph: RetireGraph, memory_settings, evaluator, graph_client
) -> None:
    """The episode wrote no new fact: it added itself to an old one, which retired another."""
    group, user = retire_graph.group_id, _node("Retire User")
    at = START + timedelta(hours=5)
    episode = EpisodicNode(
        uuid="00000000-0000-4000-9000-000000000105",
        name="episode gym",
        group_id=group,
        source=EpisodeType.message,
        source_description="chat thread retire-t1",
        content="I still prefer dark mode, not light mode.",
        created_at=at,
        valid_at=at,
    )
    first = retire_graph.episodes["first"]

    def edge(n: int, text: str, target: str, episodes: list[str], **kw) -> EntityEdge:
        return EntityEdge(
            uuid=f"00000000-0000-4000-9000-{n:012d}",
            source_node_uuid=user,
            target_node_uuid=target,
            name="PREFERS",
            fact=text,
            group_id=group,
            episodes=episodes,
            created_at=START + timedelta(seconds=10),
            valid_at=START,
            fact_embedding=deterministic_embedding(text),
            attributes={"status": "active"},
            **kw,
        )

    light = edge(
        230,
        "Retire User prefers light mode",
        _node("Paris"),
        [first],
        expired_at=at + timedelta(seconds=30),
        invalid_at=at,
    )
    dark = edge(204, "Retire User prefers dark mode", _node("dark mode"), [first, episode.uuid])
    write_graph(graph_client, group, episodes=[episode], facts=[light, dark])
    row = by_uuid(look(memory_settings, evaluator, graph_client))[light.uuid]
    assert row["kind"] == "graphiti" and row["suspicious"] is False
    assert row["episode_uuid"] == episode.uuid
    assert [f["uuid"] for f in row["retiring_facts"]] == [retire_graph.facts["dark"]]
    assert row["retiring_facts"][0]["shared"] == ["entity Retire User", "relation PREFERS"]


def test_one_failing_user_does_not_stop_the_fleet_count(
    retire_graph: RetireGraph,
    memory_settings,
    evaluator,
    graph_client,
    monkeypatch,
) -> None:
    other_graph = plant_retirements(graph_client, "retire_other")
    real = retirements.classify

    def slow_for_one(client, group_id, settings, user_id):  # the server stopped the query
        if user_id == RETIRE_USER:
            raise MemoryQueryTimeout("the query ran past the timeout")
        return real(client, group_id, settings, user_id)

    monkeypatch.setattr(retirements, "classify", slow_for_one)
    rows = retirements.retirement_counts(
        actor=OPERATOR, settings=memory_settings, evaluator=evaluator, client=graph_client
    )
    [mine] = [r for r in rows if r["user_id"] == RETIRE_USER]
    assert mine["error"] == "memory_query_timeout" and "retired" not in mine
    [other] = [r for r in rows if r["user_id"] == "retire_other"]
    graph_client.delete_graph(other_graph.group_id)
    assert other["error"] is None and other["retired"] == 4 and other["suspicious"] == 1


def test_an_end_without_a_pass_uses_the_provenance_matcher(
    retire_graph: RetireGraph, memory_settings, evaluator, graph_client
) -> None:
    """A fact with invalid_at but no expired_at: the newer fact on the same triple."""
    user, berlin = _node("Retire User"), _node("Berlin")

    def edge(n: int, text: str, valid_at, invalid_at=None) -> EntityEdge:
        return EntityEdge(
            uuid=f"00000000-0000-4000-9000-{n:012d}",
            source_node_uuid=user,
            target_node_uuid=berlin,
            name="WORKS_IN",
            fact=text,
            group_id=retire_graph.group_id,
            episodes=[retire_graph.episodes["moved"]],
            created_at=valid_at,
            valid_at=valid_at,
            invalid_at=invalid_at,
            fact_embedding=deterministic_embedding(text),
            attributes={"status": "active"},
        )

    later = START + timedelta(hours=5)
    old = edge(220, "Retire User works in Berlin part-time", START, invalid_at=later)
    new = edge(221, "Retire User works in Berlin full-time", later)
    write_graph(graph_client, retire_graph.group_id, facts=[old, new])
    row = by_uuid(look(memory_settings, evaluator, graph_client))[old.uuid]
    assert row["kind"] == "unmatched" and row["suspicious"] is False
    assert [f["uuid"] for f in row["retiring_facts"]] == [new.uuid]
    assert row["basis"] == "newer fact on the same source, name and target"
    assert row["episode"]["uuid"] == retire_graph.episodes["moved"]


def test_the_fleet_count_needs_an_operator(retire_graph: RetireGraph, memory_settings) -> None:
    with pytest.raises(Forbidden):
        retirements.retirement_counts(actor=VIEWER, settings=memory_settings)
    [row] = _scan_rows(memory_settings)
    assert (row.actor, row.outcome) == (VIEWER.id, "refused")


def _scan_rows(settings) -> list:
    with session_scope(settings) as session:
        return list(
            session.scalars(
                sa.select(AuditEntry).where(AuditEntry.action == retirements.SCAN_ACTION)
            )
        )


def _node(name: str) -> str:
    names = ["Retire User", "Paris", "Berlin", "Rust", "wasm", "Bob", "tea", "Alice", "jazz"]
    names += ["coffee", "dark mode"]
    return f"00000000-0000-4000-9000-{names.index(name) + 1:012d}"
