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

from tests.fixtures.graph import make_client
from tests.memory.cache.test_distributions import G, assert_same_as_old, cold_scans, fact, scans
from tests.memory.cache.test_distributions import (
    graph as graph,  # the planted graph G (a fixture)
)
from yuxi_dash.access.audit import record_audit
from yuxi_dash.demo.graph_writer import write_graph
from yuxi_dash.memory.cache import distributions, graph_changes
from yuxi_dash.memory.cache.graph_changes import GraphChangeWatcher, GraphVersion
from yuxi_dash.memory.graph.client import GraphClient
from yuxi_dash.memory.graph.server import ServerHandle
from yuxi_dash.store.corrections import add_correction
from yuxi_dash.store.db import session_scope

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
        return found, scans(sent)

    try:
        first, scanned = view()
        assert scanned == cold_scans(names)
        current, kept = graph_changes.change_marks(graph, G)
        assert current is not None and isinstance(kept, GraphVersion)
        write(graph, OTHER)  # another user's graph: the server-wide counter moves
        moved = graph_changes.fingerprint(graph, G)
        assert moved is not None and moved != current
        assert view() == (first, 0)  # still kept: G itself did not change
        write(graph, G, "MATCH ()-[e:RELATES_TO {uuid: 'e1'}]->() SET e.status = 'retracted'")
        second, scanned = view()  # G changed: every part read again, and right
        assert scanned == cold_scans(names)
        assert "retracted" in {row["status"] for row in second["breakdown"]}
        assert view() == (second, 0)
    finally:
        graph.delete_graph(OTHER)


def correction_row(client: GraphClient, group: str) -> None:
    """One of our own writes to `group` as the correction paths record it (its row)."""
    with session_scope(client.settings) as session:
        audit_id = record_audit(
            actor="op", action="memory.retract", target=group, outcome="ok", session=session
        )
        add_correction(
            session,
            id=uuid.uuid4().hex,
            audit_id=audit_id,
            actor="op",
            user_id=group.removeprefix("user_"),
            group_id=group,
            fact_uuid="e2",
            action="retract",
            before={},
            after={},
        )


def test_without_a_live_watcher_only_the_graphs_own_writes_make_its_view_cold(
    graph: GraphClient, watcher: GraphChangeWatcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watcher closed: another graph's write leaves G's parts kept; G's own writes (a new
    fact, our correction row) and the end of the period (an in-place write no count shows)
    make them computed again, and right."""
    watcher.close()  # as when the server refuses CLIENT TRACKING, or the connection is down
    now = [1_000_000.0]
    monkeypatch.setattr(graph_changes, "wall_clock", lambda: now[0])
    cache = distributions.SummaryCache()
    names = ["breakdown", "names", "same_triple", "same_fact_text", "mirrored"]

    def view(*, right: bool = True) -> tuple[dict[str, Any], int]:
        before = len(graph.stats.statements)
        found = distributions.parts(graph, G, names, limit=500, cache=cache, share=False)
        sent = graph.stats.statements[before:]
        if right:
            assert_same_as_old(graph, G, found)
        return found, scans(sent)

    try:
        assert watcher.version(G) is None
        current, kept = graph_changes.change_marks(graph, G)
        assert current is not None and isinstance(kept, graph_changes.GraphMark)
        first, scanned = view()
        assert scanned == cold_scans(names)
        write(graph, OTHER)  # another user's graph: the server-wide fingerprint moves
        moved = graph_changes.fingerprint(graph, G)
        assert moved is not None and moved != current
        assert view() == (first, 0)  # served from the cache: G did not change
        correction_row(graph, OTHER)  # our write to another graph: still kept
        assert view() == (first, 0)

        write_graph(graph, G, facts=[fact(600, 3, 4, name="KNOWS", text="the user likes tea")])
        second, scanned = view()  # a new fact in G: every part read again
        assert scanned == cold_scans(names) and second != first
        assert view() == (second, 0)

        write(graph, G, "MATCH ()-[e:RELATES_TO {uuid: 'e2'}]->() SET e.status = 'retracted'")
        correction_row(graph, G)  # our correction commits its row after its graph write
        third, scanned = view()
        assert scanned == cold_scans(names)
        assert "retracted" in {row["status"] for row in third["breakdown"]}

        write(graph, G, "MATCH ()-[e:RELATES_TO {uuid: 'e3'}]->() SET e.status = 'inplace'")
        # a platform write no count shows: the kept rows are served until the period ends
        assert view(right=False) == (third, 0)
        now[0] += graph_changes.FALLBACK_MAX_AGE_SECONDS
        fourth, scanned = view()  # the next period: read again
        assert scanned == cold_scans(names)
        assert "inplace" in {row["status"] for row in fourth["breakdown"]}
    finally:
        graph.delete_graph(OTHER)
        graph_changes.close_watchers()


def counted_database_reads(monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[float]]:
    """(the database URLs `our_writes` opened a session on, the memo's and pause's clock):
    the real sessions, counted; the memo and the pause start empty."""
    asked: list[str] = []
    clock = [1_000.0]
    real = graph_changes.session_scope

    def counted(settings: Any) -> Any:
        asked.append(settings.database_url)
        return real(settings)

    monkeypatch.setattr(graph_changes, "session_scope", counted)
    monkeypatch.setattr(graph_changes, "monotonic", lambda: clock[0])
    monkeypatch.setattr(graph_changes, "_db_paused_until", {})
    monkeypatch.setattr(graph_changes, "_ours_memo", {})
    return asked, clock


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://127.0.0.1:1/test",  # refused: the first use's migrations raise StoreUnavailable
        "sqlite:////proc/yuxi-dash-missing/corrections.db",  # a folder that cannot be made
    ],
)
def test_an_unreadable_database_leaves_the_fingerprint_as_the_mark(
    falkordb_server: ServerHandle,
    graph: GraphClient,
    watcher: GraphChangeWatcher,
    monkeypatch: pytest.MonkeyPatch,
    url: str,
) -> None:
    """The watcher closed and the corrections database unreadable: the kept mark is the
    server-wide fingerprint, the view answers with the right rows, and the database is not
    asked again for DATABASE_PAUSE_SECONDS."""
    watcher.close()
    asked, clock = counted_database_reads(monkeypatch)
    down = make_client(falkordb_server, graph.settings.model_copy(update={"database_url": url}))
    try:
        current, kept = graph_changes.change_marks(down, G)
        assert current is not None and kept == current
        assert isinstance(kept, graph_changes.Fingerprint)
        cache = distributions.SummaryCache()
        names = list(distributions.PARTS)
        found = distributions.parts(down, G, names, limit=500, cache=cache, share=False)
        assert_same_as_old(graph, G, found)
        assert distributions.parts(down, G, names, limit=500, cache=cache, share=False) == found
        assert cache.hits == len(names)  # kept under the fingerprint
        assert asked == [url]  # paused after the failure
        clock[0] += graph_changes.DATABASE_PAUSE_SECONDS
        assert graph_changes.change_marks(down, G) == (current, current)
        assert asked == [url, url]
        assert graph_changes.our_writes(graph, "tenant_graph") is None  # no user: not asked
        assert asked == [url, url]
    finally:
        down.close()
        graph_changes.close_watchers()


def test_a_views_calls_read_our_writes_once_while_nothing_is_written(
    graph: GraphClient, watcher: GraphChangeWatcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watcher closed: our writes to a graph are read once for calls within
    OURS_MEMO_SECONDS while the fingerprint read after them holds; any write on the server,
    or the second's end, reads them again, so our own correction is seen at once."""
    watcher.close()
    asked, clock = counted_database_reads(monkeypatch)
    try:
        first = graph_changes.change_marks(graph, G)
        assert isinstance(first[1], graph_changes.GraphMark)
        assert graph_changes.change_marks(graph, G) == first and len(asked) == 1
        write(graph, OTHER)  # a write anywhere: read again
        assert graph_changes.change_marks(graph, G)[1] == first[1] and len(asked) == 2
        clock[0] += graph_changes.OURS_MEMO_SECONDS
        assert graph_changes.change_marks(graph, G)[1] == first[1] and len(asked) == 3
        write(graph, G, "MATCH ()-[e:RELATES_TO {uuid: 'e2'}]->() SET e.status = 'retracted'")
        correction_row(graph, G)  # our correction: its graph write, then its row
        after = graph_changes.change_marks(graph, G)[1]
        assert isinstance(after, graph_changes.GraphMark) and len(asked) == 4
        assert after.corrections[0] == first[1].corrections[0] + 1
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
