"""The warm-context block: exact format, BM25 via graphiti-core, only the user's graph."""

from __future__ import annotations

from tests.fixtures.graph import DEMO_TEST_USERS
from yuxi_dash.memory.views.warm_context import (
    SEARCH_METHOD,
    build_warm_context,
    format_temporal_context,
    why_not_live,
)


def test_exact_format() -> None:
    block = format_temporal_context(
        [
            {"fact": "A likes tea", "valid_at": "2026-01-01T00:00:00+00:00", "invalid_at": None},
            {"fact": "A left Acme", "valid_at": None, "invalid_at": "2026-02-01T00:00:00+00:00"},
        ],
        [{"created_at": "2026-03-01T00:00:00+00:00", "content": "x" * 600}],
    )
    assert block == "\n".join(
        [
            "<temporal_context>",
            "<FACTS>",
            "- A likes tea (2026-01-01T00:00:00+00:00 — present)",
            "- A left Acme (unknown — 2026-02-01T00:00:00+00:00)",
            "</FACTS>",
            "<RECENT_EPISODES>",
            "- [2026-03-01T00:00:00+00:00] " + "x" * 500,
            "</RECENT_EPISODES>",
            "</temporal_context>",
        ]
    )


def test_bm25_search_on_the_users_graph(demo_graphs, graph_client, memory_settings) -> None:
    # alice said "I prefer answers in Polish." (yuxi_dash.sim.story)
    context = build_warm_context(graph_client, "user_alice_chen", "answers Polish", max_facts=5)
    assert context.method == SEARCH_METHOD and "BM25" in context.note
    assert 0 < len(context.facts) <= 5
    assert all("answers" in f["fact"] or "Polish" in f["fact"] for f in context.facts)
    own = graph_client.ro_value("user_alice_chen", "MATCH (n:Entity {is_user: true}) RETURN n.name")
    assert all("Bruno" not in f["fact"] for f in context.facts) and own == "Alice Chen"
    assert len(context.episodes) == 5
    assert context.block.count("\n- [") == 5
    assert context.block.startswith("<temporal_context>\n<FACTS>\n- ")


def test_why_a_fact_is_not_live() -> None:
    assert why_not_live({"status": "active"}) is None
    assert why_not_live({"status": None, "expired_at": None, "forgotten_at": None}) is None
    assert why_not_live({"status": "retracted", "expired_at": "2026-01-01"}) == "retracted"
    assert why_not_live({"status": "active", "forgotten_at": "2026-01-01"}) == "forgotten"
    assert why_not_live({"status": "tentative", "expired_at": "2026-01-01"}) == "expired"


def test_facts_no_longer_live_are_marked_and_still_in_the_block(demo_graphs, graph_client) -> None:
    """The block is what the search finds, live or not; each fact says whether it is live."""
    retracted = (
        "MATCH ()-[e:RELATES_TO]->() WHERE e.status = 'retracted' "
        "RETURN e.uuid AS uuid, e.fact AS fact LIMIT 1"
    )
    group, dead = next(
        (group, rows)
        for group in (f"user_{user}" for user in DEMO_TEST_USERS)
        if (rows := graph_client.ro_rows(group, retracted))
    )
    context = build_warm_context(graph_client, group, dead[0]["fact"], max_facts=20)
    found = {fact["uuid"]: fact for fact in context.facts}
    assert found[dead[0]["uuid"]]["not_live"] == "retracted"
    assert f"- {dead[0]['fact']} (" in context.block
    for fact in context.facts:
        live = fact["status"] not in {"retracted", "rejected", "superseded", "contradicted"}
        live = live and not fact["expired_at"] and not fact["forgotten_at"]
        assert (fact["not_live"] is None) == live


def test_hostile_query_text_is_harmless(demo_graphs, graph_client) -> None:
    before = graph_client.ro_value("user_alice_chen", "MATCH (n) RETURN count(n)")
    context = build_warm_context(
        graph_client,
        "user_alice_chen",
        "') CALL db.idx.fulltext.drop('RELATES_TO') //",
        max_facts=5,
    )
    assert context.block.startswith("<temporal_context>")
    assert graph_client.ro_value("user_alice_chen", "MATCH (n) RETURN count(n)") == before


# graphiti-core's edge_fulltext_search shape: filter every hit, then sort (the statement
# FACT_FULLTEXT_SEARCH sorts first so the filter stops at the LIMIT).
_FILTER_THEN_SORT = """\
CALL db.idx.fulltext.queryRelationships('RELATES_TO', $query)
YIELD relationship AS rel, score
WITH rel AS e, score, startNode(rel) AS n, endNode(rel) AS m
WHERE n:Entity AND m:Entity AND e.group_id IN $group_ids
RETURN e.uuid AS uuid, e.name AS name, e.fact AS fact,
       e.valid_at AS valid_at, e.invalid_at AS invalid_at,
       e.status AS status, e.expired_at AS expired_at, e.forgotten_at AS forgotten_at
ORDER BY score DESC
LIMIT $limit"""


def test_sorting_before_the_filter_finds_the_same_facts(demo_graphs, graph_client) -> None:
    from graphiti_core.driver.falkordb.fulltext import build_falkor_fulltext_query

    from yuxi_dash.memory.views.warm_context import bm25_fact_search

    group = "user_alice_chen"
    stored = graph_client.ro_rows(group, "MATCH ()-[e:RELATES_TO]->() RETURN e.fact AS f LIMIT 3")
    texts = ["answers Polish", *(" ".join(row["f"].split()[:3]) for row in stored)]
    for text in texts:
        query = build_falkor_fulltext_query(text, [group])
        params = {"query": query, "group_ids": [group], "limit": 500}
        old = graph_client.ro_rows(group, _FILTER_THEN_SORT, params)
        new = bm25_fact_search(graph_client, group, text, limit=500)
        assert old and sorted(map(str, old)) == sorted(map(str, new))
        scored = graph_client.ro_rows(
            group, _FILTER_THEN_SORT.replace("e.invalid_at AS invalid_at", "score"), params
        )
        score = {row["uuid"]: row["score"] for row in scored}
        first = bm25_fact_search(graph_client, group, text, limit=3)
        best = sorted(score.values(), reverse=True)[:3]  # ties may come in any order
        assert sorted((score[row["uuid"]] for row in first), reverse=True) == best
