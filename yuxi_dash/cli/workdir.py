"""CLI command `yuxi-dash workdir sweep [--dry-run] [--json]`: remove orphaned offloaded files.

Runs `service.sweep.sweep_workdir` as the CLI's actor (`--actor`, else
`YUXI_DASH_CLI_ACTOR`, else cli) with the role `YUXI_DASH_CLI_ROLE`: only an admin
may sweep; a viewer or operator is refused (`forbidden`, exit 1, audited).
`--dry-run` lists what would be removed and removes nothing. Prints the paths
removed and what was left alone, by reason; never a file's content.
"""

from __future__ import annotations

import argparse

from yuxi_dash.cli.common import CommandResult, add_actor_and_json_flags, command_actor
from yuxi_dash.cli.guards import store_errors

_HELD = {
    "attached_platform": "an attached platform shares this workdir and its checkpoints may "
    "name these files: nothing removed",
    "files_busy": "a compress was writing its files; nothing removed, run it again",
    "unreadable_checkpoint": "a checkpoint the projection has not caught up on could not be "
    "read; nothing removed",
}


def _cmd_sweep(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.service.sweep import SWEEP_ACTION, SWEEP_TARGET, sweep_workdir
    from yuxi_dash.settings import get_settings

    actor = command_actor(args, action=SWEEP_ACTION, target=SWEEP_TARGET, default="cli")
    report = sweep_workdir(actor=actor, settings=get_settings(), dry_run=args.dry_run)
    verb = "would remove" if report.dry_run else "removed"
    lines = [
        f"{verb} {len(report.files):,} orphaned files (no index row, older than "
        f"{report.grace_seconds:g} s)"
    ]
    lines.extend(f"  {path}" for path in report.files)
    lines.append(
        f"left: {report.young:,} within the grace period, {report.indexed:,} indexed, "
        f"{report.named_by_checkpoint:,} named by a checkpoint not yet projected, "
        f"{report.links:,} links or special files (never followed), "
        f"{report.other_names:,} with names we never write"
    )
    if report.more:
        lines.append("more orphans remain: run it again")
    if report.held is not None:
        lines.append(f"held: {_HELD.get(report.held, report.held)}")
    return CommandResult(data=report.to_dict(), text="\n".join(lines))


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    """Add `workdir` to the top-level parser."""
    parser = sub.add_parser("workdir", help="the workdir of offloaded tool results")
    actions = parser.add_subparsers(dest="workdir_command", metavar="ACTION")
    actions.required = True
    sweep = actions.add_parser(
        "sweep",
        help="remove offloaded files no index row names, older than the grace period (admin)",
    )
    sweep.add_argument(
        "--dry-run", action="store_true", help="list what would be removed; remove nothing"
    )
    add_actor_and_json_flags(sweep)
    sweep.set_defaults(handler=store_errors(_cmd_sweep))
