"""Distribution parts on a real FalkorDB: the same rows as the old statements, cold and warm,
and a kept part goes stale on every write graphiti-core makes (a new fact, a fact invalidated
in place, a status changed in place), never on a read."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from falkordb.asyncio import FalkorDB as AsyncFalkorDB
from graphiti_core.driver.falkordb_driver import FalkorDriver
from graphiti_core.edges import EntityEdge
from graphiti_core.nodes import EntityNode

from tests.fixtures.graph import graph_settings, make_client
from yuxi_dash.demo.graph_writer import create_indexes, write_graph
from yuxi_dash.memory.cache import distributions, graph_changes
from yuxi_dash.memory.graph import queries
from yuxi_dash.memory.graph.client import GraphClient
from yuxi_dash.memory.graph.server import ServerHandle, ensure_server, stop_server

G = "user_memperf_dist"
DEMO = "user_alice_chen"
NOW = datetime(2026, 6, 1, tzinfo=UTC)
STATUSES = ("active", "tentative", "superseded", None)
KINDS = ("user_asserted", "assistant_derived", "tool_observed")


def entity(i: int) -> EntityNode:
    return EntityNode(
        uuid=f"n{i}", name=f"entity {i % 7}", group_id=G, labels=["Person"], created_at=NOW
    )


def fact(i: int, source: int, target: int, *, name: str = "", text: str = "") -> EntityEdge:
    status = STATUSES[i % len(STATUSES)]
    attributes: dict[str, Any] = {"source_kind": KINDS[i % len(KINDS)]}
    if status is not None:
        attributes["status"] = status
    expired = NOW + timedelta(days=1) if status == "superseded" else None
    return EntityEdge(
        uuid=f"e{i}",
        source_node_uuid=f"n{source}",
        target_node_uuid=f"n{target}",
        name=name or f"REL_{i % 5}",
        fact=text or f"fact {i}",
        group_id=G,
        episodes=[],
        created_at=NOW - timedelta(minutes=i),
        valid_at=NOW - timedelta(minutes=i),
        expired_at=expired,
        invalid_at=expired,
        fact_embedding=[0.1] * 4,
        attributes=attributes,
    )


def seed_edges() -> list[EntityEdge]:
    # No repeats in the background: each source meets six different targets.
    edges = [fact(i, i % 20, (i % 20 + i // 20 + 1) % 20) for i in range(120)]
    # Planted duplicates: a repeated triple, a repeated text, a mirrored pair.
    edges += [fact(200 + k, 1, 2, name="KNOWS") for k in range(3)]
    edges += [fact(300 + k, k, k + 5, name="LIKES", text="the user likes tea") for k in range(4)]
    edges += [fact(400, 8, 9, name="SIBLING_OF"), fact(401, 9, 8, name="SIBLING_OF")]
    return edges


@pytest.fixture
def graph(falkordb_server: ServerHandle, graph_client: GraphClient) -> Iterator[GraphClient]:
    graph_client.delete_graph(G)
    create_indexes(graph_client, G)
    write_graph(graph_client, G, entities=[entity(i) for i in range(20)], facts=seed_edges())
    yield graph_client
    graph_client.delete_graph(G)


SCANS = {*distributions.PARTS.values(), queries.FACT_RELATIONS}


def scans(sent: list[str]) -> int:
    """How many of the statements `sent` were a part's scan."""
    return sum(statement in SCANS for statement in sent)


def cold_scans(names: list[str]) -> int:
    """How many scans a view of `names` runs when none is kept (ONE_SCAN parts share one)."""
    one = set(distributions.ONE_SCAN)
    return len(set(names)) - (len(one) - 1 if one <= set(names) else 0)


def old_rows(client: GraphClient, group: str, limit: int = 500) -> dict[str, list[dict[str, Any]]]:
    """The statements the views ran before the cache, run directly."""
    return {
        "breakdown": client.ro_rows(group, queries.FACT_BREAKDOWN),
        "names": queries.fact_name_distribution(client, group, limit=limit),
        **queries.duplicates(client, group, limit=limit),
        "newest_facts": queries.facts_page(client, group, limit=limit),
    }


def same(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    # Rows tied on every ORDER BY key may come back in either order: compare as sorted lists.
    return sorted(tuple(sorted(row.items())) for row in rows)


def assert_same_as_old(client: GraphClient, group: str, found: dict[str, Any]) -> None:
    old = old_rows(client, group)
    for part, rows in found.items():
        assert same(rows) == same(old[part]), part


def test_parts_are_the_old_statements_rows_cold_and_warm(
    demo_graphs: dict[str, Any], graph: GraphClient
) -> None:
    for group in (G, DEMO):
        cache = distributions.SummaryCache()
        cold = distributions.parts(graph, group, list(distributions.PARTS), limit=500, cache=cache)
        assert all(cold.values()) or group == DEMO
        assert_same_as_old(graph, group, cold)
        before = len(graph.stats.statements)
        warm = distributions.parts(graph, group, list(distributions.PARTS), limit=500, cache=cache)
        sent = graph.stats.statements[before:]
        assert warm == cold and cache.hits == len(distributions.PARTS)
        assert scans(sent) == 0  # nothing scanned when warm
        assert distributions.counts(graph, group, cache=cache) == queries.counts(graph, group)
        relations = distributions.relations(graph, group, limit=500, cache=cache)
        assert relations["names"] == cold["names"]
        assert relations["duplicates"]["same_fact_text"] == cold["same_fact_text"]
    planted = distributions.parts(graph, G, ["same_triple", "same_fact_text", "mirrored"])
    assert [r["copies"] for r in planted["same_triple"]] == [3]
    assert planted["same_fact_text"] == [{"fact": "the user likes tea", "copies": 4}]
    assert len(planted["mirrored"]) == 1


def graphiti(handle: ServerHandle, work: Any) -> Any:
    """Run `work(driver)` with graphiti-core's own FalkorDB driver on G."""

    async def job() -> Any:
        db = AsyncFalkorDB(**handle.redis_kwargs())  # type: ignore[arg-type]
        try:
            return await work(FalkorDriver(falkor_db=db, database=G))
        finally:
            await db.aclose()

    return asyncio.run(job())


def test_every_graphiti_write_makes_kept_parts_stale(
    falkordb_server: ServerHandle, graph: GraphClient
) -> None:
    cache = distributions.SummaryCache()
    names = list(distributions.PARTS)

    def view() -> tuple[dict[str, list[dict[str, Any]]], int]:
        """The parts, checked against the old statements, and how many parts were scanned."""
        before = len(graph.stats.statements)
        found = distributions.parts(graph, G, names, limit=500, cache=cache)
        sent = graph.stats.statements[before:]
        assert_same_as_old(graph, G, found)
        return found, scans(sent)

    first, scanned = view()
    assert scanned == cold_scans(names)
    graph.ro_rows(G, "MATCH ()-[e:RELATES_TO]->() RETURN count(e.fact)")  # reads
    graph.ro_rows(G, queries.FACTS_PAGE, {"limit": 10, "offset": 0})
    assert view() == (first, 0)  # reads leave the parts kept

    # 1. A new fact, written with graphiti-core's bulk statement.
    write_graph(graph, G, facts=[fact(500, 3, 4, name="KNOWS", text="the user likes tea")])
    second, scanned = view()
    assert scanned == cold_scans(names) and second != first

    # 2. A fact invalidated in place by graphiti-core (EntityEdge.save on the same uuid):
    #    same fact count, same created_at.
    async def invalidate(driver: FalkorDriver) -> None:
        edge = await EntityEdge.get_by_uuid(driver, "e0")
        assert edge.expired_at is None
        edge.invalid_at = edge.expired_at = NOW + timedelta(days=2)
        await edge.save(driver)

    fingerprint = graph_changes.fingerprint(graph, G)
    graphiti(falkordb_server, invalidate)
    moved = graph_changes.fingerprint(graph, G)
    assert fingerprint is not None and moved is not None
    assert (moved.facts, moved.nodes) == (fingerprint.facts, fingerprint.nodes)
    assert moved != fingerprint
    third, scanned = view()
    assert scanned == cold_scans(names) and third["breakdown"] != second["breakdown"]

    # 3. A status changed in place (graphiti-core saves the edge with a new attribute value).
    async def retract(driver: FalkorDriver) -> None:
        edge = await EntityEdge.get_by_uuid(driver, "e1")
        edge.attributes["status"] = "retracted"
        await edge.save(driver)

    graphiti(falkordb_server, retract)
    fourth, scanned = view()
    assert scanned == cold_scans(names)
    assert "retracted" in {row["status"] for row in fourth["breakdown"]}
    assert "retracted" not in {row["status"] for row in third["breakdown"]}
    assert view() == (fourth, 0)


@pytest.mark.services  # starts its own FalkorDB server
def test_a_restart_changes_the_fingerprint_and_the_parts_stay_right(tmp_path: Path) -> None:
    """After a restart from the RDB the relationship index drifts; the parts are label-free."""
    settings = graph_settings(tmp_path / "fdb")
    cache = distributions.SummaryCache()
    try:
        client = make_client(ensure_server(settings), settings)
        create_indexes(client, G)
        write_graph(client, G, entities=[entity(i) for i in range(20)], facts=seed_edges())
        before = graph_changes.fingerprint(client, G)
        kept = distributions.parts(client, G, list(distributions.PARTS), limit=500, cache=cache)
        client.db.connection.execute_command("SAVE")
        client.close()
        stop_server(settings)

        client = make_client(ensure_server(settings), settings)
        after = graph_changes.fingerprint(client, G)
        assert before is not None and after is not None and after.run_id != before.run_id
        again = distributions.parts(client, G, list(distributions.PARTS), limit=500, cache=cache)
        assert cache.hits == 0  # nothing kept from before the restart was used
        assert {k: same(v) for k, v in again.items()} == {k: same(v) for k, v in kept.items()}
        assert_same_as_old(client, G, again)
        client.close()
    finally:
        stop_server(settings)


def test_views_arriving_together_share_one_scan(
    graph: GraphClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a write, views of the same part at once run its statement once, not once each."""
    real = distributions.one_statement_rows

    def slow(*args: Any) -> Any:  # the real statement on the real graph, only later
        time.sleep(0.3)
        return real(*args)

    monkeypatch.setattr(distributions, "one_statement_rows", slow)
    cache = distributions.SummaryCache()
    names = ["breakdown", "same_triple"]
    found: list[dict[str, Any]] = []

    def view() -> None:
        found.append(distributions.parts(graph, G, names, limit=500, cache=cache, share=False))

    threads = [threading.Thread(target=view) for _ in range(3)]
    before = len(graph.stats.statements)
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sent = graph.stats.statements[before:]
    assert sent.count(queries.FACT_BREAKDOWN) == 1
    assert sent.count(queries.DUPLICATE_TRIPLES) == 1
    assert len(found) == 3 and found[0] == found[1] == found[2]
    assert_same_as_old(graph, G, found[0])


def test_a_views_missing_parts_run_at_once_with_the_same_rows(
    graph: GraphClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Facts page's parts are read at once (two statements are seen in flight together),
    names, same triple and mirrored by one scan; the rows are those read one after another."""
    real = graph.ro_rows
    lock = threading.Lock()
    both = threading.Event()
    in_flight: list[str] = []
    most = [0]

    def watched(group: str, cypher: str, *args: Any, **kwargs: Any) -> Any:
        if cypher not in SCANS:
            return real(group, cypher, *args, **kwargs)
        with lock:
            in_flight.append(cypher)
            most[0] = max(most[0], len(in_flight))
            if len(in_flight) >= 2:
                both.set()
        both.wait(10)  # the first one waits (at most 10 s) for a second to start
        try:
            return real(group, cypher, *args, **kwargs)
        finally:
            with lock:
                in_flight.remove(cypher)

    monkeypatch.setattr(graph, "ro_rows", watched)
    before = len(graph.stats.statements)
    at_once = distributions.relations(graph, G, limit=500, cache=distributions.SummaryCache())
    sent = graph.stats.statements[before:]
    assert most[0] >= 2
    assert sent.count(queries.FACT_RELATIONS) == 1 and scans(sent) == 2
    monkeypatch.setattr(distributions, "PARALLEL_PARTS", 1)
    one_by_one = distributions.relations(graph, G, limit=500, cache=distributions.SummaryCache())
    assert at_once == one_by_one
    assert_same_as_old(graph, G, {"names": at_once["names"], **at_once["duplicates"]})


DUPS = "user_memperf_dups"


def test_the_one_scan_gives_the_three_statements_rows(graph: GraphClient) -> None:
    """On a graph of many repeated triples (copies 1-5, names and sources tied, an unnamed
    entity, expired facts) and mirrored pairs (several copies each way, entities sharing
    a name), every limit gives the rows of the names, same triple and mirrored statements."""
    nodes = [
        EntityNode(uuid=f"d{i}", name=f"e{i % 9}", group_id=DUPS, labels=[], created_at=NOW)
        for i in range(30)
    ]
    nodes.append(EntityNode(uuid="d30", name="", group_id=DUPS, labels=[], created_at=NOW))
    ends = []
    for i in range(60):
        copies = 1 if i % 7 == 0 else 2 + i % 4
        ends += [(i, f"d{i % 31}", f"d{(i * 7 + 3) % 31}", f"R{i % 4}")] * copies
    for k, (a, b) in enumerate([(1, 2), (10, 11), (3, 30), (5, 14)]):  # d1/d10, d2/d11: same names
        ends += [(100 + k, f"d{a}", f"d{b}", "MIRROR")] * (1 + k % 2)
        ends += [(200 + k, f"d{b}", f"d{a}", "MIRROR")] * (2 + k % 3)
    edges = []
    for n, (i, source, target, name) in enumerate(ends):
        edge = fact(1000 + n, 0, 0, name=name, text=f"text {i}")
        edge.source_node_uuid, edge.target_node_uuid, edge.group_id = source, target, DUPS
        edges.append(edge)
    try:
        write_graph(graph, DUPS, entities=nodes, facts=edges)
        graph.write(DUPS, "MATCH (n {uuid: 'd30'}) REMOVE n.name")  # an entity without a name
        for limit in (1, 2, 3, 7, 50, 500):
            found = distributions.relations_in_one_scan(graph, DUPS, limit=limit)
            old = old_rows(graph, DUPS, limit)
            assert found["names"] == old["names"], limit
            for part, keys in (("same_triple", 3), ("mirrored", 2)):  # tied rows in any order
                order = ["copies" if part == "same_triple" else "pairs", "source", "name"]
                got = [[r[k] for k in order[:keys]] for r in found[part]]
                assert got == [[r[k] for k in order[:keys]] for r in old[part]], (part, limit)
            if limit == 500:
                for part in ("same_triple", "mirrored"):
                    as_text = [
                        sorted(repr(sorted(r.items())) for r in rows)
                        for rows in (found[part], old[part])
                    ]
                    assert as_text[0] == as_text[1], part
                assert len(found["same_triple"]) > 30 and len(found["mirrored"]) == 3
                assert None in {r["source"] for r in found["same_triple"]}
    finally:
        graph.delete_graph(DUPS)


def test_rows_kept_before_the_watcher_was_live_serve_while_the_fingerprint_holds() -> None:
    """The first view of a process keeps its rows under the server-wide fingerprint (the
    watcher is not live yet); the next, under the graph's version, takes them while that
    fingerprint is still the server's, and keeps them under the version from then on."""
    cache = distributions.SummaryCache()
    fp = distributions.Fingerprint("run", 0, 0, 5, 10, 20)
    moved = distributions.Fingerprint("run", 0, 0, 6, 10, 20)
    version = graph_changes.GraphVersion("run", 1, 0, 10, 20)
    rows = [{"name": "KNOWS", "facts": 3}]
    cache.put("a", fp, rows)
    assert cache.get("a", version, or_under=moved) is None  # a write since: stale
    assert cache.get("a", version) is None
    assert cache.get("a", version, or_under=fp) == rows
    assert cache.get("a", version) == rows  # kept under the version now
    assert cache.get("a", fp) is None
    assert (cache.hits, cache.misses) == (2, 3)


def test_cache_keeps_copies_and_drops_the_least_recently_used() -> None:
    cache = distributions.SummaryCache(max_entries=2)
    fp = distributions.Fingerprint("run", 0, 0, 0, 1, 1)
    rows = [{"name": "KNOWS", "facts": 3}]
    cache.put("a", fp, rows)
    rows[0]["facts"] = 99  # the caller's list is not the kept one
    got = cache.get("a", fp)
    assert got == [{"name": "KNOWS", "facts": 3}]
    assert got is not None
    got[0]["facts"] = 7  # nor is what get hands out
    assert cache.get("a", fp) == [{"name": "KNOWS", "facts": 3}]
    assert cache.get("a", distributions.Fingerprint("run", 0, 0, 1, 1, 1)) is None
    cache.put("b", fp, [])
    cache.get("a", fp)  # a is now the most recently used
    cache.put("c", fp, [])
    assert cache.get("b", fp) is None and cache.get("a", fp) is not None and len(cache) == 2
    with pytest.raises(ValueError):
        distributions.parts(None, G, ["nope"])  # type: ignore[arg-type]
