"""CLI command `yuxi-dash serve [--demo] [STREAMLIT ARGS...]`: run the dashboard.

Applies pending migrations, seeds the demo when asked and the database is empty, and runs
`streamlit run <repo>/app.py` plus the extra arguments as its child. In local auth mode (no
sign-in) the bind address is pinned to 127.0.0.1: it must not be reachable from the network.

It holds a `ServerLease` from the start: the embedded FalkorDB server starts before the
dashboard, and when the dashboard exits or `serve` gets SIGTERM, SIGINT or SIGHUP (also
while migrating or seeding), Streamlit and then the server are stopped, unless that server
was already running (or is external).

Background threads: the attach scan every `YUXI_DASH_ATTACH_SCAN_SECONDS` when
`YUXI_DASH_ATTACH_CHECKPOINTER` is set (`attach.loop`; a failed scan is one line), else the
orphan sweep every `YUXI_DASH_WORKDIR_SWEEP_SECONDS` (`service.sweep.SweepLoop`; 0: never); and the
alert pass every `YUXI_DASH_ALERT_EVALUATE_SECONDS`, on one replica (`alerts.loop`; 0: off).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from yuxi_dash.cli.common import CommandResult, add_json_flag, say_progress
from yuxi_dash.errors import InvalidInput, YuxiDashError
from yuxi_dash.settings import Settings, get_settings

if TYPE_CHECKING:
    from yuxi_dash.alerts.loop import AlertLoop
    from yuxi_dash.attach.loop import ScanLoop
    from yuxi_dash.memory.graph.server import ServerLease
    from yuxi_dash.service.sweep import SweepLoop

LOOPBACK = "127.0.0.1"
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
CHILD_STOP_SECONDS = 20.0  # how long Streamlit may take to stop before it is killed


def app_path() -> Path:
    """The Streamlit entry point: <repo>/app.py next to the package, else ./app.py."""
    beside_package = Path(__file__).resolve().parents[2] / "app.py"
    if beside_package.is_file():
        return beside_package
    return Path.cwd() / "app.py"


def _option_value(streamlit_args: list[str], name: str) -> str | None:
    """The value Streamlit will use for `--name`: the LAST one given, else None.

    Streamlit keeps the last of repeated options (`--server.address 127.0.0.1
    --server.address 0.0.0.0` binds 0.0.0.0), so the last one is what is checked.
    """
    flag = f"--{name}"
    value = None
    for index, arg in enumerate(streamlit_args):
        if arg == flag and index + 1 < len(streamlit_args):
            value = streamlit_args[index + 1]
        elif arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
    return value


def streamlit_command(settings: Settings, streamlit_args: list[str]) -> list[str]:
    """The argv that runs the dashboard with these settings and extra arguments.

    In local mode the bind is 127.0.0.1 unless the arguments end up naming
    another loopback address; a non-loopback one is refused here. The dashboard
    checks the address Streamlit really bound again on every visit, which also
    covers a plain `streamlit run app.py`.
    """
    from yuxi_dash.access.roles import is_loopback

    args = list(streamlit_args)
    address = _option_value(args, "server.address")
    if settings.auth_mode == "local":
        if address is None:
            args = ["--server.address", LOOPBACK, *args]
        elif not is_loopback(address):
            raise InvalidInput(
                f"local auth mode serves 127.0.0.1 only, not {address}; "
                "set YUXI_DASH_AUTH_MODE=oidc or proxy to serve a network"
            )
    return [sys.executable, "-m", "streamlit", "run", str(app_path()), *args]


def _database_is_empty(settings: Settings) -> bool:
    from yuxi_dash.store.db import session_scope
    from yuxi_dash.store.queries import count_threads

    with session_scope(settings) as session:
        return count_threads(session) == 0


def prepare(settings: Settings, *, demo: bool) -> dict:
    """Apply migrations and (with demo) seed an empty database; returns what was done.

    The workdir is created here only on first set-up: a demo, or a database with
    no threads yet (nothing whose files could be elsewhere). Otherwise a missing
    workdir (say a shared volume that did not mount) stays missing and every
    compress answers 503 workdir_unavailable.
    """
    from yuxi_dash.files.workdir import Workdir
    from yuxi_dash.store.db import get_engine

    get_engine(settings)  # applies pending Alembic migrations once per process
    empty = _database_is_empty(settings)
    if demo or empty:
        Workdir(settings.workdir).initialize()
    seeded = None
    if demo and empty:
        from yuxi_dash.demo.seed import seed_demo

        seeded = seed_demo(settings, reset=False, memory=True, progress=say_progress).to_dict()
    return {"migrated": True, "demo_seeded": seeded}


def demo_environment(settings: Settings) -> dict[str, str]:
    """Extra environment for a demo: with no LaunchDarkly configured, the shipped demo flags."""
    if settings.launchdarkly_sdk_key or settings.ld_flags_file:
        return {}
    from yuxi_dash.demo.flags import DEMO_FLAGS_FILE

    return {"YUXI_DASH_LD_FLAGS_FILE": str(DEMO_FLAGS_FILE)}


class _Supervisor:
    """Stops the dashboard on SIGTERM, SIGINT or SIGHUP; before it runs, unwinds `serve`."""

    def __init__(self) -> None:
        self.child: subprocess.Popen[bytes] | None = None
        self.signals: list[int] = []
        self.stop_requested_at: float | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.signals.append(signum)
        if self.child is None:  # migrating or seeding: unwind, so the lease is released
            raise KeyboardInterrupt
        if self.stop_requested_at is None:
            self.stop_requested_at = time.monotonic()
            self.stop_child(signal.SIGTERM)

    def stop_child(self, signum: int) -> None:
        if self.child is not None and self.child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.child.send_signal(signum)

    def wait(self) -> int:
        """The child's exit code, once it has exited (killed if it ignores a stop too long)."""
        assert self.child is not None
        while True:
            try:
                return self.child.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                asked = self.stop_requested_at
                if asked is not None and time.monotonic() - asked > CHILD_STOP_SECONDS:
                    self.stop_child(signal.SIGKILL)

    def end(self) -> None:
        """Make sure the child is gone: SIGTERM, then SIGKILL after `CHILD_STOP_SECONDS`."""
        if self.child is None or self.child.poll() is not None:
            return
        self.stop_child(signal.SIGTERM)
        try:
            self.child.wait(timeout=CHILD_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.stop_child(signal.SIGKILL)
            self.child.wait()


def run_serve(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.memory.graph.server import ServerLease
    from yuxi_dash.service.sweep import SweepLoop

    settings = get_settings()
    streamlit_args = [arg for arg in args.streamlit_args if arg != "--"]
    command = streamlit_command(settings, streamlit_args)  # refuse bad binds before any work
    supervisor = _Supervisor()
    on_main_thread = threading.current_thread() is threading.main_thread()  # signals: main only
    previous = {sig: signal.signal(sig, supervisor) for sig in STOP_SIGNALS if on_main_thread}
    lease = ServerLease(settings)  # before seeding, which may start the embedded server
    scanner: ScanLoop | None = None
    sweeper: SweepLoop | None = None
    alerter: AlertLoop | None = None
    try:
        prepared = prepare(settings, demo=args.demo)
        extra_env = demo_environment(settings) if args.demo else {}
        if args.dry_run:
            data = {**prepared, "command": command, "environment": extra_env}
            return CommandResult(data=data, text=shlex.join(command))
        if prepared["demo_seeded"]:
            report = prepared["demo_seeded"]
            say(f"seeded demo data ({report['threads']} threads, {report['graphs']} graphs)")
        _start_graph_server(lease)
        if settings.attach_configured:  # the attached platform's threads, every N seconds
            from yuxi_dash.attach.loop import ScanLoop

            scanner = ScanLoop(settings, report=say).start()
        elif SweepLoop.wanted(settings):  # orphaned offloaded files, every N seconds
            sweeper = SweepLoop(settings, report=say).start()
        if settings.alert_evaluate_seconds > 0:  # pending alerts fire on time; notices are sent
            from yuxi_dash.alerts.loop import AlertLoop

            alerter = AlertLoop(settings, report=say).start()
        sys.stdout.flush()
        sys.stderr.flush()
        supervisor.child = subprocess.Popen(command, env={**os.environ, **extra_env})
        if supervisor.signals:  # a stop arrived while the child was being started
            supervisor.stop_child(signal.SIGTERM)
        code = supervisor.wait()
        if supervisor.signals:
            say("stopped")
            code = 0  # stopped as asked
        return CommandResult(data={"exit_code": code}, text=None, exit_code=code)
    finally:
        supervisor.end()
        if scanner is not None:
            scanner.stop()
        if sweeper is not None:
            sweeper.stop()
        if alerter is not None:
            alerter.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if lease.release():
            say(f"stopped the embedded FalkorDB server it started ({settings.falkordb_data_dir})")


def _start_graph_server(lease: ServerLease) -> None:
    """Start the embedded FalkorDB server before the dashboard, so `serve` owns it.

    A server that cannot start is one line; the dashboard still runs (its memory
    pages say the memory server is unavailable).
    """
    try:
        handle = lease.ensure()
    except YuxiDashError as exc:
        say(f"the memory server is unavailable: {exc.message}")
        return
    if handle.started:
        say(f"started {handle.describe()}, pid {handle.pid}; it stops when serve stops")


def say(line: str) -> None:
    print(f"yuxi-dash: {line}", file=sys.stderr, flush=True)


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    """Add `serve` to the top-level parser."""
    parser = sub.add_parser(
        "serve",
        help="run the dashboard (extra arguments go to `streamlit run`)",
        description="Run the dashboard. Arguments after the options go to `streamlit run`, "
        "e.g. `yuxi-dash serve --demo --server.port 8502`.",
    )
    parser.add_argument(
        "--demo", action="store_true", help="seed demo data if the database is empty"
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="migrate and seed, then print the command instead of running it",
    )
    add_json_flag(parser)
    parser.set_defaults(handler=run_serve, streamlit_args=[])
    _pass_unknown_to_streamlit(parser)


def _pass_unknown_to_streamlit(parser: argparse.ArgumentParser) -> None:
    """Keep arguments `serve` does not know (in order) for `streamlit run` instead of failing."""
    parse_known = parser.parse_known_args

    def parse_known_args(args=None, namespace=None):  # noqa: ANN001, ANN202 - argparse's signature
        parsed, unknown = parse_known(args, namespace)
        parsed.streamlit_args = [*parsed.streamlit_args, *unknown]
        return parsed, []

    parser.parse_known_args = parse_known_args  # type: ignore[method-assign]
