"""CLI command `yuxi-dash serve [--demo] [STREAMLIT ARGS...]`: run the dashboard.

Applies pending migrations, seeds the demo data when asked and the database is
empty, pins the bind address to 127.0.0.1 in local auth mode (one operator,
no sign-in: it must not be reachable from the network), then replaces this
process with `streamlit run <repo>/app.py` plus the extra arguments.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from yuxi_dash.cli import CommandResult, add_json_flag, say_progress
from yuxi_dash.errors import InvalidInput
from yuxi_dash.settings import Settings, get_settings

LOOPBACK = "127.0.0.1"


def app_path() -> Path:
    """The Streamlit entry point: <repo>/app.py next to the package, else ./app.py."""
    beside_package = Path(__file__).resolve().parents[2] / "app.py"
    if beside_package.is_file():
        return beside_package
    return Path.cwd() / "app.py"


def _option_value(streamlit_args: list[str], name: str) -> str | None:
    """The value given for `--name` (as `--name V` or `--name=V`), else None."""
    flag = f"--{name}"
    for index, arg in enumerate(streamlit_args):
        if arg == flag and index + 1 < len(streamlit_args):
            return streamlit_args[index + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def streamlit_command(settings: Settings, streamlit_args: list[str]) -> list[str]:
    """The argv that runs the dashboard with these settings and extra arguments."""
    from yuxi_dash.ui.identity import is_loopback

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
    """Apply migrations and (with demo) seed an empty database; returns what was done."""
    from yuxi_dash.store.db import get_engine

    get_engine(settings)  # applies pending Alembic migrations once per process
    seeded = None
    if demo and _database_is_empty(settings):
        from yuxi_dash.demo import seed_demo

        seeded = seed_demo(settings, reset=False, memory=True, progress=say_progress).to_dict()
    return {"migrated": True, "demo_seeded": seeded}


def demo_environment(settings: Settings) -> dict[str, str]:
    """Extra environment for a demo: with no LaunchDarkly configured, the shipped demo flags."""
    if settings.launchdarkly_sdk_key or settings.ld_flags_file:
        return {}
    from yuxi_dash.memory.demo import DEMO_FLAGS_FILE

    return {"YUXI_DASH_LD_FLAGS_FILE": str(DEMO_FLAGS_FILE)}


def run_serve(args: argparse.Namespace) -> CommandResult:
    settings = get_settings()
    streamlit_args = [arg for arg in args.streamlit_args if arg != "--"]
    command = streamlit_command(settings, streamlit_args)  # refuse bad binds before any work
    prepared = prepare(settings, demo=args.demo)
    extra_env = demo_environment(settings) if args.demo else {}
    if args.dry_run:
        data = {**prepared, "command": command, "environment": extra_env}
        return CommandResult(data=data, text=shlex.join(command))
    if prepared["demo_seeded"]:
        report = prepared["demo_seeded"]
        print(
            f"yuxi-dash: seeded demo data ({report['threads']} threads, {report['graphs']} graphs)",
            file=sys.stderr,
        )
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(command[0], command, {**os.environ, **extra_env})
    raise AssertionError("unreachable")  # pragma: no cover


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
