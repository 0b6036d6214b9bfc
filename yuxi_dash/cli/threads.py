"""CLI commands for threads: `import-thread`, `threads` and `compress` (`context`: `cli.context`).

Handlers parse and validate arguments, call the store, service or engine, and
return a `CommandResult` with JSON-ready `data` and an aligned plain-text table
for people. They raise typed errors; `yuxi_dash.cli.main` turns those into the
exit codes and the `{"error": {...}}` shape. Heavy modules are imported inside
handlers so `yuxi-dash --help` stays fast. The argument types are in
`cli.arguments`, the handler wrappers in `cli.guards`; `_percent`, `_store_errors`,
`cli_refusals`, `positive_int` and `non_negative_int` are still importable from here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yuxi_dash.cli.arguments import add_page_flags, ratio
from yuxi_dash.cli.arguments import non_negative_int as non_negative_int  # re-exported
from yuxi_dash.cli.arguments import positive_int as positive_int  # re-exported
from yuxi_dash.cli.common import CommandResult, actor_help, add_json_flag, command_actor
from yuxi_dash.cli.context import register as register_context
from yuxi_dash.cli.guards import cli_refusals
from yuxi_dash.cli.guards import store_errors as _store_errors
from yuxi_dash.cli.output import iso, render_table
from yuxi_dash.cli.output import percent as _percent
from yuxi_dash.errors import InvalidInput

if TYPE_CHECKING:
    from yuxi_dash.costs.prices import ModelPrices


def load_thread_file(path: str) -> dict[str, Any]:
    """Read and shape-check a thread JSON file; InvalidInput (exit 2) on any problem."""
    file_path = Path(path)
    try:
        raw = file_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInput(f"no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"cannot read {path}: {type(exc).__name__}") from None
    try:
        payload = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno})"
        ) from None
    except RecursionError:  # nesting deep enough to exhaust the parser's stack
        raise InvalidInput(f"{path} is nested too deeply to be a thread") from None
    if not isinstance(payload, dict):
        raise InvalidInput(
            f"{path} must hold a JSON object with thread_id, user_id, agent, messages"
        )
    missing = [key for key in ("thread_id", "user_id", "agent", "messages") if key not in payload]
    if missing:
        raise InvalidInput(f"{path} is missing {', '.join(missing)}")
    return payload


def _cmd_import_thread(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.service import IMPORT_ACTION, import_thread, record_import_refusal

    try:
        payload = load_thread_file(args.file)
    except InvalidInput as exc:  # an unreadable file is a refused import: on record too
        actor = command_actor(args, action=IMPORT_ACTION, target="thread:?", default="cli")
        record_import_refusal(exc, actor=actor)
        raise
    target = f"thread:{payload.get('thread_id')}"
    actor = command_actor(args, action=IMPORT_ACTION, target=target, default="cli")
    result = import_thread(payload, actor=actor)
    data = result.to_dict()
    text = render_table(
        [(data["thread_id"], data["checkpoint_id"], data["messages"], data["created"])],
        ("THREAD", "CHECKPOINT", "MESSAGES", "CREATED"),
    )
    return CommandResult(data, text=text)


# ---------------------------------------------------------------------------
# threads
# ---------------------------------------------------------------------------


def thread_summary_to_dict(item: Any) -> dict[str, Any]:
    """The JSON object for one thread of `threads`."""
    from yuxi_dash.usage import should_suggest_compression

    return {
        "thread_id": item.thread_id,
        "user_id": item.user_id,
        "agent": item.agent_slug,
        "title": item.title,
        "status": item.status,
        "summary_pressure_ratio": item.summary_pressure_ratio,
        "context_usage_ratio": item.context_usage_ratio,
        "llm_input_tokens": item.llm_input_tokens,
        "next_llm_input_tokens": item.next_llm_input_tokens,
        "summary_trigger_tokens": item.summary_trigger_tokens,
        "context_window": item.context_window,
        "summary_active": item.summary_active,
        "busy_reason": item.busy_reason,
        "capable": item.capable,
        "suggest_compression": should_suggest_compression(item.summary_pressure_ratio),
        "last_compression_at": iso(item.last_compression_at),
        "last_activity_at": iso(item.last_activity_at),
        "checkpoint_id": item.checkpoint_id,
        "attached": item.attached,
        "platform": item.platform,
        "compression": item.compression,  # supported, unsupported or "attached: <platform>"
    }


MAX_MIN_PRESSURE = 5.0  # 500%: a larger --min-pressure is a percentage typed as a ratio (85)
MAX_CROSSING_MINUTES = 1440  # --crossing-within: a day at most (an alert horizon's bound too)


def _cmd_threads(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash import validation
    from yuxi_dash.costs.spend import thread_costs
    from yuxi_dash.store.db import session_scope
    from yuxi_dash.store.models import utcnow
    from yuxi_dash.store.queries import ThreadWhere, count_threads, list_threads
    from yuxi_dash.store.thread_list import CrossingSoon, crossing_within, thread_forecasts

    crossing: CrossingSoon | None = None
    with cli_refusals(args, "cli.threads", "threads:*"):
        if args.min_pressure is not None and args.min_pressure > MAX_MIN_PRESSURE:
            raise InvalidInput(
                f"--min-pressure {args.min_pressure:g} is above {MAX_MIN_PRESSURE:g} "
                f"({MAX_MIN_PRESSURE:.0%}); --min-pressure is a ratio: 0.85 means 85%"
            )
        if args.user is not None:
            validation.text(args.user, "user id", limit=128, required=True)
        if args.agent is not None:
            validation.text(args.agent, "agent", limit=128, required=True)
        if args.crossing_within is not None and args.crossing_within > MAX_CROSSING_MINUTES:
            raise InvalidInput(f"--crossing-within is at most {MAX_CROSSING_MINUTES:,} minutes")
    where = ThreadWhere(
        min_pressure=args.min_pressure, agent=args.agent, user_id=args.user, status=args.status
    )
    prices = _prices_or_none()
    with session_scope() as session:
        if args.crossing_within is None:
            items = list_threads(session, limit=args.limit, offset=args.offset, **where)
            forecasts = thread_forecasts(session, items)  # one read of the listed threads
        else:  # the Overview's "Crossing within the hour", over MINUTES
            crossing = crossing_within(session, args.crossing_within * 60, now=utcnow(), **where)
            items = crossing.threads[args.offset : args.offset + args.limit]
            forecasts = crossing.forecasts
        costs = thread_costs(session, prices, [i.thread_id for i in items])  # None: no prices
        data = [
            {**thread_summary_to_dict(i), **forecasts[i.thread_id], "cost_usd": costs[i.thread_id]}
            for i in items
        ]
        total = count_threads(session, **where) if crossing is None else len(crossing.threads)
    rows = [
        (
            item["thread_id"],
            item["user_id"],
            item["agent"],
            item["status"],
            _percent(item["summary_pressure_ratio"]),
            _percent(item["context_usage_ratio"]),
            item["next_llm_input_tokens"],
            item["summary_trigger_tokens"],
            item["busy_reason"] or "idle",
            item["compression"],
        )
        for item in data
    ]
    table = render_table(
        rows,
        (
            "THREAD",
            "USER",
            "AGENT",
            "STATUS",
            "PRESSURE",
            "CONTEXT",
            "NEXT TOKENS",
            "TRIGGER",
            "BUSY",
            "COMPRESSION",
        ),
    )
    shown = _threads_shown(len(data), total, args) + _crossing_left_out(crossing)
    if args.json and _crossing_left_out(crossing):  # the list stays the JSON: a note on stderr
        note = _crossing_left_out(crossing).strip().replace("\n", "; ")
        print(f"yuxi-dash: {note}", file=sys.stderr, flush=True)
    return CommandResult(data, text=f"{table}\n{shown}" if data else shown)


def _prices_or_none() -> ModelPrices | None:
    """The prices (`costs.prices.load_prices`); a bad file costs the listing only its dollars:
    ``cost_usd`` null and one line on stderr (`yuxi-dash costs` is where it fails)."""
    from yuxi_dash.costs.prices import load_prices
    from yuxi_dash.errors import InvalidPricesFile
    from yuxi_dash.settings import get_settings

    try:
        return load_prices(get_settings())
    except InvalidPricesFile as exc:
        print(f"yuxi-dash: cost_usd left null: {exc.message}", file=sys.stderr, flush=True)
        return None


def _threads_shown(shown: int, total: int, args: argparse.Namespace) -> str:
    """The line under the `threads` table: how many of how many, and how to see more."""
    deleted = "" if args.status else "; deleted threads: --status deleted"
    if not shown:
        if total:
            return f"none at offset {args.offset}: {total:,} threads match{deleted}"
        return f"no threads match{deleted}"
    first, last = args.offset + 1, args.offset + shown
    span = f"{shown:,}" if args.offset == 0 else f"{first:,}–{last:,}"
    more = f"; --offset {last} for more" if last < total else ""
    order = "highest summary pressure first"
    minutes = getattr(args, "crossing_within", None)
    if minutes is not None:
        order = f"forecast to cross 100% or 85% within {minutes:,} min, 100% first, soonest first"
    return f"{span} of {total:,} threads, {order}{more}{deleted}"


def _crossing_left_out(crossing: Any) -> str:
    """With --crossing-within: the threads the forecast could not place, per reason, and
    whether only the most pressured were forecast."""
    if crossing is None:
        return ""
    said = ""
    if crossing.left_out:
        reasons = "; ".join(f"{note}: {n:,}" for note, n in sorted(crossing.left_out.items()))
        said += f"\nnot listed, no forecast: {reasons}"
    if crossing.more:
        said += f"\nforecast only the {crossing.forecast:,} most pressured threads measured then"
        said += " (the others were not forecast)"
    return said


# ---------------------------------------------------------------------------
# compress
# ---------------------------------------------------------------------------


def _compress_line(data: dict[str, Any]) -> str:
    """One line for a compress result (a platform's path and reason: control characters escaped)."""
    from yuxi_dash.outside_text import escaped_controls

    if data.get("status") == "completed":
        return (
            f"completed: {data['before_tokens']:,} -> {data['after_tokens']:,} tokens, "
            f"{data['compressed_messages']} messages summarized; "
            f"history in {escaped_controls(str(data['file_path']))} "
            f"(checkpoint {data.get('checkpoint_id')})"
        )
    reason = escaped_controls(str(data.get("reason")))
    return f"no_op: {reason} ({data['before_tokens']:,} tokens, nothing written)"


def _cmd_compress(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.sources import compress_thread_context
    from yuxi_dash.store.origin import COMPRESS_ACTION

    threads: list[str] = args.thread
    if len(threads) > 1:
        return _compress_many(args, threads)
    actor = command_actor(args, action=COMPRESS_ACTION, target=f"thread:{threads[0]}")
    result = compress_thread_context(  # what the platform refused before is not sent again
        threads[0],
        actor=actor,
        expected_checkpoint_id=args.expected_checkpoint,
        ask_platform=args.ask_platform,
    )
    data = result.to_dict()
    return CommandResult(data, text=_compress_line(data))


def _compress_many(args: argparse.Namespace, threads: list[str]) -> CommandResult:
    """Several threads through the one seam (an attached platform's: 3 calls at once).

    One line (one JSON object) per thread, in the order given; the exit code is
    the first failed thread's, 0 when every one completed or was a no_op.
    """
    from yuxi_dash.errors import YuxiDashError
    from yuxi_dash.outside_text import escaped_controls
    from yuxi_dash.sources import compress_each
    from yuxi_dash.store.origin import COMPRESS_ACTION

    actor = command_actor(args, action=COMPRESS_ACTION, target=f"thread:{threads[0]}")
    with cli_refusals(args, "cli.compress", "threads:*"):
        if args.expected_checkpoint is not None:
            raise InvalidInput(
                "--expected-checkpoint names one thread's checkpoint: give one THREAD"
            )
    data: list[dict[str, Any]] = []
    lines: list[str] = []
    exit_code = 0
    items = [(t, None) for t in threads]
    for outcome in compress_each(items, actor=actor, ask_platform=args.ask_platform):
        if outcome.result is not None:
            item = outcome.result.to_dict()
            data.append(item)
            lines.append(f"{outcome.thread_id}: {_compress_line(item)}")
            continue
        error = outcome.error
        if isinstance(error, YuxiDashError):
            message = escaped_controls(error.message)  # it may quote the platform
            data.append(
                {"thread_id": outcome.thread_id, "error": {**error.to_dict(), "message": message}}
            )
            lines.append(f"{outcome.thread_id}: {error.code}: {message}")
            exit_code = exit_code or error.exit_code
        else:
            name = type(error).__name__
            data.append(
                {
                    "thread_id": outcome.thread_id,
                    "error": {
                        "code": "internal_error",
                        "status": 500,
                        "message": f"unexpected {name}",
                    },
                }
            )
            lines.append(f"{outcome.thread_id}: internal_error: unexpected {name}")
            exit_code = exit_code or 1
    return CommandResult(data, text="\n".join(lines), exit_code=exit_code)


# ---------------------------------------------------------------------------
# registration
# ---------------------------------------------------------------------------


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    """Add this group's commands to the top-level parser."""
    imp = sub.add_parser("import-thread", help="import (or replace) a thread from a JSON file")
    imp.add_argument(
        "file", metavar="FILE", help="thread JSON: {thread_id, user_id, agent, messages}"
    )
    imp.add_argument("--actor", metavar="NAME", help=actor_help())
    add_json_flag(imp)
    imp.set_defaults(handler=_store_errors(_cmd_import_thread))

    threads = sub.add_parser(
        "threads",
        help="threads with usage metrics, highest pressure first",
        description="Threads with usage metrics, highest summary pressure first.",
    )
    threads.add_argument(
        "--min-pressure",
        type=ratio,
        metavar="R",
        help="only threads at or above this summary pressure, a ratio: 0.85 means 85%%, "
        f"at most {MAX_MIN_PRESSURE:g} (default: every one)",
    )
    threads.add_argument("--agent", metavar="SLUG", help="only this agent's (default: every agent)")
    threads.add_argument("--user", metavar="USER_ID", help="only this user's (default: every user)")
    threads.add_argument(
        "--status",
        choices=("active", "archived", "deleted"),
        help="only this status (default: active and archived; deleted only when asked)",
    )
    threads.add_argument(
        "--crossing-within",
        type=positive_int,
        metavar="MINUTES",
        help="only the threads forecast to cross 100%% or 85%% of their summary threshold "
        "within MINUTES from now, at their pace since the last compression (the time since "
        "the newest model call is taken off; the turns stay) (the Overview's 'Crossing "
        "within the hour'); 100%% first, soonest first; with --json, what was not listed "
        "is a note on stderr",
    )
    add_page_flags(threads, limit=50)
    add_json_flag(threads)
    threads.set_defaults(handler=_store_errors(_cmd_threads))

    register_context(sub)

    compress = sub.add_parser(
        "compress",
        help="manual compression: our threads in the locked core, an attached platform's there",
    )
    compress.add_argument(
        "thread", metavar="THREAD", nargs="+", help="one or more (several: one line each)"
    )
    compress.add_argument("--actor", metavar="NAME", help=actor_help(required=True))
    compress.add_argument(
        "--expected-checkpoint",
        metavar="ID",
        help="refuse (stale_state) unless the thread's newest checkpoint is ID",
    )
    compress.add_argument(
        "--ask-platform",
        action="store_true",
        help="send to the platform even if it refused this agent (or thread) before "
        "(default: refused without a call, as on the pages)",
    )
    add_json_flag(compress)
    compress.set_defaults(handler=_store_errors(_cmd_compress))
