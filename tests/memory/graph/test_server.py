"""The embedded server launcher: start, reuse, stop by PID, restart from the RDB."""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.fixtures.graph import graph_settings, how_the_server_died, make_client
from yuxi_dash.errors import MemoryUnavailable
from yuxi_dash.memory.graph import server
from yuxi_dash.memory.graph.client import get_client
from yuxi_dash.memory.graph.server import (
    ServerHandle,
    ServerLease,
    embedded_handle,
    ensure_server,
    running_pid,
    stop_server,
)
from yuxi_dash.resources import FALKORDB_CHILDREN, get_resources
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
    assert handle.pid is not None
    process = get_resources().peek(FALKORDB_CHILDREN, handle.pid)
    try:
        assert how_the_server_died(handle, process) is None
        os.kill(handle.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10  # a bound for a slow machine, not a timing assertion
        while (said := how_the_server_died(handle, process)) is None:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert f"pid {handle.pid}" in said and "killed by SIGKILL" in said
        assert running_pid(settings) is None  # the launcher lets go of the dead process
        assert "Ready to accept connections" in said  # the end of its log
    finally:
        stop_server(settings)
        (Path(tempfile.gettempdir()) / f"yuxi-falkordb-died-{handle.pid}.log").unlink(True)


@pytest.fixture
def paused_server(tmp_path: Path) -> Iterator[tuple[Settings, ServerHandle]]:
    """A private server stopped with SIGSTOP: alive, but answering nothing (as when busy)."""
    settings = graph_settings(tmp_path / "fdb")
    handle = ensure_server(settings)
    assert handle.pid is not None
    os.kill(handle.pid, signal.SIGSTOP)
    try:
        yield settings, handle
    finally:
        with contextlib.suppress(ProcessLookupError):  # a test may have killed it
            os.kill(handle.pid, signal.SIGCONT)
        stop_server(settings)


def answering_pid(handle: ServerHandle) -> int:
    """The PID of the process that answers on the handle's socket."""
    conn = redis.Redis(unix_socket_path=str(handle.unix_socket), socket_timeout=10)
    try:
        return int(conn.info("server")["process_id"])
    finally:
        conn.close()


def test_a_busy_server_is_waited_for_never_replaced(paused_server) -> None:
    settings, first = paused_server
    assert embedded_handle(settings) is None  # it does not answer now
    assert ServerLease(settings).owned is False  # it runs: a command never owns it
    resume = threading.Timer(3.0, os.kill, (first.pid, signal.SIGCONT))  # past one 2 s PING
    resume.start()
    try:
        again = ensure_server(settings)
    finally:
        resume.join()
    assert (again.pid, again.started) == (first.pid, False)
    assert answering_pid(again) == first.pid  # its socket was not taken over


def test_a_server_that_never_answers_is_refused_not_replaced(
    paused_server, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings, first = paused_server
    monkeypatch.setattr(server, "_BUSY_WAIT_SECONDS", 1.0)
    with pytest.raises(MemoryUnavailable, match=f"pid {first.pid}.*did not answer"):
        ensure_server(settings)
    os.kill(first.pid, signal.SIGCONT)
    assert answering_pid(first) == first.pid
    assert (settings.falkordb_data_dir / "falkordb.pid").read_text().strip() == str(first.pid)


def test_a_server_that_ends_while_waited_for_is_started_again(paused_server) -> None:
    settings, first = paused_server
    kill = threading.Timer(1.0, os.kill, (first.pid, signal.SIGKILL))
    kill.start()
    try:
        again = ensure_server(settings)
    finally:
        kill.join()
    assert again.started and again.pid != first.pid
    assert answering_pid(again) == again.pid


def test_a_pidfile_naming_another_program_starts_a_server(tmp_path: Path) -> None:
    """A PID reused by another process (here: this one) is not a server to wait for."""
    settings = graph_settings(tmp_path / "fdb")
    settings.falkordb_data_dir.mkdir(parents=True)
    (settings.falkordb_data_dir / "falkordb.pid").write_text(f"{os.getpid()}\n")
    try:
        assert ServerLease(settings).owned is True
        handle = ensure_server(settings)
        assert handle.started and handle.pid != os.getpid()
        assert answering_pid(handle) == handle.pid
    finally:
        stop_server(settings)


def test_a_pidfile_naming_another_dirs_server_is_neither_used_nor_stopped(
    tmp_path: Path,
) -> None:
    """A stale pidfile whose PID is now another data dir's server: that server is left alone."""
    other = graph_settings(tmp_path / "other")
    mine = graph_settings(tmp_path / "mine")
    theirs = ensure_server(other)
    try:
        mine.falkordb_data_dir.mkdir(parents=True)
        (mine.falkordb_data_dir / "falkordb.pid").write_text(f"{theirs.pid}\n")
        assert running_pid(mine) is None and ServerLease(mine).owned is True
        assert stop_server(mine) is False  # not ours to stop
        assert answering_pid(theirs) == theirs.pid
        (mine.falkordb_data_dir / "falkordb.pid").write_text(f"{theirs.pid}\n")
        handle = ensure_server(mine)
        assert handle.started and handle.pid != theirs.pid
        assert answering_pid(handle) == handle.pid and answering_pid(theirs) == theirs.pid
        stop_server(mine)
    finally:
        stop_server(other)
