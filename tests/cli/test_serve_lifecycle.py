"""`yuxi-dash serve` as a real process: stopping it stops the FalkorDB server it started.

Each test starts the real command on a free port in a session of its own (killed
whatever happens), waits for Streamlit's "You can now view" line, reads the
embedded server's pid from its pidfile, then stops `serve` the way a person or a
service manager does: SIGTERM to its pid, or Ctrl-C (SIGINT to the whole process
group, as a terminal sends it). Afterwards no process of that run is left: not
Streamlit, and not the FalkorDB server, which runs in a session of its own and
used to be re-parented to init.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.app import copy_demo
from tests.fixtures.live_server import free_port, yuxi_dash_command
from yuxi_dash.memory.graph.server import PIDFILE_NAME, ensure_server, stop_server
from yuxi_dash.settings import Settings

STARTUP_SECONDS = 240
STOP_SECONDS = 60

pytestmark = pytest.mark.services


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie still answers kill(0)
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return False


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


class Served:
    """One `yuxi-dash serve` subprocess and the lines it printed."""

    def __init__(self, root: Path, *extra: str) -> None:
        self.root = root
        self.env = {
            **os.environ,
            "YUXI_DASH_DATABASE_URL": f"sqlite:///{root / 'yuxi_dash.db'}",
            "YUXI_DASH_WORKDIR": str(root / "workdir"),
            "YUXI_DASH_FALKORDB_DIR": str(root / "falkordb"),
            "YUXI_DASH_AUTH_MODE": "local",
            "GRAPHITI_TELEMETRY_ENABLED": "false",
        }
        command = yuxi_dash_command()
        port = str(free_port())
        self.process = subprocess.Popen(
            [*command, "serve", *extra, "--server.port", port, "--server.headless", "true"],
            cwd=root,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its own process group, as a terminal gives a command
        )
        self.output: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def wait_for(self, text: str, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                pytest.fail(f"no {text!r} from serve:\n" + "".join(self.output[-40:]))
            try:
                line = self._lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                code = self.process.wait()
                pytest.fail(f"serve exited ({code}):\n" + "".join(self.output[-40:]))
            self.output.append(line)
            if text in line:
                return

    def drain(self) -> str:
        while True:
            try:
                line = self._lines.get(timeout=5)
            except queue.Empty:
                break
            if line is None:
                break
            self.output.append(line)
        return "".join(self.output)

    def falkordb_pid(self) -> int:
        return int((self.root / "falkordb" / PIDFILE_NAME).read_text().strip())

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[type[Served]]:
    started: list[Served] = []

    def start(*extra: str) -> Served:
        served = Served(tmp_path, *extra)
        started.append(served)
        return served

    yield start  # type: ignore[misc]
    for served in started:
        served.kill()
        stop_server(Settings(falkordb_data_dir=tmp_path / "falkordb"))


def _stop(served: Served, how: str) -> None:
    if how == "SIGTERM to serve":
        os.kill(served.process.pid, signal.SIGTERM)
    else:  # Ctrl-C in a terminal: SIGINT to every process of the foreground group
        os.killpg(served.process.pid, signal.SIGINT)
    served.process.wait(timeout=STOP_SECONDS)


@pytest.mark.parametrize(
    ("how", "demo"), [("SIGTERM to serve", True), ("Ctrl-C", False)], ids=["sigterm", "ctrl-c"]
)
def test_stopping_serve_stops_the_falkordb_server_it_started(
    serve: type[Served], how: str, demo: bool, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if demo:  # `serve --demo` on the seeded demo: it seeds nothing, then starts as usual
        copy_demo(request.getfixturevalue("demo_seed"), tmp_path)
    served = serve(*(["--demo"] if demo else []))
    served.wait_for("You can now view", STARTUP_SECONDS)
    falkordb = served.falkordb_pid()
    assert _alive(falkordb)
    assert os.getsid(falkordb) != os.getsid(served.process.pid)  # not reached by a Ctrl-C
    streamlit = [pid for pid in _children(served.process.pid) if pid != falkordb]
    assert streamlit, "serve runs Streamlit as its child"

    _stop(served, how)

    output = served.drain()
    assert served.process.returncode == 0, output
    assert not _alive(falkordb), f"FalkorDB {falkordb} outlived serve:\n{output}"
    assert not any(_alive(pid) for pid in streamlit), output
    assert not (served.root / "falkordb" / PIDFILE_NAME).exists()
    assert "stopped the embedded FalkorDB server" in output


def test_a_falkordb_server_that_was_already_running_is_left_alone(
    serve: type[Served], tmp_path: Path
) -> None:
    settings = Settings(falkordb_data_dir=tmp_path / "falkordb")
    mine = ensure_server(settings)
    assert mine.started and mine.pid is not None
    served = serve()
    served.wait_for("You can now view", STARTUP_SECONDS)
    assert served.falkordb_pid() == mine.pid  # reused, not a second server

    _stop(served, "SIGTERM to serve")

    assert served.process.returncode == 0
    assert _alive(mine.pid), "serve stopped a FalkorDB server it did not start"
    assert "stopped the embedded FalkorDB server" not in served.drain()
    assert stop_server(settings) is True
