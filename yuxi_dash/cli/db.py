"""CLI commands that set up the stores: `db upgrade`, `db downgrade` and `demo`.

`db upgrade` applies the migrations and, as the first set-up step, creates the
workdir; `demo` seeds demo threads, tool results and user graphs. Heavy modules
are imported inside handlers so `yuxi-dash --help` stays fast.
"""

from __future__ import annotations

import argparse
from typing import Any

from yuxi_dash.cli.common import CommandResult, add_json_flag, say_progress
from yuxi_dash.cli.guards import store_errors
from yuxi_dash.errors import InvalidInput


def _migrate(action: str, revision: str) -> CommandResult:
    from alembic.util.exc import CommandError

    from yuxi_dash.settings import get_settings
    from yuxi_dash.store import db

    url = get_settings().database_url
    before = db.current_revision(url)
    try:
        (db.upgrade if action == "upgrade" else db.downgrade)(url, revision)
    except CommandError as exc:
        raise InvalidInput(f"cannot {action} to {revision!r}: {exc}") from None
    db.forget_engines()  # the next engine must not assume the old schema
    after = db.current_revision(url)
    data: dict[str, Any] = {"action": action, "from_revision": before, "revision": after}
    text = f"database {action}: {before or 'base'} -> {after or 'base'}"
    if action == "upgrade":  # first set-up creates the workdir (as do the demo and `serve`)
        from yuxi_dash.files.workdir import Workdir

        workdir = Workdir(get_settings().workdir)
        created = workdir.initialize()
        data["workdir"] = {"path": str(workdir.root), "created": created}
        text += f"\nworkdir {workdir.root}: {'created' if created else 'ready'}"
    return CommandResult(data, text=text)


def _cmd_db_upgrade(args: argparse.Namespace) -> CommandResult:
    return _migrate("upgrade", args.revision)


def _cmd_db_downgrade(args: argparse.Namespace) -> CommandResult:
    return _migrate("downgrade", args.revision)


def _cmd_demo(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.demo.seed import seed_demo
    from yuxi_dash.settings import get_settings

    report = seed_demo(
        get_settings(), reset=args.reset, memory=not args.no_memory, progress=say_progress
    )
    data = report.to_dict()
    lines = [
        f"threads: {report.threads}",
        f"users: {report.users}",
        f"tool results: {report.tool_results}",
        f"graphs: {report.graphs}",
    ]
    if report.anchor:
        lines.append(f"story time ends: {report.anchor}")
    lines.extend(f"note: {note}" for note in report.notes)
    return CommandResult(data, text="\n".join(lines))


# ---------------------------------------------------------------------------
# registration
# ---------------------------------------------------------------------------


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    """Add this group's commands to the top-level parser."""
    db_parser = sub.add_parser("db", help="database migrations")
    db_sub = db_parser.add_subparsers(dest="db_command", metavar="ACTION")
    db_sub.required = True
    upgrade = db_sub.add_parser("upgrade", help="apply pending migrations")
    upgrade.add_argument("revision", nargs="?", default="head", help="target (default head)")
    add_json_flag(upgrade)
    upgrade.set_defaults(handler=store_errors(_cmd_db_upgrade))
    downgrade = db_sub.add_parser("downgrade", help="revert migrations down to REV")
    downgrade.add_argument("revision", metavar="REV", help="target revision, e.g. -1 or base")
    add_json_flag(downgrade)
    downgrade.set_defaults(handler=store_errors(_cmd_db_downgrade))

    demo = sub.add_parser("demo", help="seed demo data into the configured stores")
    demo.add_argument("--reset", action="store_true", help="delete demo data first, start clean")
    demo.add_argument("--no-memory", action="store_true", help="threads only, no user graphs")
    add_json_flag(demo)
    demo.set_defaults(handler=store_errors(_cmd_demo))
