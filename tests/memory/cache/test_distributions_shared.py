"""The shared store of distribution parts, on a real FalkorDB and a real Redis (127.0.0.1:6379):
a new process is served from it without a scan while the graph is unchanged, never after a
write, never under another fingerprint; it refuses the graph server itself; a dead Redis is a
miss, never a failed view."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.fixtures.graph import graph_settings, make_client
from tests.memory.cache import test_distributions
from tests.memory.cache.test_distributions import (
    G,
    assert_same_as_old,
    cold_scans,
    entity,
    fact,
    scans,
    seed_edges,
)
from yuxi_dash.demo.graph_writer import create_indexes, write_graph
from yuxi_dash.memory.cache import distributions, graph_changes
from yuxi_dash.memory.graph.client import GraphClient
from yuxi_dash.memory.graph.server import ServerHandle, ensure_server, stop_server
from yuxi_dash.resources import SHARED_SUMMARIES, get_resources
from yuxi_dash.settings import Settings

REDIS_URL = "redis://127.0.0.1:6379/15"
NAMES = list(distributions.PARTS)
graph = test_distributions.graph  # the fixture: test_distributions' planted graph


@pytest.fixture
def store() -> Iterator[distributions.SharedStore]:
    conn = redis.Redis.from_url(REDIS_URL, socket_timeout=5, retry=None)
    shared = distributions.SharedStore(conn, prefix=f"test-parts:{uuid.uuid4().hex[:8]}")
    yield shared
    shared.forget(G)
    conn.close()


def scanned(client: GraphClient, view: Any) -> tuple[dict[str, Any], int]:
    """Run `view()`; its parts and how many of them were computed by a scan."""
    before = len(client.stats.statements)
    found = view()
    sent = client.stats.statements[before:]
    return found, scans(sent)


def new_process(client: GraphClient, store: distributions.SharedStore) -> Any:
    """A view in a process that keeps nothing yet (its own cache is empty)."""
    cache = distributions.SummaryCache()
    return lambda: distributions.parts(client, G, NAMES, limit=500, cache=cache, shared=store)


def test_a_new_process_is_served_without_a_scan_until_the_graph_changes(
    graph: GraphClient, store: distributions.SharedStore
) -> None:
    first, count = scanned(graph, new_process(graph, store))
    assert count == cold_scans(NAMES)
    second, count = scanned(graph, new_process(graph, store))
    assert count == 0 and second == first  # another process, graph unchanged: no scan
    assert_same_as_old(graph, G, second)

    write_graph(graph, G, facts=[fact(500, 3, 4, name="KNOWS", text="the user likes tea")])
    third, count = scanned(graph, new_process(graph, store))
    assert count == cold_scans(NAMES)  # the shared copy is under the old fingerprint: not served
    assert third != first
    assert_same_as_old(graph, G, third)
    fourth, count = scanned(graph, new_process(graph, store))
    assert count == 0 and fourth == third

    assert store.forget(G) == len(NAMES)
    assert not list(store.conn.scan_iter(match=f"{store.prefix}:*"))


def test_rows_are_served_only_under_the_same_fingerprint(
    store: distributions.SharedStore,
) -> None:
    fp = distributions.Fingerprint("run-a", 1, 100, 5, 20, 30)
    rows = [{"status": "active", "source_kind": "", "unexpired": True, "facts": 3}]
    key = store.key(G, fp.run_id, "breakdown", None)
    store.put_many(G, [(key, rows)], fp)
    assert store.get_many([key], fp) == [rows]
    assert 0 < int(store.conn.ttl(key)) <= distributions.SHARED_TTL_SECONDS
    for other in (
        distributions.Fingerprint("run-b", 1, 100, 5, 20, 30),  # the server restarted
        distributions.Fingerprint("run-a", 1, 100, 6, 20, 30),  # one write since
        distributions.Fingerprint("run-a", 2, 101, 0, 20, 30),  # a save since
        distributions.Fingerprint("run-a", 1, 100, 5, 20, 31),  # one more fact
    ):
        assert store.get_many([key], other) == [None]
    store.conn.set(key, b"not json")
    assert store.get_many([key], fp) == [None]
    store.put_many(G, [(key, [{"pair": (1, 2)}])], fp)  # would come back as a list: not shared
    assert store.get_many([key], fp) == [None]


def test_the_graph_server_itself_is_refused_as_the_shared_store(
    falkordb_server: ServerHandle, graph: GraphClient
) -> None:
    conn = redis.Redis(**falkordb_server.redis_kwargs(), retry=None)  # type: ignore[arg-type]
    same_server = distributions.SharedStore(conn, prefix="test-parts-self")
    before = graph_changes.fingerprint(graph, G)
    _, count = scanned(graph, new_process(graph, same_server))
    assert count == cold_scans(NAMES)
    assert graph_changes.fingerprint(graph, G) == before  # nothing was written there
    assert not list(conn.scan_iter(match="test-parts-self:*"))
    _, count = scanned(graph, new_process(graph, same_server))
    assert count == cold_scans(NAMES)
    conn.close()


def test_a_dead_shared_store_is_a_miss_and_the_view_still_answers(graph: GraphClient) -> None:
    dead = distributions.SharedStore(
        redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2, retry=None)
    )
    found, count = scanned(graph, new_process(graph, dead))
    assert count == cold_scans(NAMES)
    assert_same_as_old(graph, G, found)
    fp = graph_changes.fingerprint(graph, G)
    assert fp is not None and dead.paused and not dead.usable_for(fp)


def test_the_store_comes_from_the_redis_url_setting(
    falkordb_server: ServerHandle, graph: GraphClient, memory_settings: Settings
) -> None:
    settings = memory_settings.model_copy(update={"redis_url": REDIS_URL})
    client = make_client(falkordb_server, settings, record_statements=True)
    try:
        default = distributions.get_shared_store(REDIS_URL)
        assert default is not None and default is distributions.get_shared_store(REDIS_URL)
        assert distributions.get_shared_store(None) is None
        # copies (and a forget's tombstone) an earlier test session left
        default.conn.delete(default.tombstone(G), *default.keys(G))
        view = lambda: distributions.parts(  # noqa: E731
            client, G, ["breakdown"], cache=distributions.SummaryCache()
        )
        first, count = scanned(client, view)
        assert count == 1
        second, count = scanned(client, view)
        assert count == 0 and second == first
        no_share = lambda: distributions.parts(  # noqa: E731
            client, G, ["breakdown"], cache=distributions.SummaryCache(), share=False
        )
        assert scanned(client, no_share)[1] == 1
        assert default.forget(G) == 1
        default.conn.delete(default.tombstone(G))
    finally:
        client.close()
        get_resources().close_kind(SHARED_SUMMARIES)


def test_a_part_computed_across_a_forget_is_not_kept(store: distributions.SharedStore) -> None:
    """A view that read the graph before it was forgotten and finishes after keeps nothing."""
    fp = distributions.Fingerprint("run-a", 1, 100, 5, 20, 30)
    rows = [{"name": "Alice Example", "facts": 3}]
    key = store.key(G, fp.run_id, "names", 50)
    store.put_many(G, [(key, rows)], fp)
    assert store.forget(G) == 1
    store.put_many(G, [(key, rows)], fp)  # the late view
    assert store.keys(G) == [] and store.get_many([key], fp) == [None]
    other = store.key("other_group", fp.run_id, "names", 50)
    store.put_many("other_group", [(other, rows)], fp)  # other graphs are still shared
    assert store.get_many([other], fp) == [rows]
    store.forget("other_group")


def test_the_graph_server_is_still_refused_after_it_restarts(tmp_path: Path) -> None:
    """The check that the store is not the graph server is made again for a new server run."""
    settings = graph_settings(tmp_path / "fdb")
    try:
        handle = ensure_server(settings)
        client = make_client(handle, settings)
        create_indexes(client, G)
        write_graph(client, G, entities=[entity(i) for i in range(20)], facts=seed_edges())
        conn = redis.Redis(**handle.redis_kwargs(), retry=None)  # type: ignore[arg-type]
        same_server = distributions.SharedStore(conn, prefix="test-parts-self")
        distributions.parts(
            client, G, NAMES, cache=distributions.SummaryCache(), shared=same_server
        )
        client.db.connection.execute_command("SAVE")
        client.close()
        stop_server(settings)

        client = make_client(ensure_server(settings), settings)
        conn.connection_pool.disconnect()  # the store's next command reaches the new run
        before = graph_changes.fingerprint(client, G)
        distributions.parts(
            client, G, NAMES, cache=distributions.SummaryCache(), shared=same_server
        )
        assert graph_changes.fingerprint(client, G) == before  # nothing was written there
        assert not list(conn.scan_iter(match="test-parts-self:*"))
        conn.close()
        client.close()
    finally:
        stop_server(settings)
