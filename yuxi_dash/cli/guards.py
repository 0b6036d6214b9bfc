"""What wraps a `yuxi-dash` command handler: audited refusals and an unreachable database.

`cli_refusals` makes every typed refusal inside a command's own checks one audit
row (for the reads, whose service call does not audit by itself);
`store_errors` turns a database that cannot be reached into one StoreUnavailable
line instead of an "unexpected" failure. Imports nothing from the CLI but
`cli.common`, so every command module can use them.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from yuxi_dash.cli.common import UNNAMED_ACTOR, CommandResult
from yuxi_dash.errors import InvalidInput, StoreUnavailable


def cli_refusals(
    args: argparse.Namespace, action: str, target: str
) -> AbstractContextManager[None]:
    """Around a command's own checks: every typed refusal inside is one audit row.

    For commands whose service call does not audit by itself (the reads): bad
    arguments (invalid_input, exit 2), an unknown or deleted thread (exit 3).
    The row names the command's actor (`--actor`, else YUXI_DASH_CLI_ACTOR, else
    cli); a hostile value in `target` is escaped by the audit writer.
    """
    from yuxi_dash.access.audit import audited_refusals

    return audited_refusals(
        actor=actor_id(args), action=action, target=target, detail={"via": "cli"}
    )


def actor_id(args: argparse.Namespace) -> str:
    from yuxi_dash.access.roles import cli_actor

    try:
        return cli_actor(getattr(args, "actor", None), default="cli").id
    except InvalidInput:
        return UNNAMED_ACTOR


def store_errors(handler: Callable[[argparse.Namespace], CommandResult]) -> Any:
    """Turn a database that cannot be reached into one line (StoreUnavailable), not 'unexpected'."""

    @functools.wraps(handler)
    def wrapped(args: argparse.Namespace) -> CommandResult:
        import sqlalchemy as sa

        try:
            return handler(args)
        except (sa.exc.OperationalError, sa.exc.InterfaceError) as exc:
            reason = str(exc.orig).strip().splitlines()[0][:200] if exc.orig else type(exc).__name__
            raise StoreUnavailable(
                f"database unavailable ({reason}); check YUXI_DASH_DATABASE_URL"
            ) from exc

    return wrapped
