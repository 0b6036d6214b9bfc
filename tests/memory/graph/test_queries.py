"""Every view query against hand-written Cypher on a seeded demo graph."""

from __future__ import annotations

from typing import Any

import pytest

from yuxi_dash.memory.graph import queries
from yuxi_dash.memory.graph.client import GraphClient

G = "user_alice_chen"


def one(client: GraphClient, cypher: str, params: dict[str, Any] | None = None) -> Any:
    return client.ro_value(G, cypher, params)


@pytest.fixture
def client(demo_graphs, graph_client: GraphClient) -> GraphClient:
    return graph_client


def test_counts_match_hand_written_cypher(client: GraphClient) -> None:
    counts = queries.counts(client, G)
    assert counts.entities == one(client, "MATCH (n:Entity) RETURN count(n)")
    assert counts.episodes == one(client, "MATCH (n:Episodic) RETURN count(n)")
    assert counts.communities == one(client, "MATCH (n:Community) RETURN count(n)")
    assert counts.relates_to_edges == one(
        client, "MATCH (:Entity)-[e:RELATES_TO]->(:Entity) RETURN count(e)"
    )
    assert counts.mentions_edges == one(
        client, "MATCH (:Episodic)-[e:MENTIONS]->(:Entity) RETURN count(e)"
    )
    undirected = one(client, "MATCH (:Entity)-[e:RELATES_TO]-(:Entity) RETURN count(e)")
    assert undirected == 2 * counts.relates_to_edges  # why counts must be directed
    live = one(
        client,
        "MATCH ()-[e:RELATES_TO]->() WHERE e.expired_at IS NULL AND e.forgotten_at IS NULL "
        "AND (e.status IS NULL OR e.status IN ['active', 'tentative']) RETURN count(e)",
    )
    assert counts.live_facts == live
    assert counts.live_facts + counts.expired_facts == counts.relates_to_edges
    for status in ("active", "tentative", "superseded", "contradicted", "retracted"):
        expected = one(
            client, "MATCH ()-[e:RELATES_TO]->() WHERE e.status = $s RETURN count(e)", {"s": status}
        )
        assert counts.facts_by_status[status] == expected > 0
    assert counts.facts_by_status["unset"] == one(
        client, "MATCH ()-[e:RELATES_TO]->() WHERE e.status IS NULL RETURN count(e)"
    )
    for kind in ("user_asserted", "assistant_derived", "tool_observed"):
        expected = one(
            client,
            "MATCH ()-[e:RELATES_TO]->() WHERE e.source_kind = $k RETURN count(e)",
            {"k": kind},
        )
        assert counts.facts_by_source_kind[kind] == expected > 0


def test_entity_page_search_and_pagination(client: GraphClient) -> None:
    rows, total = queries.entity_page(client, G, search="AN", limit=2)
    expected = one(client, "MATCH (n:Entity) WHERE toLower(n.name) CONTAINS 'an' RETURN count(n)")
    assert total == expected >= 3
    assert len(rows) == 2 and all("an" in r["name"].lower() for r in rows)
    second, _ = queries.entity_page(client, G, search="an", limit=2, offset=2)
    assert {r["uuid"] for r in rows}.isdisjoint({r["uuid"] for r in second})
    everything, total_all = queries.entity_page(client, G, limit=500)
    assert total_all == one(client, "MATCH (n:Entity) RETURN count(n)")
    assert [r["name"] for r in everything] == sorted(r["name"] for r in everything)
    assert all("name_embedding" not in r for r in everything)


def test_hostile_search_text_is_only_a_parameter(client: GraphClient) -> None:
    before = one(client, "MATCH (n) RETURN count(n)")
    for text in ("') MATCH (n) DETACH DELETE n //", "\\' OR 1=1 --", "${x}", "../../etc"):
        rows, total = queries.entity_page(client, G, search=text)
        assert rows == [] and total == 0
    assert one(client, "MATCH (n) RETURN count(n)") == before


def test_hub_facts_are_directed_and_in_created_order(client: GraphClient) -> None:
    hub = one(client, "MATCH (n:Entity {is_user: true}) RETURN n.uuid")
    rows, total = queries.entity_facts(client, G, hub, limit=500)
    out_count = one(client, "MATCH (n {uuid: $u})-[e:RELATES_TO]->() RETURN count(e)", {"u": hub})
    in_count = one(client, "MATCH (n {uuid: $u})<-[e:RELATES_TO]-() RETURN count(e)", {"u": hub})
    assert total == len(rows) == out_count + in_count
    assert sum(r["role"] == "source" for r in rows) == out_count
    assert [r["created_at"] for r in rows] == sorted(r["created_at"] for r in rows)
    user_name = one(client, "MATCH (n {uuid: $u}) RETURN n.name", {"u": hub})
    assert all(r["source"] == user_name for r in rows if r["role"] == "source")


def test_entity_facts_time_filter(client: GraphClient) -> None:
    hub = one(client, "MATCH (n:Entity {is_user: true}) RETURN n.uuid")
    cutoff = one(
        client, "MATCH (n {uuid: $u})-[e:RELATES_TO]->() RETURN min(e.invalid_at)", {"u": hub}
    )
    rows, total = queries.entity_facts(client, G, hub, valid_from=cutoff, limit=500)
    expected = one(
        client,
        "MATCH (n {uuid: $u})-[e:RELATES_TO]-() "
        "WHERE e.invalid_at IS NULL OR e.invalid_at >= $c RETURN count(e)",
        {"u": hub, "c": cutoff},
    )
    assert total == expected
    assert all(r["invalid_at"] is None or r["invalid_at"] >= cutoff for r in rows)
    rows, total = queries.entity_facts(client, G, hub, valid_to="2000-01-01", limit=500)
    expected = one(
        client,
        "MATCH (n {uuid: $u})-[e:RELATES_TO]-() "
        "WHERE e.valid_at IS NULL OR e.valid_at <= '2000-01-01' RETURN count(e)",
        {"u": hub},
    )
    assert total == expected > 0  # an unknown valid_at may overlap any window
    assert all(r["valid_at"] is None for r in rows)


def test_distributions_and_duplicates(client: GraphClient) -> None:
    names = queries.fact_name_distribution(client, G, limit=100)
    for row in names:
        assert row["facts"] == one(
            client, "MATCH ()-[e:RELATES_TO {name: $n}]->() RETURN count(e)", {"n": row["name"]}
        )
    dups = queries.duplicates(client, G, limit=500)
    expected_triples = one(
        client,
        "MATCH (a)-[e:RELATES_TO]->(b) WITH a, e.name AS n, b, count(e) AS c WHERE c > 1 "
        "RETURN count(*)",
    )
    assert len(dups["same_triple"]) == expected_triples > 0
    expected_text = one(
        client,
        "MATCH ()-[e:RELATES_TO]->() WITH e.fact AS f, count(e) AS c WHERE c > 1 RETURN count(*)",
    )
    assert len(dups["same_fact_text"]) == expected_text > 0
    mirrored = sum(r["pairs"] for r in dups["mirrored"])
    expected_mirrored = one(
        client,
        "MATCH (a)-[e:RELATES_TO]->(b)-[f:RELATES_TO]->(a) WHERE e.name = f.name RETURN count(*)",
    )
    assert mirrored * 2 == expected_mirrored and mirrored >= 1  # the demo's planted pair


def test_tentative_communities_and_episodes(client: GraphClient) -> None:
    tentative = queries.tentative_facts(client, G, limit=500)
    assert len(tentative) == one(
        client, "MATCH ()-[e:RELATES_TO {status: 'tentative'}]->() RETURN count(e)"
    )
    communities = queries.community_page(client, G)
    for row in communities:
        assert row["members"] == one(
            client,
            "MATCH (:Community {uuid: $u})-[:HAS_MEMBER]->(m:Entity) RETURN count(m)",
            {"u": row["uuid"]},
        )
        members = queries.community_members(client, G, row["uuid"])
        assert len(members) == row["members"]
    episodes = queries.episode_page(client, G, limit=5)
    newest = one(client, "MATCH (e:Episodic) RETURN max(e.created_at)")
    assert episodes[0]["created_at"] == newest
    mentions = queries.episode_mentions(client, G, [e["uuid"] for e in episodes])
    for episode in episodes:
        assert mentions[episode["uuid"]]["mentions"] == one(
            client,
            "MATCH (:Episodic {uuid: $u})-[:MENTIONS]->(n) RETURN count(n)",
            {"u": episode["uuid"]},
        )


def test_no_view_returns_embeddings(client: GraphClient) -> None:
    for name, statement in queries.ALL_QUERIES.items():
        assert "embedding" not in statement, name


def test_fact_pages_carry_the_right_ends(client: GraphClient) -> None:
    page = queries.facts_page(client, G, limit=20)
    assert [r["created_at"] for r in page] == sorted((r["created_at"] for r in page), reverse=True)
    newest = one(client, "MATCH ()-[e:RELATES_TO]->() RETURN max(e.created_at)")
    assert page[0]["created_at"] == newest
    for row in page + queries.tentative_facts(client, G, limit=20):
        ends = client.ro_rows(
            G,
            "MATCH (a)-[e:RELATES_TO {uuid: $u}]->(b) RETURN a.name AS s, b.name AS t",
            {"u": row["uuid"]},
        )
        assert ends == [{"s": row["source"], "t": row["target"]}]


def test_same_fact_text_rows_match_hand_written_grouping(client: GraphClient) -> None:
    rows = queries.duplicates(client, G, limit=500)["same_fact_text"]
    expected = client.ro_rows(
        G,
        "MATCH ()-[e:RELATES_TO]->() WHERE e.fact IS NOT NULL "
        "WITH e.fact AS f, count(e) AS c WHERE c > 1 "
        "RETURN left(f, 300) AS fact, c AS copies ORDER BY copies DESC, fact",
    )
    assert rows == expected and rows


def test_same_fact_text_counts_every_copy_and_only_repeats(client: GraphClient) -> None:
    """Texts of equal length that differ, triplicates, and facts without text."""
    g = "user_dup_text_case"
    facts = ["ab", "ba", "ab", "ab", "xyz", "xyz", "unique text", None, None, "ab "]
    try:
        client.write(
            g,
            "CREATE (a:Entity {uuid: 'a', name: 'a'}), (b:Entity {uuid: 'b', name: 'b'}) "
            "WITH a, b UNWIND range(0, size($facts) - 1) AS i "
            "CREATE (a)-[e:RELATES_TO {uuid: toString(i), name: 'R'}]->(b) "
            "SET e.fact = $facts[i]",
            {"facts": facts},
        )
        rows = client.ro_rows(g, queries.DUPLICATE_FACT_TEXT, {"limit": 50})
        assert rows == [{"fact": "ab", "copies": 3}, {"fact": "xyz", "copies": 2}]
        assert client.ro_rows(g, queries.DUPLICATE_FACT_TEXT, {"limit": 1}) == rows[:1]
    finally:
        client.delete_graph(g)


def test_tentative_pages_cover_every_tentative_fact_once(client: GraphClient) -> None:
    expected = {
        r["u"]: r["c"]
        for r in client.ro_rows(
            G,
            "MATCH ()-[e:RELATES_TO {status: 'tentative'}]->() RETURN e.uuid AS u, e.created_at AS c",
        )
    }
    seen: list[str] = []
    offset = 0
    while page := queries.tentative_facts(client, G, limit=3, offset=offset):
        assert len(page) <= 3
        keys = [(r["created_at"], r["uuid"]) for r in page]
        assert keys == sorted(keys)  # each page reads oldest first
        assert all(expected[r["uuid"]] == r["created_at"] for r in page)
        seen += [r["uuid"] for r in page]
        offset += 3
    assert sorted(seen) == sorted(expected) and len(expected) > 3


def test_tentative_oldest_first_across_the_graph(client: GraphClient) -> None:
    rows = queries.tentative_facts(client, G, limit=4, oldest_first=True)
    expected = client.ro_rows(
        G,
        "MATCH ()-[e:RELATES_TO]->() WHERE e.status = 'tentative' "
        "RETURN e.uuid AS u ORDER BY e.created_at, e.uuid LIMIT 4",
    )
    assert [r["uuid"] for r in rows] == [r["u"] for r in expected] and len(rows) == 4


def test_index_path_probe_on_a_healthy_graph(client: GraphClient) -> None:
    via_index, label_free = queries.index_path_probe(client, G)
    assert (
        via_index
        == label_free
        == one(client, "MATCH (n)-[e:RELATES_TO]->() WHERE id(n) = 0 RETURN count(e)")
    )
