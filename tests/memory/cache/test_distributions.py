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
from yuxi_dash.errors import MemoryUnavailable
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


SCANS = set(distributions.PARTS.values())


def scans(sent: list[str]) -> int:
    """How many of the statements `sent` were a part's scan."""
    return sum(statement in SCANS for statement in sent)


def cold_scans(names: list[str]) -> int:
    """How many scans a view of `names` runs when none is kept (one statement per part)."""
    return len(set(names))


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
    one statement each; the rows are those read one after another."""
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
    assert scans(sent) == 4 and most[0] == 2  # PARALLEL_PARTS
    monkeypatch.setattr(distributions, "PARALLEL_PARTS", 1)
    one_by_one = distributions.relations(graph, G, limit=500, cache=distributions.SummaryCache())
    assert at_once == one_by_one
    assert_same_as_old(graph, G, {"names": at_once["names"], **at_once["duplicates"]})


def test_statements_at_once_are_bounded_in_the_whole_process(
    graph: GraphClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PARALLEL_PARTS bounds the parts' statements of every view together: with 1, two cold
    views at once never run two statements at the same time (each statement waits a little
    for a second one to start); with 2, never three, and two are seen."""
    real = distributions.one_statement_rows
    lock = threading.Lock()
    running = [0]
    most = [0]
    another = threading.Event()

    def counted(*args: Any) -> Any:  # the real statement, counted while it runs
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
            if running[0] >= 2:
                another.set()
        another.wait(0.3)
        try:
            return real(*args)
        finally:
            with lock:
                running[0] -= 1

    def two_views_at_once() -> list[dict[str, Any]]:
        """The Facts page of G at two limits (no part shared), cold, from two threads."""
        cache = distributions.SummaryCache()
        found: list[dict[str, Any]] = []

        def view(limit: int) -> None:
            found.append(distributions.relations(graph, G, limit=limit, cache=cache))

        views = [threading.Thread(target=view, args=(limit,)) for limit in (500, 499)]
        for thread in views:
            thread.start()
        for thread in views:
            thread.join()
        assert cache.misses == 8  # every part of both views computed
        return found

    monkeypatch.setattr(distributions, "one_statement_rows", counted)
    for bound in (1, 2):
        monkeypatch.setattr(distributions, "PARALLEL_PARTS", bound)
        most[0] = 0
        another.clear()
        found = two_views_at_once()
        assert len(found) == 2 and most[0] == bound
        for rows in found:
            assert_same_as_old(graph, G, {"names": rows["names"], **rows["duplicates"]})


FACTS_PAGE = ["names", "same_triple", "same_fact_text", "mirrored"]  # in this order


def test_the_first_error_raises_without_waiting_and_cancels_the_rest(
    graph: GraphClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One part's statement fails: the view raises while the other started part still runs,
    and the part not started is never read; the one still running keeps its rows."""
    real = distributions.one_statement_rows
    raised = threading.Event()
    started: list[str] = []
    released: list[bool] = []  # per part held: whether the view had raised by then

    def failing(client: GraphClient, group: str, part: str, limit: int) -> Any:
        started.append(part)
        if part == "names":
            raise MemoryUnavailable("FalkorDB is unavailable (test)")
        released.append(raised.wait(10))  # held until the view has raised (at most 10 s)
        return real(client, group, part, limit)

    monkeypatch.setattr(distributions, "one_statement_rows", failing)
    monkeypatch.setattr(distributions, "PARALLEL_PARTS", 2)
    cache = distributions.SummaryCache()
    with pytest.raises(MemoryUnavailable):
        distributions.parts(graph, G, FACTS_PAGE, limit=500, cache=cache, share=False)
    raised.set()
    assert "mirrored" not in started and started[0] == "names" and len(started) <= 3
    deadline = time.monotonic() + 10
    while len(cache) < len(started) - 1 and time.monotonic() < deadline:
        time.sleep(0.05)  # the parts still running when the view raised finish and are kept
    assert len(cache) == len(started) - 1
    assert released == [True] * (len(started) - 1)  # the view did not wait for them


def test_rows_kept_in_one_period_serve_the_next_while_the_server_is_unchanged() -> None:
    """Without the watcher: rows kept under a graph's mark in period p are served at p + 1
    while the server-wide fingerprint read with them is still the server's (no write
    anywhere since), and then kept under the new mark; not once the server moved."""
    fp = distributions.Fingerprint("run", 0, 0, 5, 10, 20)
    moved = distributions.Fingerprint("run", 0, 0, 6, 10, 20)
    rows = [{"name": "KNOWS", "facts": 3}]

    def mark(period: int, server: distributions.Fingerprint) -> graph_changes.GraphMark:
        return graph_changes.GraphMark("run", 10, 20, (0, ""), period, server)

    cache = distributions.SummaryCache()
    cache.put("a", mark(7, fp), rows)
    assert cache.get("a", mark(8, moved), or_under=moved) is None  # a write since: stale
    assert cache.get("a", mark(8, fp), or_under=fp) == rows
    assert cache.get("a", mark(8, moved)) == rows  # kept under the new period's mark now
    assert cache.get("a", mark(9, moved), or_under=moved) is None


def test_each_graph_turns_its_period_over_at_its_own_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The 60 s periods have a phase per graph: over a minute, two graphs' periods turn over
    at different seconds (so their kept parts do not all go stale at once)."""
    now = [1_000_000.0]
    monkeypatch.setattr(graph_changes, "wall_clock", lambda: now[0])

    def turns(group: str) -> list[int]:
        """The seconds of a minute at which `group`'s period changes."""
        periods = []
        for second in range(61):
            now[0] = 1_000_000.0 + second
            periods.append(graph_changes.period(group))
        return [s for s in range(1, 61) if periods[s] != periods[s - 1]]

    assert len(turns(G)) == len(turns(DEMO)) == 1
    assert turns(G) != turns(DEMO)
    now[0] = 1_000_000.0
    first = graph_changes.period(G)
    now[0] += graph_changes.FALLBACK_MAX_AGE_SECONDS
    assert graph_changes.period(G) == first + 1


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
