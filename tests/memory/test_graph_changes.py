"""The per-graph change watcher on a real FalkorDB server: a write moves only its own graph's
version, a read moves nothing, a lost tracking connection voids every version, and the
distributions of one graph stay warm while another graph is written."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.memory.test_distributions import G, assert_same_as_old
from tests.memory.test_distributions import graph as graph  # the planted graph G (a fixture)
from yuxi_dash.memory import distributions, graph_changes
from yuxi_dash.memory.client import GraphClient
from yuxi_dash.memory.graph_changes import GraphChangeWatcher, GraphVersion

OTHER = "user_memperf_other"
WAIT = 10.0


def eventually(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {WAIT} s: {what}")
        time.sleep(0.05)


@pytest.fixture
def watcher(graph: GraphClient) -> Iterator[GraphChangeWatcher]:
    found = graph_changes.get_watcher(graph)
    assert found.wait_live(WAIT), "the watcher did not go live"
    yield found


def write(client: GraphClient, group: str, statement: str = "CREATE (:Probe {v: 1})") -> None:
    client.db.select_graph(group).query(statement)


def test_a_write_moves_only_its_own_graph_and_a_read_moves_nothing(
    graph: GraphClient, watcher: GraphChangeWatcher
) -> None:
    write(graph, OTHER)
    try:
        before = watcher.version(G), watcher.version(OTHER)
        assert before[0] is not None and before[1] is not None
        graph.ro_rows(G, "MATCH (n) RETURN count(n) AS c")  # reads, by both commands
        graph.db.select_graph(G).query("MATCH (n) RETURN count(n) AS c")
        # version() waits for every write finished before it: no sleeping needed
        assert (watcher.version(G), watcher.version(OTHER)) == before
        write(graph, OTHER, "MATCH (n:Probe) SET n.v = 1")  # a write that changes nothing
        after_other = watcher.version(G), watcher.version(OTHER)
        assert after_other[0] == before[0] and after_other[1] != before[1]
        write(graph, G, "MATCH (n:Entity {uuid: 'n1'}) SET n.summary = 'moved'")
        assert watcher.version(G) != before[0]
        assert watcher.version(OTHER) == after_other[1]
        assert watcher.version("tenant_graph") is None  # not a user graph: not tracked
    finally:
        graph.delete_graph(OTHER)


def watcher_connections(client: GraphClient) -> dict[str, str]:
    """The watcher's connections on the server: {"listener": id, "tracker": id}."""
    found = {}
    for line in str(client.db.connection.execute_command("CLIENT", "LIST")).splitlines():
        fields = dict(field.split("=", 1) for field in line.split() if "=" in field)
        name = fields.get("name", "")
        if name.startswith(graph_changes.CLIENT_NAME + ":"):
            found[name.rsplit(":", 1)[1]] = fields["id"]
    return found


@pytest.mark.parametrize("lost", [["tracker"], ["listener"], ["listener", "tracker"]])
def test_a_lost_connection_voids_every_version(
    graph: GraphClient, watcher: GraphChangeWatcher, lost: list[str]
) -> None:
    before = watcher.version(G)
    assert before is not None
    connections = watcher_connections(graph)
    assert sorted(connections) == ["listener", "tracker"]
    for role in lost:
        graph.db.connection.execute_command("CLIENT", "KILL", "ID", connections[role])
    # a write the dead connection could not report: never hidden behind the old version
    write(graph, G, "MATCH (n:Entity {uuid: 'n2'}) SET n.summary = 'unseen'")
    again = watcher.version(G)
    assert again is None or again[0] != before[0]
    eventually(lambda: watcher.version(G) is not None, "the watcher connected again")
    after = watcher.version(G)
    assert after is not None and after[0] != before[0]
    assert sorted(watcher_connections(graph)) == ["listener", "tracker"]


def test_parts_stay_warm_while_another_graph_is_written(
    graph: GraphClient, watcher: GraphChangeWatcher
) -> None:
    cache = distributions.SummaryCache()
    names = list(distributions.PARTS)

    def view() -> tuple[dict[str, Any], int]:
        before = len(graph.stats.statements)
        found = distributions.parts(graph, G, names, limit=500, cache=cache, share=False)
        sent = graph.stats.statements[before:]
        assert_same_as_old(graph, G, found)
        return found, sum(statement in sent for statement in distributions.PARTS.values())

    try:
        first, scanned = view()
        assert scanned == len(names)
        current = distributions.fingerprint(graph, G)
        assert current is not None
        assert isinstance(distributions.kept_under(graph, G, current), GraphVersion)
        write(graph, OTHER)  # another user's graph: the server-wide counter moves
        moved = distributions.fingerprint(graph, G)
        assert moved is not None and moved != current
        assert view() == (first, 0)  # still kept: G itself did not change
        write(graph, G, "MATCH ()-[e:RELATES_TO {uuid: 'e1'}]->() SET e.status = 'retracted'")
        second, scanned = view()  # G changed: every part read again, and right
        assert scanned == len(names)
        assert "retracted" in {row["status"] for row in second["breakdown"]}
        assert view() == (second, 0)
    finally:
        graph.delete_graph(OTHER)


def test_without_a_live_watcher_parts_use_the_server_wide_fingerprint(
    graph: GraphClient, watcher: GraphChangeWatcher
) -> None:
    current = distributions.fingerprint(graph, G)
    assert current is not None
    watcher.close()  # as when the server refuses CLIENT TRACKING, or the connection is down
    try:
        assert watcher.version(G) is None
        assert distributions.kept_under(graph, G, current) == current
        cache = distributions.SummaryCache()
        first = distributions.parts(graph, G, ["breakdown"], cache=cache, share=False)
        write(graph, OTHER)  # any write on the server now makes the kept part stale
        before = len(graph.stats.statements)
        again = distributions.parts(graph, G, ["breakdown"], cache=cache, share=False)
        assert again == first and graph.stats.statements[before:].count(
            distributions.PARTS["breakdown"]
        )
    finally:
        graph.delete_graph(OTHER)
        graph_changes.close_watchers()
