"""CLI commands for support tickets: `memory forget USER --confirm USER` and `memory bundle USER`.

Both go through the same services as the Memory support page, so the gates, roles and audit
rows are the same:
- `memory forget` (admin only: YUXI_DASH_CLI_ROLE=admin) deletes the user's graph and hit
  counters and checks nothing is left; it works whether or not the memory flag is on
  (erasure is a right). A wrong `--confirm` is exit 2, a missing role exit 1, both audited
  and nothing deleted. Prints what was deleted and the audit row id (`audit_id` in --json).
- `memory bundle USER --out FILE [--format json|md] [--episodes N] [--as-of ISO]` writes
  the support bundle to FILE (streamed; replaced only when complete) and prints its counts
  and the audit row id. Viewer or higher; a gated-off user still gets a bundle without
  facts. `--as-of` adds the memory as it was then (`as_of` in `memory`). Progress lines
  (facts done of the total per page, then each section) go to stderr, the result to stdout.

Registered from `cli.memory.views` (`register(memory_sub)`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yuxi_dash.cli.common import (
    CommandResult,
    Handler,
    add_user_command,
    command_actor,
    say_progress,
)
from yuxi_dash.cli.guards import cli_refusals
from yuxi_dash.errors import InvalidInput

if TYPE_CHECKING:
    from yuxi_dash.memory.support.bundle import BundleProgress


def _forget(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.memory.support.forget import FORGET_ACTION, forget_user

    actor = command_actor(args, action=FORGET_ACTION, target=f"memory:{args.user}", default="cli")
    report = forget_user(args.user, args.confirm, actor=actor).to_dict()
    deleted = report["deleted"]
    text = (
        f"forgot {args.user}: {deleted['nodes']:,} nodes ({deleted['entities']:,} entities, "
        f"{deleted['episodes']:,} episodes, {deleted['communities']:,} communities), "
        f"{deleted['edges']:,} edges ({deleted['facts']:,} facts), "
        f"{deleted['redis_keys']:,} hit counters; verified: nothing is left. "
        f"Left alone: {', '.join(report['left_alone'])}. audit row {report['audit_id']}"
    )
    return CommandResult(report, text)


def say_bundle_progress(step: BundleProgress) -> None:
    """One stderr line per page of facts and per later section of a bundle."""
    done = f"{step.fraction:.0%}"
    if step.section in ("facts", "as_of_facts"):
        say_progress(f"bundle: {step.facts:,} of {step.facts_total:,} facts ({done})")
    else:
        say_progress(f"bundle: {step.section.replace('_', ' ')} ({done})")


def _bundle(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.memory.support.bundle import BUNDLE_ACTION, bundle_to_file

    target = f"memory:{args.user}"
    actor = command_actor(args, action=BUNDLE_ACTION, target=target, default="cli")
    out = Path(args.out)
    with cli_refusals(args, BUNDLE_ACTION, target):
        if out.is_dir() or not out.parent.is_dir():
            raise InvalidInput("--out must name a file in an existing directory")
    fmt = args.format or ("md" if out.suffix.lower() == ".md" else "json")
    result = bundle_to_file(
        args.user,
        out,
        actor=actor,
        fmt=fmt,
        episodes=args.episodes,
        as_of=args.as_of,
        progress=say_bundle_progress,
    )
    data: dict[str, Any] = {**result.to_dict(), "path": str(out)}
    gated = " (memory is gated off: no facts)" if result.gated_off else ""
    text = (
        f"wrote {out} ({fmt}){gated}: {result.facts:,} facts, {result.episodes} episodes, "
        f"{result.corrections} corrections, {result.threads} threads, "
        f"{result.tool_results} tool results; audit row {result.audit_id}"
    )
    return CommandResult(data, text)


def register(memory_sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    """Add `forget` and `bundle` under `yuxi-dash memory`."""
    from yuxi_dash.cli.threads import non_negative_int

    def command(name: str, handler: Handler, help_text: str) -> argparse.ArgumentParser:
        return add_user_command(memory_sub, name, handler, help_text)

    forget = command(
        "forget",
        _forget,
        "admin: delete the user's memory graph and hit counters, then verify nothing is left",
    )
    forget.add_argument(
        "--confirm", required=True, metavar="USER", help="the user id again, exactly"
    )
    bundle = command("bundle", _bundle, "write a support bundle (flags, facts, threads) to a file")
    bundle.add_argument("--out", required=True, metavar="FILE", help="where to write the bundle")
    bundle.add_argument(
        "--format", choices=["json", "md"], default=None, help="default: md for *.md, else json"
    )
    bundle.add_argument("--episodes", type=non_negative_int, default=20, help="newest N episodes")
    bundle.add_argument(
        "--as-of",
        dest="as_of",
        metavar="ISO",
        default=None,
        help="also the memory as it was at this moment (ISO date or date and time, UTC)",
    )
