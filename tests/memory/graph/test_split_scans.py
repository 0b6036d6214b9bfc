"""Split fact scans on a real FalkorDB: node-id ranges run at once give the single statement's rows.

The graph has what makes merging hard: groups whose facts start in several ranges, the
same names on different nodes, nulls (a missing name, status, created_at), tied
timestamps, non-ASCII names, and node ids above the node count (the lowest ids deleted).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.graph import graph_settings, make_client
from yuxi_dash.memory.freshness import distributions
from yuxi_dash.memory.graph import queries, split_scans
from yuxi_dash.memory.graph.client import GraphClient, get_client
from yuxi_dash.memory.graph.server import ServerHandle

G = "user_split_scans"
NAMES = ("A", "B", "b", "é", "中", "Zoë", None)
STATUSES = ("active", "tentative", "superseded", None)
KINDS = ("user_asserted", "tool_observed", None)
DELETED = 20  # the lowest node ids are deleted, so ids run past the node count


def _facts(rng: random.Random, nodes: int) -> list[dict[str, Any]]:
    facts = []
    for i in range(700):
        source, target = rng.randrange(nodes), rng.randrange(nodes)
        copies = rng.choice((1, 1, 1, 1, 2, 3, 5))  # repeated triples, in every range
        name = rng.choice(NAMES)
        for _ in range(copies):
            k = len(facts)
            facts.append(
                {
                    "s": source,
                    "t": target,
                    "props": {
                        key: value
                        for key, value in {
                            "uuid": f"e{k:05d}",
                            "name": name,
                            "fact": f"fact {i}",
                            "status": rng.choice(STATUSES),
                            "source_kind": rng.choice(KINDS),
                            # ties (minute resolution) and missing timestamps
                            "created_at": None
                            if k % 97 == 0
                            else f"2026-06-01T{rng.randrange(24):02d}:{rng.randrange(3):02d}:00Z",
                            "expired_at": "2026-07-01T00:00:00Z" if k % 5 == 0 else None,
                        }.items()
                        if value is not None
                    },
                }
            )
    return facts


@pytest.fixture
def graph(falkordb_server: ServerHandle, graph_client: GraphClient) -> Iterator[GraphClient]:
    rng = random.Random(7)
    nodes = 80
    graph_client.delete_graph(G)
    graph_client.write(
        G,
        "UNWIND range(0, $n - 1) AS i CREATE (:Entity {key: i, name: $names[i % size($names)]})",
        {"n": nodes, "names": ["Ada", "Bo", "Ada", "Ünal", "李"]},
    )
    graph_client.write(
        G,
        "UNWIND $facts AS f MATCH (a:Entity {key: f.s}), (b:Entity {key: f.t}) "
        "CREATE (a)-[e:RELATES_TO]->(b) SET e = f.props",
        {"facts": _facts(rng, nodes)},
    )
    graph_client.write(G, "MATCH (n:Entity) WHERE n.key < $d DETACH DELETE n", {"d": DELETED})
    yield graph_client
    graph_client.delete_graph(G)


def _single(client: GraphClient, part: str, limit: int) -> list[dict[str, Any]]:
    if part == "breakdown":
        return client.ro_rows(G, queries.FACT_BREAKDOWN)
    if part == "newest_facts":
        return client.ro_rows(G, queries.FACTS_PAGE, {"limit": limit, "offset": 0})
    return client.ro_rows(G, distributions.PARTS[part], {"limit": limit})


def _order_keys(part: str, rows: list[dict[str, Any]]) -> list[Any]:
    """What the part's ORDER BY decides (rows tied on all of it may come in either order)."""
    if part == "breakdown":  # no ORDER BY: a set of groups
        return sorted(tuple(sorted(row.items(), key=repr)) for row in rows)
    if part == "same_triple":
        return [(r["copies"], r["source"], r["name"]) for r in rows]
    return rows  # names (one row per name) and newest facts (uuid breaks every tie): exact


def test_node_ranges_cover_every_id_from_zero() -> None:
    assert split_scans.node_ranges(10, 3) == [(0, 3), (3, 6), (6, split_scans._NO_END)]
    # never an empty range (an empty one at 0 kills the FalkorDB server)
    assert split_scans.node_ranges(0, 2) == [(0, split_scans._NO_END)]
    assert split_scans.node_ranges(2, 4) == [(0, 1), (1, split_scans._NO_END)]
    assert split_scans.node_ranges(5, 1) == [(0, split_scans._NO_END)]


def test_cypher_order_is_the_servers_order(graph: GraphClient) -> None:
    values = ["b", "B", "a", "", "a ", "ab", "é", "e\u0301", "中", "\uffff", "😀", None]
    values += [True, False, -1, 2, 2.5, [1, "x"], ["a"]]
    served = graph.ro_rows(  # NaN is not a Cypher literal: made on the server
        G, "UNWIND $v + [0.0 / 0.0] AS x RETURN x ORDER BY x", {"v": values}
    )
    ours = sorted([*values, float("nan")], key=split_scans.cypher_order)
    assert [repr(row["x"]) for row in served] == [repr(value) for value in ours]  # NaN != NaN


def test_groups_merge_as_cypher_groups() -> None:
    """True and 1 are two groups (Python's dict would fold them), 1 and 1.0 one."""

    def row(status: Any, facts: int) -> dict[str, Any]:
        return {"status": status, "source_kind": "", "unexpired": True, "facts": facts}

    merged = split_scans.SPLIT_PARTS["breakdown"][2]([[row(True, 2)], [row(1, 3), row(1.0, 4)]], 0)
    assert sorted((repr(r["status"]), r["facts"]) for r in merged) == [("1", 7), ("True", 2)]
    names = split_scans.SPLIT_PARTS["names"][2](
        [[{"name": float("nan"), "facts": 1}], [{"name": float("nan"), "facts": 2}]], 5
    )
    assert [(repr(r["name"]), r["facts"]) for r in names] == [("nan", 3)]


@pytest.mark.parametrize("splits", [2, 3, 5])
@pytest.mark.parametrize("limit", [3, 500])
def test_split_rows_are_the_single_statements_rows(
    graph: GraphClient, splits: int, limit: int
) -> None:
    nodes = queries.counts_one(graph, G, queries.COUNT_NODES)
    top_id = graph.ro_value(G, "MATCH (n) RETURN max(id(n))")
    assert top_id >= nodes  # ids run past the count: the last range must be open
    for part in split_scans.SPLIT_PARTS:
        single = _single(graph, part, limit)
        assert single, part
        merged = split_scans.split_rows(graph, G, part, limit, nodes=nodes, splits=splits)
        assert _order_keys(part, merged) == _order_keys(part, single), part
        if part == "same_triple" and limit == 500:  # every row, whatever the ties
            assert sorted(map(repr, merged)) == sorted(map(repr, single))


def test_a_wrong_node_count_only_unbalances_the_ranges(graph: GraphClient) -> None:
    for nodes in (0, 1, 10**6):
        for part in split_scans.SPLIT_PARTS:
            merged = split_scans.split_rows(graph, G, part, 500, nodes=nodes, splits=3)
            assert _order_keys(part, merged) == _order_keys(part, _single(graph, part, 500))


def test_a_failing_range_raises_what_the_single_statement_raises(
    graph_client: GraphClient,
) -> None:
    """Several ranges, each failing as the one statement does (here: no such graph)."""
    missing = "user_split_missing"
    graph_client.delete_graph(missing)
    for part in split_scans.SPLIT_PARTS:
        statement = split_scans.SPLIT_PARTS[part][0]
        with pytest.raises(Exception) as single:
            graph_client.ro_rows(missing, distributions.PARTS[part], {"limit": 5, "offset": 0})
        sent = len(graph_client.stats.statements)
        with pytest.raises(type(single.value)) as split:
            split_scans.split_rows(graph_client, missing, part, 5, nodes=30, splits=3)
        assert str(split.value) == str(single.value)
        assert graph_client.stats.statements[sent:].count(statement) == 3, part


def test_a_bad_range_is_never_sent_and_the_others_finish(
    graph: GraphClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An upper bound of 0 kills FalkorDB 4.16: refused before sending, on a scan thread,
    after the good ranges ran; the server is still up."""
    end = split_scans._NO_END
    monkeypatch.setattr(
        split_scans, "node_ranges", lambda nodes, splits: [(0, 9), (0, 0), (9, end)]
    )
    sent = len(graph.stats.statements)
    with pytest.raises(ValueError, match="not a node-id range"):
        split_scans.split_rows(graph, G, "breakdown", 5, nodes=30, splits=3)
    statement = split_scans.SPLIT_PARTS["breakdown"][0]
    assert graph.stats.statements[sent:].count(statement) == 2
    assert queries.counts_one(graph, G, queries.COUNT_RELATES_TO) > 0


def test_ranges_run_here_when_the_scan_threads_are_shut_down(
    graph: GraphClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed = split_scans.ScanThreads(1)
    closed.shutdown()  # as when the process closes between acquire and submit
    monkeypatch.setattr(split_scans, "_workers", lambda: closed)
    nodes = queries.counts_one(graph, G, queries.COUNT_NODES)
    merged = split_scans.split_rows(graph, G, "names", 500, nodes=nodes, splits=3)
    assert merged == _single(graph, "names", 500)


def test_a_view_never_waits_behind_other_views_ranges(
    graph: GraphClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With every scan thread busy (other users' long ranges), the view runs its ranges
    itself instead of queueing behind them, and a thread freed again is used again."""
    threads = split_scans.ScanThreads(2)
    monkeypatch.setattr(split_scans, "_workers", lambda: threads)
    release = threading.Event()
    busy = [threads.try_submit(release.wait, 30) for _ in range(2)]
    assert all(future is not None for future in busy)
    assert threads.try_submit(release.wait, 30) is None  # none free: not queued
    nodes = queries.counts_one(graph, G, queries.COUNT_NODES)
    ran_in: list[str] = []
    real_rows = graph.ro_rows

    def ro_rows(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        ran_in.append(threading.current_thread().name)
        return real_rows(*args, **kwargs)

    monkeypatch.setattr(graph, "ro_rows", ro_rows)
    try:
        merged = split_scans.split_rows(graph, G, "names", 500, nodes=nodes, splits=3)
        assert ran_in == [threading.current_thread().name] * 3  # all here, none queued
    finally:
        release.set()
    for future in busy:
        assert future is not None and future.result(timeout=10) is True
    ran_in.clear()
    again = split_scans.split_rows(graph, G, "names", 500, nodes=nodes, splits=3)
    assert merged == again == _single(graph, "names", 500)
    assert sum(name.startswith("yuxi-dash-scan") for name in ran_in) == 2  # freed: used again
    threads.shutdown()


@pytest.mark.parametrize("splits", [1, 3])
def test_parts_split_large_graphs_and_keep_their_rows(
    graph: GraphClient,
    falkordb_server: ServerHandle,
    falkordb_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    splits: int,
) -> None:
    monkeypatch.setattr(split_scans, "SPLIT_MIN_FACTS", 1)  # the test graph counts as large
    client = make_client(
        falkordb_server,
        graph_settings(falkordb_dir, falkordb_scan_splits=splits),
        record_statements=True,
    )
    try:
        found = distributions.parts(
            client,
            G,
            list(distributions.PARTS),
            limit=500,
            cache=distributions.SummaryCache(),
            share=False,
        )
        sent = client.stats.statements
    finally:
        client.close()
    for part, rows in found.items():
        assert _order_keys(part, rows) == _order_keys(part, _single(graph, part, 500)), part
    for part, (statement, _limited, _merge) in split_scans.SPLIT_PARTS.items():
        ranged = sent.count(statement)
        assert (ranged, sent.count(distributions.PARTS[part])) == (
            (splits, 0) if splits > 1 else (0, 1)
        ), part


def test_a_write_during_the_ranges_reads_the_part_again_in_one_statement(
    graph: GraphClient,
    falkordb_server: ServerHandle,
    falkordb_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ranges are separate reads: a fact deleted after them moves the graph's version, so the
    split rows (which still count it) are dropped for one statement's."""
    monkeypatch.setattr(split_scans, "SPLIT_MIN_FACTS", 1)
    real = split_scans.split_rows
    split_results: list[list[dict[str, Any]]] = []

    def then_a_write(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        rows = real(*args, **kwargs)
        split_results.append(rows)
        graph.write(G, "MATCH ()-[e:RELATES_TO]->() WITH e LIMIT 1 DELETE e")
        return rows

    monkeypatch.setattr(split_scans, "split_rows", then_a_write)
    client = make_client(
        falkordb_server,
        graph_settings(falkordb_dir, falkordb_scan_splits=2),
        record_statements=True,
    )
    try:
        found = distributions.parts(
            client, G, ["breakdown"], cache=distributions.SummaryCache(), share=False
        )
        sent = client.stats.statements
    finally:
        client.close()
    assert len(split_results) == 1  # the watcher vouched for the version: it was split
    total = sum(row["facts"] for row in found["breakdown"])
    assert total == sum(row["facts"] for row in split_results[0]) - 1
    assert _order_keys("breakdown", found["breakdown"]) == _order_keys(
        "breakdown", _single(graph, "breakdown", 0)
    )
    assert sent[-1] == queries.FACT_BREAKDOWN  # read again, in one statement


def test_the_process_client_carries_the_configured_splits(
    falkordb_server: ServerHandle, falkordb_dir: Path
) -> None:
    one, three = (get_client(graph_settings(falkordb_dir, falkordb_scan_splits=n)) for n in (1, 3))
    assert one is not three
    assert (one.settings.falkordb_scan_splits, three.settings.falkordb_scan_splits) == (1, 3)
