"""The `yuxi-dash` command: argument parsing, output and exit codes (DESIGN §3).

Each command group lives in its own module with a `register(subparsers)`
function; a command's handler takes the parsed args and returns a
:class:`CommandResult`. This module turns typed errors into the exit codes and
the `{"error": {...}}` JSON shape, so no handler prints a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from yuxi_dash.errors import YuxiDashError

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


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line with exit code 2 (and JSON if asked)."""

    json_requested = False  # set by main() from the argv it parses

    def error(self, message: str) -> None:  # type: ignore[override]
        if _Parser.json_requested:
            _print_json({"error": {"code": "usage", "status": 400, "message": message}})
        else:
            print(f"yuxi-dash: {message} (see `yuxi-dash --help`)", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON to stdout and nothing else")


def say_progress(stage: str) -> None:
    """One line per stage of long work, on stderr (stdout stays the command's result)."""
    print(f"yuxi-dash: {stage}…", file=sys.stderr, flush=True)


def _print_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, default=str, ensure_ascii=False, indent=2) + "\n")


def build_parser() -> argparse.ArgumentParser:
    from yuxi_dash.cli import memory, serve, threads

    parser = _Parser(
        prog="yuxi-dash",
        description="Operator console for context compression and Graphiti memory.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for module in (threads, memory, serve):
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    argv = list(sys.argv[1:] if argv is None else argv)
    _Parser.json_requested = "--json" in argv
    parser = build_parser()
    args = parser.parse_args(argv)
    want_json = bool(getattr(args, "json", False))
    handler: Handler = args.handler
    try:
        result = handler(args)
    except YuxiDashError as exc:
        if want_json:
            _print_json({"error": exc.to_dict()})
        else:
            print(f"yuxi-dash: {exc.message} [{exc.code}]", file=sys.stderr)
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
