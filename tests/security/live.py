"""Live dashboard processes for the security tests, and a raw Streamlit websocket client.

`serving(...)` starts a real command (`yuxi-dash serve` or `streamlit run app.py`)
in its own process group on a free port, waits for Streamlit's "You can now
view" line and always kills the group. `visit(...)` is what an attacker would
use instead of a browser: it opens Streamlit's `/_stcore/stream` websocket with
chosen headers, asks for one script run and returns every element the server
drew, as (element type, text) pairs.
"""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STARTUP_SECONDS = 180
RUN_SECONDS = 120


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def yuxi_dash_command() -> list[str]:
    script = Path(sys.executable).with_name("yuxi-dash")
    return [str(script)] if script.exists() else [sys.executable, "-m", "yuxi_dash"]


def streamlit_command() -> list[str]:
    return [sys.executable, "-m", "streamlit", "run", str(REPO / "app.py")]


def dashboard_env(root: Path, **overrides: str) -> dict[str, str]:
    """The process environment: stores under `root`, no inherited YUXI_DASH_* setting."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("YUXI_DASH_", "STREAMLIT_"))}
    env.update(
        {
            "YUXI_DASH_DATABASE_URL": f"sqlite:///{root / 'yuxi_dash.db'}",
            "YUXI_DASH_WORKDIR": str(root / "workdir"),
            "YUXI_DASH_FALKORDB_DIR": str(root / "falkordb"),
            "GRAPHITI_TELEMETRY_ENABLED": "false",
            "STREAMLIT_SERVER_HEADLESS": "true",
            "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false",
        }
    )
    env.update(overrides)
    return env


@dataclass
class Process:
    """A started command: its Popen, and every line it printed so far."""

    popen: subprocess.Popen[str]
    output: list[str] = field(default_factory=list)
    lines: queue.Queue[str | None] = field(default_factory=queue.Queue)

    def text(self) -> str:
        return "".join(self.output[-60:])


def _stop(popen: subprocess.Popen[str]) -> None:
    try:
        os.killpg(popen.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        popen.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(popen.pid, signal.SIGKILL)
        popen.wait(timeout=20)


@contextmanager
def started(command: list[str], *, cwd: Path, env: Mapping[str, str]) -> Iterator[Process]:
    """Run `command` in its own process group; the group is killed when the block ends."""
    popen = subprocess.Popen(
        command,
        cwd=cwd,
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    process = Process(popen)

    def pump() -> None:
        assert popen.stdout is not None
        for line in popen.stdout:
            process.output.append(line)
            process.lines.put(line)
        process.lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    try:
        yield process
    finally:
        _stop(popen)


def wait_until_serving(process: Process, deadline_seconds: float = STARTUP_SECONDS) -> None:
    """Block until Streamlit says it is serving; fail with the output if it exits or stalls."""
    lines = process.lines
    deadline = time.monotonic() + deadline_seconds
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            pytest.fail("the dashboard did not start:\n" + process.text())
        try:
            line = lines.get(timeout=remaining)
        except queue.Empty:
            continue
        if line is None:
            pytest.fail(f"the dashboard exited ({process.popen.wait()}):\n" + process.text())
        if "You can now view" in line:
            return


@contextmanager
def serving(command: list[str], *, cwd: Path, env: Mapping[str, str]) -> Iterator[Process]:
    """`started` + `wait_until_serving`."""
    with started(command, cwd=cwd, env=env) as process:
        wait_until_serving(process)
        yield process


def visit(host: str, port: int, headers: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """Open a session over the websocket with `headers`, run the app once, return what it drew.

    `headers` may be a list of pairs to send one header several times. Each
    drawn element is (type, text): markdown and captions, alerts (st.error /
    st.info), headings, button labels. Ends at the run's `script_finished`.
    """
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from websockets.sync.client import connect

    url = f"ws://{host}:{port}/_stcore/stream"
    drawn: list[tuple[str, str]] = []
    with connect(
        url, subprotocols=["streamlit"], additional_headers=headers or {}, open_timeout=30
    ) as websocket:
        rerun = BackMsg()
        rerun.rerun_script.query_string = ""
        rerun.rerun_script.page_script_hash = ""
        websocket.send(rerun.SerializeToString())
        deadline = time.monotonic() + RUN_SECONDS
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                pytest.fail(f"no script_finished from {url}; drawn so far: {drawn}")
            message = ForwardMsg()
            message.ParseFromString(websocket.recv(timeout=remaining))
            kind = message.WhichOneof("type")
            if kind == "script_finished":
                return drawn
            if kind == "delta" and message.delta.WhichOneof("type") == "new_element":
                element = message.delta.new_element
                element_type = element.WhichOneof("type")
                inner = getattr(element, element_type)
                text = getattr(inner, "body", None) or getattr(inner, "label", None) or ""
                drawn.append((element_type, str(text)))


def texts(drawn: list[tuple[str, str]], element_type: str) -> list[str]:
    return [text for kind, text in drawn if kind == element_type]


def signed_in_line(drawn: list[tuple[str, str]]) -> str | None:
    """The sidebar's "Signed in as ..." line, with Markdown escapes removed; None when absent."""
    for text in texts(drawn, "markdown"):
        if text.startswith("Signed in as"):
            return text.replace("\\", "").replace("**", "")
    return None
