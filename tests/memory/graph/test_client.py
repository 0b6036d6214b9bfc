"""The driver layer: read-only path, parameters, timeouts, and the backpressure retry."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.fixtures.graph import graph_settings, make_client
from yuxi_dash.errors import MemoryQueryTimeout
from yuxi_dash.memory.graph.client import (
    BACKPRESSURE_MESSAGE,
    GraphClient,
    backoff_seconds,
    error_text,
    is_backpressure,
)
from yuxi_dash.memory.graph.server import ensure_server, stop_server


def test_the_real_server_says_max_pending_queries_exceeded(tmp_path: Path) -> None:
    """Provoke FalkorDB's own backpressure error (MAX_QUEUED_QUERIES=1) on a private server."""
    data_dir = tmp_path / "fdb"
    settings = graph_settings(data_dir)
    handle = ensure_server(settings)
    try:
        admin = redis.Redis(unix_socket_path=str(handle.unix_socket), retry=None)
        admin.execute_command("GRAPH.QUERY", "user_bp", "CREATE (:Entity {name: 'x'})")
        admin.execute_command("GRAPH.CONFIG", "SET", "MAX_QUEUED_QUERIES", 1)
        errors: list[BaseException] = []

        def slow() -> None:
            conn = redis.Redis(
                unix_socket_path=str(handle.unix_socket), socket_timeout=60, retry=None
            )
            try:
                conn.execute_command(
                    "GRAPH.RO_QUERY", "user_bp", "UNWIND range(1, 4000000) AS x RETURN count(x)"
                )
            except redis.ResponseError as exc:
                errors.append(exc)

        threads = [threading.Thread(target=slow) for _ in range((os.cpu_count() or 2) + 6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        texts = {error_text(e) for e in errors}
        assert BACKPRESSURE_MESSAGE in texts
        assert all(is_backpressure(e) for e in errors if error_text(e) == BACKPRESSURE_MESSAGE)
    finally:
        stop_server(settings)


class FlakyGraph:
    """Wraps a real graph: the first `failures` calls raise `error`, then it is the real one."""

    def __init__(self, real: Any, failures: int, error: BaseException) -> None:
        self.real = real
        self.failures = failures
        self.error = error
        self.calls = 0

    def ro_query(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return self.real.ro_query(*args, **kwargs)


class FlakyDB:
    def __init__(self, real_db: Any, graph: FlakyGraph) -> None:
        self.real_db = real_db
        self.graph = graph
        self.connection = real_db.connection

    def select_graph(self, name: str) -> FlakyGraph:
        self.graph.real = self.real_db.select_graph(name)
        return self.graph


def _flaky_client(
    falkordb_server, memory_settings, failures: int, error: BaseException, **overrides: Any
) -> tuple[GraphClient, FlakyGraph, list[float]]:
    settings = memory_settings.model_copy(update=overrides)
    real = make_client(falkordb_server, settings)
    graph = FlakyGraph(None, failures, error)
    sleeps: list[float] = []
    client = GraphClient(
        FlakyDB(real.db, graph),  # type: ignore[arg-type]
        settings,
        handle=falkordb_server,
        sleep=sleeps.append,
        uniform=lambda low, high: high,  # the top of the jitter range, deterministically
    )
    return client, graph, sleeps


def _seed(graph_client: GraphClient) -> None:
    graph_client.write("user_bp", "MERGE (:Entity {uuid: 'one', name: 'one'})")


def test_backpressure_is_retried_with_exponential_backoff(
    falkordb_server, memory_settings, graph_client
) -> None:
    _seed(graph_client)
    error = redis.ResponseError(BACKPRESSURE_MESSAGE)
    client, graph, sleeps = _flaky_client(
        falkordb_server,
        memory_settings,
        2,
        error,
        falkordb_query_max_attempts=3,
        falkordb_query_backoff_base=0.1,
    )
    assert client.ro_value("user_bp", "MATCH (n:Entity) RETURN count(n)") == 1
    assert graph.calls == 3
    assert sleeps == pytest.approx([0.1 * 1 + 0.1, 0.1 * 2 + 0.1])
    assert client.stats.retries == 2


def test_backpressure_gives_up_after_max_attempts_and_logs_no_params(
    falkordb_server, memory_settings, graph_client, caplog: pytest.LogCaptureFixture
) -> None:
    _seed(graph_client)
    client, graph, sleeps = _flaky_client(
        falkordb_server,
        memory_settings,
        10,
        redis.ResponseError(BACKPRESSURE_MESSAGE),
        falkordb_query_max_attempts=4,
        falkordb_query_backoff_base=1.5,
    )
    caplog.set_level(logging.DEBUG)
    with pytest.raises(redis.ResponseError):
        client.ro_rows(
            "user_bp", "MATCH (n:Entity {name: $name}) RETURN n", {"name": "secret-param-value"}
        )
    assert graph.calls == 4
    assert sleeps == [2.0, 2.0, 2.0]  # 1.5*2^a + 1.5 is capped at 2 s
    assert "failed after 4 attempt" in caplog.text
    assert "secret-param-value" not in caplog.text


def test_other_errors_fail_at_once(falkordb_server, memory_settings, graph_client) -> None:
    _seed(graph_client)
    client, graph, sleeps = _flaky_client(
        falkordb_server, memory_settings, 1, redis.ResponseError("errMsg: Invalid input")
    )
    with pytest.raises(redis.ResponseError):
        client.ro_value("user_bp", "MATCH (n) RETURN count(n)")
    assert graph.calls == 1 and sleeps == []


def test_backoff_formula_and_cap() -> None:
    top = lambda low, high: high  # noqa: E731
    assert backoff_seconds(0, 0.1, top) == pytest.approx(0.2)
    assert backoff_seconds(3, 0.1, top) == pytest.approx(0.9)
    assert backoff_seconds(10, 0.1, top) == 2.0
    assert backoff_seconds(0, 0.1, lambda low, high: low) == pytest.approx(0.1)


def test_reads_are_read_only_and_parameterized(graph_client: GraphClient) -> None:
    _seed(graph_client)
    with pytest.raises(redis.ResponseError):
        graph_client.ro_rows("user_bp", "CREATE (:Entity {name: 'nope'})")
    hostile = "one'}) DETACH DELETE n //"
    rows = graph_client.ro_rows(
        "user_bp", "MATCH (n:Entity) WHERE n.name = $name RETURN n.name AS name", {"name": hostile}
    )
    assert rows == []
    assert graph_client.ro_value("user_bp", "MATCH (n:Entity) RETURN count(n)") == 1


def test_graph_names_must_come_from_derive_group_id(graph_client: GraphClient) -> None:
    with pytest.raises(ValueError):
        graph_client.ro_rows("other_graph", "RETURN 1")
    assert graph_client.queries_run == 0


def test_slow_queries_hit_the_timeout(graph_client: GraphClient) -> None:
    _seed(graph_client)
    with pytest.raises(MemoryQueryTimeout):
        graph_client.ro_value(
            "user_bp",
            "UNWIND range(1, 5000) AS a UNWIND range(1, 5000) AS b RETURN count(*)",
            timeout_ms=20,
        )


def test_real_backpressure_is_retried_until_the_queue_drains(tmp_path: Path) -> None:
    """No wrapper: fill a private server's queue (MAX_QUEUED_QUERIES=1) and read through it."""
    data_dir = tmp_path / "fdb"
    settings = graph_settings(
        data_dir, falkordb_query_max_attempts=200, falkordb_query_backoff_base=0.05
    )
    handle = ensure_server(settings)
    socket = str(handle.unix_socket)
    try:
        # redis-py 8 defaults to a 5 s socket timeout and re-sends a timed-out command up to
        # 3 times; both would stretch a hog far past its own timeout, so turn them off here.
        admin = redis.Redis(unix_socket_path=socket, socket_timeout=60, retry=None)
        admin.execute_command("GRAPH.QUERY", "user_bp", "CREATE (:Entity {name: 'x'})")
        admin.execute_command("GRAPH.CONFIG", "SET", "MAX_QUEUED_QUERIES", 1)
        # Hogs that would run for hours but are cut by their own 5 s timeout. A hog can be
        # refused in the instant before an idle worker picks up the one queued ahead of it, so
        # a fixed number of hogs does not fill the queue for certain: keep adding hogs until
        # the server itself (GRAPH.INFO) reports every worker busy and a query waiting. From
        # then the queue stays full until those timeouts, so the client's first attempt below
        # is refused, and the queue drains by itself after.
        endless = "UNWIND range(1, 100000) AS a UNWIND range(1, 100000) AS b RETURN count(*)"
        workers = int(admin.execute_command("GRAPH.CONFIG", "GET", "THREAD_COUNT")[1])

        def hog() -> None:
            conn = redis.Redis(unix_socket_path=socket, socket_timeout=60, retry=None)
            with contextlib.suppress(redis.ResponseError):  # refused, or cut by its timeout
                conn.execute_command("GRAPH.RO_QUERY", "user_bp", endless, "timeout", 5000)

        def queue_is_full() -> bool:
            info = admin.execute_command("GRAPH.INFO")
            sections = dict(zip(info[0::2], info[1::2], strict=False))
            return (
                len(sections[b"# Running queries"]) >= workers
                and len(sections[b"# Waiting queries"]) >= 1
            )

        hogs: list[threading.Thread] = []
        deadline = time.monotonic() + 30  # a bound for a slow machine, not a timing assertion
        while not queue_is_full():
            assert time.monotonic() < deadline, "could not fill the server's query queue"
            hogs.append(threading.Thread(target=hog))
            hogs[-1].start()
            time.sleep(0.05)
        client = make_client(handle, settings)
        value = client.ro_value("user_bp", "MATCH (n:Entity) RETURN count(n)", timeout_ms=60000)
        assert value == 1
        assert client.stats.retries >= 1
        for thread in hogs:
            thread.join()
        client.close()
    finally:
        stop_server(settings)
