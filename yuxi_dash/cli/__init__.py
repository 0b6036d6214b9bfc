"""The `yuxi-dash` command: argument parsing, output, exit codes, and who is acting.

Each command group lives in its own module with a `register(subparsers)`
function; a command's handler takes the parsed args and returns a
:class:`CommandResult`. This module turns typed errors into the exit codes and
the `{"error": {...}}` JSON shape, so no handler prints a traceback. What the
command modules share (`CommandResult`, `add_json_flag`, `command_actor`, which
gives a handler its actor from `--actor` or `YUXI_DASH_CLI_ACTOR` with role
`YUXI_DASH_CLI_ROLE` and audits an unusable one) is in `cli.common`, so they never
import this module; it re-exports those names.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import sys
from collections.abc import Sequence
from importlib.metadata import version
from typing import Any, NoReturn

from yuxi_dash.cli.common import (
    ACTOR_HELP,
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    UNNAMED_ACTOR,
    CommandResult,
    Handler,
    add_json_flag,
    command_actor,
    say_progress,
)
from yuxi_dash.errors import InvalidInput, YuxiDashError
from yuxi_dash.outside_text import escaped_controls

__all__ = [
    "ACTOR_HELP",
    "EXIT_FAILURE",
    "EXIT_OK",
    "EXIT_USAGE",
    "UNNAMED_ACTOR",
    "CommandResult",
    "Handler",
    "add_json_flag",
    "build_parser",
    "command_actor",
    "main",
    "say_progress",
]

log = logging.getLogger("yuxi_dash.cli")


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line with exit code 2 (and JSON if asked).

    ``json_errors`` is this parser's and its subcommands' own (set by `build_parser`
    from the argv `main` parses), so one call's ``--json`` never changes the next's.
    """

    def __init__(self, *args: Any, json_errors: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.json_errors = json_errors

    def add_subparsers(self, **kwargs: Any) -> Any:
        kwargs.setdefault("parser_class", functools.partial(_Parser, json_errors=self.json_errors))
        return super().add_subparsers(**kwargs)

    def error(self, message: str) -> NoReturn:
        if self.json_errors:
            _print_json({"error": {"code": "usage", "status": 400, "message": message}})
        else:
            print(f"yuxi-dash: {message} (see `yuxi-dash --help`)", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _settings_problem(exc: Exception) -> InvalidInput | None:
    """A bad YUXI_DASH_* variable as one line naming it (never its value), else None."""
    from pydantic import ValidationError

    if not isinstance(exc, ValidationError) or exc.title != "Settings":
        return None
    problems = [
        f"{'.'.join(str(part) for part in error['loc']) or 'settings'}: {error['msg']}"
        for error in exc.errors(include_input=False, include_url=False)
    ]
    return InvalidInput("invalid configuration: " + "; ".join(problems))


def _print_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, default=str, ensure_ascii=False, indent=2) + "\n")


def build_parser(*, json_errors: bool = False) -> argparse.ArgumentParser:
    """The `yuxi-dash` parser; ``json_errors``: usage errors are printed as JSON."""
    from yuxi_dash.cli import (
        alerts,
        api,
        attach,
        db,
        serve,
        simulate,
        threads,
        tool_results,
        workdir,
    )
    from yuxi_dash.cli.memory import views as memory

    parser = _Parser(
        prog="yuxi-dash",
        description="Operator console for context compression and Graphiti memory.",
        json_errors=json_errors,
    )
    parser.add_argument("--version", action="version", version=f"yuxi-dash {version('yuxi-dash')}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in (
        db,
        threads,
        tool_results,
        workdir,
        simulate,
        memory,
        attach,
        serve,
        api,
        alerts,
    ):
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(json_errors="--json" in argv)
    args = parser.parse_args(argv)
    want_json = bool(getattr(args, "json", False))
    handler: Handler = args.handler
    try:
        try:
            result = handler(args)
        except Exception as exc:
            problem = _settings_problem(exc)  # a bad YUXI_DASH_* variable: exit 2, named
            if problem is None:
                raise
            raise problem from None
    except YuxiDashError as exc:
        # a message may quote an outside server: no control character reaches the terminal
        message = escaped_controls(exc.message)
        if want_json:
            _print_json({"error": {**exc.to_dict(), "message": message}})
        else:
            print(f"yuxi-dash: {message} [{exc.code}]", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("yuxi-dash: interrupted", file=sys.stderr)
        return EXIT_FAILURE
    except BrokenPipeError:
        return _closed_stdout()
    except Exception as exc:  # noqa: BLE001 - last line of defence: one line, no traceback
        if os.environ.get("YUXI_DASH_DEBUG"):
            raise
        log.debug("unexpected failure", exc_info=True)
        message = f"unexpected {type(exc).__name__}; rerun with YUXI_DASH_DEBUG=1 for details"
        if want_json:
            _print_json({"error": {"code": "internal_error", "status": 500, "message": message}})
        else:
            print(f"yuxi-dash: {message}", file=sys.stderr)
        return EXIT_FAILURE
    try:
        if want_json:
            _print_json(result.data)
        elif result.text is not None:
            print(result.text)
        sys.stdout.flush()
    except BrokenPipeError:  # `yuxi-dash threads | head`: the reader left, not an error of ours
        return _closed_stdout(result.exit_code)
    return result.exit_code


def _closed_stdout(exit_code: int = EXIT_OK) -> int:
    """Silence the flush at exit after the reader closed our stdout."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return exit_code


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
