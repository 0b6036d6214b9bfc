"""The embedded server launcher: start, reuse, stop by PID, restart from the RDB."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import redis

from tests.fixtures.graph import graph_settings, how_the_server_died, make_client
from yuxi_dash.errors import MemoryUnavailable
from yuxi_dash.memory.graph.client import get_client
from yuxi_dash.memory.graph.server import ensure_server, stop_server
from yuxi_dash.settings import Settings


def test_ensure_server_reuses_a_live_server(falkordb_server, falkordb_dir: Path) -> None:
    again = ensure_server(graph_settings(falkordb_dir))
    assert again.pid == falkordb_server.pid
    assert again.started is False
    assert redis.Redis(unix_socket_path=str(again.unix_socket)).ping()


def test_start_stop_and_restart_keep_the_data(tmp_path: Path) -> None:
    data_dir = tmp_path / "fdb"
    settings = graph_settings(data_dir)
    first = ensure_server(settings)
    try:
        assert first.started and first.pid
        client = make_client(first, settings)
        client.write("user_persist", "CREATE (:Entity {uuid: 'a', name: 'kept'})")
        client.close()
        assert stop_server(settings) is True
        with pytest.raises(ProcessLookupError):
            os.kill(first.pid, 0)
        assert not (data_dir / "falkordb.pid").exists()
        second = ensure_server(settings)
        assert second.started and second.pid != first.pid
        client = make_client(second, settings)
        assert client.ro_value("user_persist", "MATCH (n:Entity) RETURN n.name") == "kept"
        client.close()
    finally:
        stop_server(settings)
    assert stop_server(settings) is False  # nothing left to stop


def test_long_data_dirs_get_a_short_socket(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    settings = graph_settings(deep)
    handle = ensure_server(settings)
    try:
        assert len(str(handle.unix_socket)) <= 100
        assert redis.Redis(unix_socket_path=str(handle.unix_socket)).ping()
    finally:
        stop_server(settings)


def test_external_server_is_not_started_and_unreachable_is_one_line(tmp_path: Path) -> None:
    settings = Settings(falkordb_host="127.0.0.1", falkordb_port=1, falkordb_data_dir=tmp_path)
    handle = ensure_server(settings)
    assert handle.kind == "external" and handle.pid is None
    assert not (tmp_path / "falkordb.pid").exists()
    with pytest.raises(MemoryUnavailable) as caught:
        get_client(settings)
    assert "\n" not in caught.value.message


def test_server_has_a_default_query_timeout(falkordb_server) -> None:
    """A slow query cannot hold the server: even queries we do not time ourselves are bounded by the server."""
    conn = redis.Redis(unix_socket_path=str(falkordb_server.unix_socket))
    name, value = conn.execute_command("GRAPH.CONFIG", "GET", "TIMEOUT_DEFAULT")
    assert value == Settings().falkordb_query_timeout_ms > 0
    conn.close()


def test_a_server_that_dies_under_the_tests_is_reported_with_its_signal(tmp_path: Path) -> None:
    """The fixtures' check: a crashed or killed session server names how it ended."""
    settings = graph_settings(tmp_path / "fdb")
    handle = ensure_server(settings)
    try:
        assert how_the_server_died(handle) is None
        os.kill(handle.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10  # a bound for a slow machine, not a timing assertion
        while (said := how_the_server_died(handle)) is None:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert f"pid {handle.pid}" in said and "killed by SIGKILL" in said
        assert "Ready to accept connections" in said  # the end of its log
    finally:
        stop_server(settings)
