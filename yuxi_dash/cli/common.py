"""What every `yuxi-dash` command module shares: results, exit codes, flags, the actor.

The command modules (`cli.db`, `cli.threads`, `cli.tool_results`, `cli.workdir`,
`cli.simulate`, `cli.memory.views`, `cli.attach`, `cli.serve`) import these from here, never from the
`yuxi_dash.cli` package, whose `main` registers them: that way no command module
and the entry point import each other.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from yuxi_dash.errors import InvalidInput

if TYPE_CHECKING:
    from yuxi_dash.access.roles import Actor

log = logging.getLogger("yuxi_dash.cli")

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


@dataclass
class CommandResult:
    """What a handler produced: `data` for --json, `text` for people, and an exit code."""

    data: Any
    text: str | None = None
    exit_code: int = EXIT_OK
    extra: dict[str, Any] = field(default_factory=dict)


Handler = Callable[[argparse.Namespace], CommandResult]


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON to stdout and nothing else")


def say_progress(stage: str) -> None:
    """One line per stage of long work, on stderr (stdout stays the command's result)."""
    print(f"yuxi-dash: {stage}…", file=sys.stderr, flush=True)


ACTOR_HELP = "the name the audit log records as acting"
ROLE_HELP = "the role comes from YUXI_DASH_CLI_ROLE, default operator"
UNNAMED_ACTOR = "cli:unnamed"  # what the audit log records for a refused, unusable actor


def actor_help(*, required: bool = False) -> str:
    """The `--actor` help as one sentence: who is recorded, the fallback, where the role is from.

    `required`: the command refuses to run without an actor (`compress`), rather than
    falling back to `cli`.
    """
    fallback = (
        "required unless YUXI_DASH_CLI_ACTOR is set"
        if required
        else "default: YUXI_DASH_CLI_ACTOR, else cli"
    )
    return f"{ACTOR_HELP} ({fallback}); {ROLE_HELP}"


def add_actor_and_json_flags(parser: argparse.ArgumentParser) -> None:
    """`--actor` (who the audit log records) and `--json`, as every memory command takes them."""
    parser.add_argument("--actor", metavar="NAME", help=actor_help())
    add_json_flag(parser)


def add_user_command(
    sub: argparse._SubParsersAction,  # noqa: SLF001
    name: str,
    handler: Handler,
    help_text: str,
) -> argparse.ArgumentParser:
    """A `yuxi-dash memory NAME USER` command with `--actor` and `--json`, run by `handler`."""
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help_text)
    parser.add_argument("user", metavar="USER", help="the user id (graph user_<id>)")
    add_actor_and_json_flags(parser)
    parser.set_defaults(handler=handler)
    return parser


def command_actor(
    args: argparse.Namespace, *, action: str, target: str, default: str | None = None
) -> Actor:
    """The actor of this command (see `yuxi_dash.access.roles.cli_actor`).

    An empty, missing or malformed actor is InvalidInput (exit 2); the refusal is
    audited under `action` and `target` as actor `cli:unnamed`, and nothing else runs.
    """
    from yuxi_dash.access.audit import record_audit
    from yuxi_dash.access.roles import cli_actor

    try:
        return cli_actor(getattr(args, "actor", None), default=default)
    except InvalidInput as exc:
        try:
            record_audit(
                actor=UNNAMED_ACTOR,
                action=action,
                target=target,
                outcome="refused",
                detail={"code": exc.code, "reason": "actor", "via": "cli"},
            )
        except Exception:  # noqa: BLE001 - the refusal itself must still reach the caller
            log.warning("could not audit a refused CLI actor", exc_info=False)
        raise
