"""Tests for yuxi_dash.demo.graphs (and .flags): true schema via graphiti-core, every status and
source kind, planted oddities, the flag file."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from graphiti_core.nodes import EntityNode

from yuxi_dash.demo.flags import demo_flags
from yuxi_dash.demo.graph_build import build_demo_graph
from yuxi_dash.memory.graph.client import hits_connection
from yuxi_dash.memory.views.ratification import hits_key


def test_build_is_deterministic() -> None:
    now = datetime(2026, 6, 1, tzinfo=UTC)
    a = build_demo_graph("alice_chen", now=now)
    b = build_demo_graph("alice_chen", now=now)
    assert [e.uuid for e in a.facts] == [e.uuid for e in b.facts]
    assert a.entities[0].attributes["is_user"] is True  # the user comes first (node id 0)
    assert len(a.entities) > 10 and len(a.facts) > 20


def test_seeded_graph_is_graphiti_schema(demo_graphs, graph_client) -> None:
    assert demo_graphs["graphs"] == 5
    g = "user_alice_chen"
    one = graph_client.ro_value
    # graphiti-core's own reader accepts the nodes (fields, labels, embeddings)
    rows = graph_client.ro_rows(
        g,
        "MATCH (n:Entity) RETURN n.uuid AS uuid, n.name AS name, n.group_id AS group_id, "
        "labels(n) AS labels, n.created_at AS created_at, n.summary AS summary LIMIT 5",
    )
    nodes = [EntityNode(**{**r, "labels": r["labels"]}) for r in rows]
    assert all(n.group_id == g for n in nodes)
    assert one(g, "MATCH (n:Entity) WHERE n.name_embedding IS NULL RETURN count(n)") == 0
    assert one(g, "MATCH ()-[e:RELATES_TO]->() WHERE e.fact_embedding IS NULL RETURN count(e)") == 0
    statuses = {
        r["s"] for r in graph_client.ro_rows(g, "MATCH ()-[e:RELATES_TO]->() RETURN DISTINCT e.status AS s")
    }  # fmt: skip
    assert statuses == {"active", "tentative", "superseded", "contradicted", "retracted", None}
    kinds = {
        r["k"]
        for r in graph_client.ro_rows(
            g, "MATCH ()-[e:RELATES_TO]->() RETURN DISTINCT e.source_kind AS k"
        )
    }
    assert kinds == {"user_asserted", "assistant_derived", "tool_observed"}
    contents = [r["c"] for r in graph_client.ro_rows(g, "MATCH (e:Episodic) RETURN e.content AS c")]
    envelopes = [json.loads(c) for c in contents if c.startswith("{")]
    assert {e["memory_kind"] for e in envelopes} >= {"fact", "preference", "rule", "finding"}
    assert any(len(c.encode()) > 64 * 1024 for c in contents)
    labels = {
        label
        for r in graph_client.ro_rows(g, "MATCH (n:Entity) RETURN DISTINCT labels(n) AS l")
        for label in r["l"]
    }
    assert {"Person", "Project", "Concept", "Preference", "Rule"} <= labels  # alice's statements


def test_hits_and_flags(demo_graphs, memory_settings, graph_client) -> None:
    uuids = [
        r["u"]
        for r in graph_client.ro_rows(
            "user_alice_chen",
            "MATCH ()-[e:RELATES_TO {status: 'tentative'}]->() RETURN e.uuid AS u",
        )
    ]
    conn = hits_connection(memory_settings)
    values = conn.mget([hits_key("alice_chen", u) for u in uuids])
    assert any(v is not None for v in values) and any(v is None for v in values)
    assert 0 < conn.ttl(
        hits_key("alice_chen", next(u for u, v in zip(uuids, values, strict=True) if v))
    )
    conn.close()
    flags = demo_flags(["a", "b", "c", "d"])
    assert flags["flags"]["graphiti-memory"]["targets"] == [{"values": ["d"], "variation": 1}]


def test_reseeding_skips_existing_graphs(demo_graphs, memory_settings, graph_client, tmp_path):
    from yuxi_dash.demo.graphs import seed_demo_graphs

    before = graph_client.ro_value("user_alice_chen", "MATCH (n) RETURN count(n)")
    report = seed_demo_graphs(
        memory_settings, ["alice_chen"], client=graph_client, flags_path=tmp_path / "f.json"
    )
    assert report["graphs"] == 0 and report["skipped_existing"] == 1
    assert graph_client.ro_value("user_alice_chen", "MATCH (n) RETURN count(n)") == before


def test_shipped_demo_flag_file_matches_the_demo_users() -> None:
    """`serve --demo` gates memory by the shipped file: it must describe DEMO_USERS."""
    import json

    from yuxi_dash.demo.flags import DEMO_FLAGS_FILE
    from yuxi_dash.sim.story import DEMO_USERS

    assert json.loads(DEMO_FLAGS_FILE.read_text()) == demo_flags(list(DEMO_USERS))


def test_user_asserted_facts_are_the_users_statements_plus_one_planted() -> None:
    """The graph tells the chats' story (yuxi_dash.sim.story): same statements, one suspect."""
    from yuxi_dash.demo.plan import first_exchanges, planted_facts
    from yuxi_dash.sim.story import user_statements

    now = datetime(2026, 6, 1, tzinfo=UTC)
    graph = build_demo_graph("bruno_silva", now=now, large_episode=True)
    statements = user_statements("bruno_silva")
    suspect, derived = planted_facts("bruno_silva")
    asserted = [e for e in graph.facts if e.attributes["source_kind"] == "user_asserted"]
    said = {s.fact_for("Bruno Silva") for s in statements}
    assert {e.fact for e in asserted} - {e.fact for e in asserted if e.name == "WORKS_WITH"} == (
        said | {suspect.fact_for("Bruno Silva")}
    )
    assert all(e.attributes["status"] == "active" for e in asserted)
    told = [e for e in graph.facts if e.fact == derived.fact_for("Bruno Silva")]
    assert [e.attributes["source_kind"] for e in told] == ["assistant_derived"]
    # each statement's fact comes from the episode of the user's message that says it
    episodes = {ep.uuid: ep for ep in graph.episodes}
    messages = {ex.asked for ex in first_exchanges("bruno_silva")}
    for statement in statements:
        edges = [e for e in asserted if e.fact == statement.fact_for("Bruno Silva")]
        assert edges
        for edge in edges:
            episode = episodes[edge.attributes["provenance"]]
            content = episode.content
            body = json.loads(content)["content"] if content.startswith("{") else content[6:]
            assert body in messages and statement.said.lower() in body.lower()
            target = next(n for n in graph.entities if n.uuid == edge.target_node_uuid)
            assert (target.name, target.labels) == (statement.target, [statement.label])
    # the large episode keeps its size
    assert any(len(ep.content) > 64 * 1024 for ep in graph.episodes)
