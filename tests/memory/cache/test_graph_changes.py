"""The per-graph change watcher on a real FalkorDB server: a write moves only its own graph's
version, a read moves nothing, a lost tracking connection voids every version, and the
distributions of one graph stay warm while another graph is written."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from tests.memory.cache.test_distributions import G, assert_same_as_old
from tests.memory.cache.test_distributions import (
    graph as graph,  # the planted graph G (a fixture)
)
from yuxi_dash.memory.cache import distributions, graph_changes
from yuxi_dash.memory.cache.graph_changes import GraphChangeWatcher, GraphVersion
from yuxi_dash.memory.graph.client import GraphClient

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


def watcher_connections(client: GraphClient, user: str = "default") -> dict[str, str]:
    """A watcher's connections on the server as ``user``: {"listener": id, "tracker": id}."""
    found = {}
    for line in str(client.db.connection.execute_command("CLIENT", "LIST")).splitlines():
        fields = dict(field.split("=", 1) for field in line.split() if "=" in field)
        name = fields.get("name", "")
        if name.startswith(graph_changes.CLIENT_NAME + ":") and fields.get("user") == user:
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
        current, kept = graph_changes.change_marks(graph, G)
        assert current is not None and isinstance(kept, GraphVersion)
        write(graph, OTHER)  # another user's graph: the server-wide counter moves
        moved = graph_changes.fingerprint(graph, G)
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
    watcher.close()  # as when the server refuses CLIENT TRACKING, or the connection is down
    try:
        assert watcher.version(G) is None
        current, kept = graph_changes.change_marks(graph, G)
        assert current is not None and kept == current
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


def test_a_write_between_the_two_checks_is_never_hidden(
    graph: GraphClient, watcher: GraphChangeWatcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows another process shared (kept under the server-wide fingerprint) are taken into
    this process's cache under the graph's version: a write landing after the fingerprint
    was read must leave that version stale (it is read first), so later views see it."""
    conn = redis.Redis.from_url("redis://127.0.0.1:6379/15", socket_timeout=5, retry=None)
    store = distributions.SharedStore(conn, prefix=f"test-changes:{uuid.uuid4().hex[:8]}")
    try:
        distributions.parts(  # another process computed and shared the breakdown
            graph, G, ["breakdown"], cache=distributions.SummaryCache(), shared=store
        )
        real = graph_changes.fingerprint
        racing = True

        def fingerprint_then_a_write(client: GraphClient, group: str) -> Any:
            nonlocal racing
            read = real(client, group)
            if racing:  # once: a retraction lands right after the fingerprint was read
                racing = False
                write(graph, G, "MATCH ()-[e:RELATES_TO {uuid: 'e1'}]->() SET e.status = 'x'")
            return read

        monkeypatch.setattr(graph_changes, "fingerprint", fingerprint_then_a_write)
        cache = distributions.SummaryCache()
        distributions.parts(graph, G, ["breakdown"], cache=cache, shared=store)
        assert not racing
        later = distributions.parts(graph, G, ["breakdown"], cache=cache, shared=store)
        assert "x" in {row["status"] for row in later["breakdown"]}  # the write is seen
        assert_same_as_old(graph, G, later)
    finally:
        store.forget(G)
        conn.close()


@pytest.mark.parametrize("denied", ["-client", "-subscribe", "resetchannels"])
def test_a_server_that_refuses_the_handshake_leaves_the_watcher_idle(
    graph: GraphClient, denied: str
) -> None:
    """An ACL without CLIENT or SUBSCRIBE (or without the channel): refused for good, no
    retrying every few seconds, and no version (callers use the server-wide fingerprint)."""
    admin = graph.db.connection
    user = f"yd_watcher_{denied.strip('-')}"
    admin.execute_command("ACL", "SETUSER", user, "on", ">pw", "~*", "&*", "+@all", denied)
    pool = admin.connection_pool
    kwargs = {**pool.connection_kwargs, "username": user, "password": "pw"}

    def connect() -> Any:
        connection = pool.connection_class(**kwargs)
        connection.connect()
        return connection

    watcher = GraphChangeWatcher(connect)
    try:
        assert not watcher.wait_live(WAIT)
        assert watcher.refused and watcher.version(G) is None
        watcher._thread.join(WAIT)
        assert not watcher._thread.is_alive()  # stopped, not reconnecting
        assert watcher_connections(graph, user) == {}  # nothing left open
    finally:
        watcher.close()
        admin.execute_command("ACL", "DELUSER", user)
