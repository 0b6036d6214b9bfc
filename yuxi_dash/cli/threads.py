"""CLI commands for the store and threads: `db`, `demo`, `import-thread`, `threads`,
`context`, `compress`, `tool-results` and `simulate` (DESIGN §3).

Handlers parse and validate arguments, call the store, service, engine or
simulator, and return a `CommandResult` with JSON-ready `data` and an aligned
plain-text table for people. They raise typed errors; `yuxi_dash.cli.main`
turns those into the exit codes and the `{"error": {...}}` shape. Heavy modules
are imported inside handlers so `yuxi-dash --help` stays fast.
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from yuxi_dash.cli import EXIT_FAILURE, EXIT_OK, CommandResult, add_json_flag, say_progress
from yuxi_dash.errors import InvalidInput, StoreUnavailable, ThreadNotFound

# ---------------------------------------------------------------------------
# Plain-text rendering
# ---------------------------------------------------------------------------


def render_table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    """An aligned plain table; numeric columns are right-aligned."""
    cells = [[_cell(value) for value in row] for row in rows]
    widths = [len(header) for header in headers]
    for row in cells:
        for index, value in enumerate(row):
            widths[index] = max(widths[index], len(value))
    numeric = [bool(rows) and all(_is_numeric(row[i]) for row in rows) for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        parts = [
            value.rjust(widths[i]) if numeric[i] else value.ljust(widths[i])
            for i, value in enumerate(values)
        ]
        return "  ".join(parts).rstrip()

    out = [line(headers), line(["-" * width for width in widths])]
    out.extend(line(row) for row in cells)
    return "\n".join(out)


def _is_numeric(value: Any) -> bool:
    if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
        return True
    return isinstance(value, str) and value.endswith("%") and value[:-1].replace(".", "").isdigit()


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, int):
        return f"{value:,}"
    text = str(value).replace("\n", " ")
    return text if len(text) <= 60 else text[:57] + "..."


def _percent(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio * 100:.1f}%"


def _iso(value: Any) -> str | None:
    return value.isoformat() if hasattr(value, "isoformat") else value


# ---------------------------------------------------------------------------
# Argument types (bad input is a usage error, exit 2, one line)
# ---------------------------------------------------------------------------


def _ratio(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"ratio out of range (0..100): {text}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text}")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text}")
    return value


# ---------------------------------------------------------------------------
# db
# ---------------------------------------------------------------------------


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
    data = {"action": action, "from_revision": before, "revision": after}
    return CommandResult(data, text=f"database {action}: {before or 'base'} -> {after or 'base'}")


def _cmd_db_upgrade(args: argparse.Namespace) -> CommandResult:
    return _migrate("upgrade", args.revision)


def _cmd_db_downgrade(args: argparse.Namespace) -> CommandResult:
    return _migrate("downgrade", args.revision)


# ---------------------------------------------------------------------------
# demo and simulate
# ---------------------------------------------------------------------------


def _cmd_demo(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.demo import seed_demo
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
    lines.extend(f"note: {note}" for note in report.notes)
    return CommandResult(data, text="\n".join(lines))


def _cmd_simulate(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.settings import get_settings
    from yuxi_dash.simulate import simulate

    report = simulate(
        get_settings(),
        threads=args.threads,
        turns=args.turns,
        seed=args.seed,
        user_id=args.user,
        agent_slug=args.agent,
        pace_seconds=args.pace,
    )
    data = report.to_dict()
    rows = [
        (
            item["thread_id"],
            item["turns"],
            item["model_calls"],
            item["auto_compactions"],
            item["summaries"],
            _percent(item["summary_pressure_ratio"]),
        )
        for item in data["threads"]
    ]
    table = render_table(
        rows, ("THREAD", "TURNS", "MODEL CALLS", "AUTO COMPACTIONS", "SUMMARIES", "PRESSURE")
    )
    return CommandResult(data, text=table)


# ---------------------------------------------------------------------------
# import-thread
# ---------------------------------------------------------------------------


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
    if not isinstance(payload, dict):
        raise InvalidInput(
            f"{path} must hold a JSON object with thread_id, user_id, agent, messages"
        )
    missing = [key for key in ("thread_id", "user_id", "agent", "messages") if key not in payload]
    if missing:
        raise InvalidInput(f"{path} is missing {', '.join(missing)}")
    return payload


def _cmd_import_thread(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.auth import cli_actor
    from yuxi_dash.service import import_thread

    payload = load_thread_file(args.file)
    result = import_thread(payload, actor=cli_actor(args.actor))
    data = result.to_dict()
    text = render_table(
        [(data["thread_id"], data["version"], data["messages"], data["created"])],
        ("THREAD", "VERSION", "MESSAGES", "CREATED"),
    )
    return CommandResult(data, text=text)


# ---------------------------------------------------------------------------
# threads
# ---------------------------------------------------------------------------


def thread_summary_to_dict(item: Any) -> dict[str, Any]:
    """The DESIGN §3 JSON object for one thread of `threads`."""
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
        "last_compression_at": _iso(item.last_compression_at),
        "last_activity_at": _iso(item.last_activity_at),
        "version": item.version,
    }


def _cmd_threads(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.store.db import session_scope
    from yuxi_dash.store.queries import list_threads

    with session_scope() as session:
        items = list_threads(
            session,
            min_pressure=args.min_pressure,
            agent=args.agent,
            user_id=args.user,
            status=args.status,
            limit=args.limit,
            offset=args.offset,
        )
        data = [thread_summary_to_dict(item) for item in items]
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
        ),
    )
    if not data:
        table += "\n(no threads match)"
    return CommandResult(data, text=table)


# ---------------------------------------------------------------------------
# context
# ---------------------------------------------------------------------------


def _message_role(message: Any) -> str:
    from yuxi_dash.compression.state import chat_role, is_summary_message

    return "summary" if is_summary_message(message) else chat_role(message)


def _message_preview(message: Any, width: int = 160) -> str:
    content = message.content if isinstance(message.content, str) else json.dumps(message.content)
    if not content and getattr(message, "tool_calls", None):
        content = "calls " + ", ".join(call["name"] for call in message.tool_calls)
    content = " ".join(content.split())
    return content if len(content) <= width else content[: width - 3] + "..."


def build_context_view(thread_id: str) -> dict[str, Any]:
    """What the next model call of `thread_id` would see, with token counts.

    The view is the engine's `model_view` (summary first, long write_file
    arguments shortened), so the total equals the engine's count and the
    per-message counts add up to it.
    """
    from yuxi_dash.compression import (
        count_tokens,
        is_saved_result,
        model_view,
        parse_saved_header,
    )
    from yuxi_dash.store.db import session_scope
    from yuxi_dash.store.queries import get_thread
    from yuxi_dash.usage import summary_pressure_ratio

    with session_scope() as session:
        detail = get_thread(session, thread_id)
    if detail.summary.status == "deleted":
        raise ThreadNotFound(f"thread {thread_id} not found")
    state = detail.state
    view = model_view(state)
    first_index = state.visible_start
    has_summary = state.summary is not None
    messages: list[dict[str, Any]] = []
    saved: list[dict[str, Any]] = []
    for position, message in enumerate(view):
        if has_summary and position == 0:
            index: int | None = None
        else:
            index = first_index + position - (1 if has_summary else 0)
        entry: dict[str, Any] = {
            "index": index,
            "role": _message_role(message),
            "tokens": count_tokens([message]),
            "preview": _message_preview(message),
        }
        if message.type == "tool":
            entry["tool_name"] = message.name
            entry["tool_call_id"] = message.tool_call_id
            entry["offloaded"] = is_saved_result(message)
            if entry["offloaded"]:
                header = parse_saved_header(message.content)
                original = header.get("Approx tokens", "")
                saved.append(
                    {
                        "index": index,
                        "tool_name": header.get("Tool") or message.name,
                        "tool_call_id": message.tool_call_id,
                        "path": header.get("Full output path"),
                        "sha256": header.get("SHA-256"),
                        "original_tokens": int(original) if original.isdigit() else None,
                        "tokens": entry["tokens"],
                        "preview": message.content,
                    }
                )
        if getattr(message, "tool_calls", None):
            entry["tool_calls"] = [call["name"] for call in message.tool_calls]
        messages.append(entry)
    total = count_tokens(view)
    summary = None
    if state.summary is not None:
        summary = {
            "cutoff_index": state.summary.cutoff_index,
            "file_path": state.summary.file_path,
            "tokens": count_tokens([state.summary.summary_message]),
            "content": state.summary.summary_message.content,
        }
    trigger = detail.agent.summary_trigger_tokens if detail.agent else None
    return {
        "thread_id": thread_id,
        "agent": detail.summary.agent_slug,
        "version": detail.version,
        "summary_active": state.summary_active(),
        "total_tokens": total,
        "messages_total": len(state.messages),
        "messages_visible": len(view),
        "summary_trigger_tokens": trigger,
        "summary_pressure_ratio": summary_pressure_ratio(total, trigger) if trigger else None,
        "summary": summary,
        "saved_results": saved,
        "messages": messages,
    }


SUMMARY_TEXT_LINES = 14
SAVED_PREVIEW_LINES = 3


def _indented(text: str, *, max_lines: int, width: int = 110) -> list[str]:
    lines = [
        line if len(line) <= width else line[: width - 3] + "..." for line in text.splitlines()
    ]
    shown = [f"    {line}" for line in lines[:max_lines]]
    if len(lines) > max_lines:
        shown.append(f"    ... ({len(lines) - max_lines} more lines; --json has all of it)")
    return shown


def _cmd_context(args: argparse.Namespace) -> CommandResult:
    view = build_context_view(args.thread)
    rows = [
        (
            "summary" if entry["index"] is None else entry["index"],
            entry["role"],
            entry["tokens"],
            entry["preview"],
        )
        for entry in view["messages"]
    ]
    lines = [
        f"thread {view['thread_id']} (agent {view['agent']}, version {view['version']})",
        f"next model call: {view['total_tokens']:,} tokens in {view['messages_visible']} "
        f"of {view['messages_total']} messages"
        + (
            f"; {_percent(view['summary_pressure_ratio'])} of the "
            f"{view['summary_trigger_tokens']:,}-token summary threshold"
            if view["summary_trigger_tokens"]
            else ""
        ),
    ]
    if view["summary"]:
        lines.append(
            f"summary active: messages before {view['summary']['cutoff_index']} are summarized "
            f"({view['summary']['tokens']:,} tokens); history in {view['summary']['file_path']}"
        )
    lines.append("")
    lines.append(render_table(rows, ("#", "ROLE", "TOKENS", "CONTENT")))
    if view["summary"]:
        lines.extend(["", "summary:"])
        lines.extend(_indented(view["summary"]["content"], max_lines=SUMMARY_TEXT_LINES))
    if view["saved_results"]:
        lines.extend(
            ["", f"saved tool results (the model sees previews): {len(view['saved_results'])}"]
        )
        for item in view["saved_results"]:
            original = item["original_tokens"]
            lines.append(
                f"#{item['index']} {item['tool_name']}: "
                f"{original:,} tokens saved, {item['tokens']:,} shown; "
                f"{item['path']} sha256 {str(item['sha256'])[:16]}"
                if original is not None
                else f"#{item['index']} {item['tool_name']}: {item['path']}"
            )
            preview = item["preview"].partition("Output preview:\n")[2] or item["preview"]
            lines.extend(_indented(preview, max_lines=SAVED_PREVIEW_LINES))
    return CommandResult(view, text="\n".join(lines))


# ---------------------------------------------------------------------------
# compress
# ---------------------------------------------------------------------------


def _cmd_compress(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.auth import cli_actor
    from yuxi_dash.service import compress_thread_context

    result = compress_thread_context(
        args.thread, actor=cli_actor(args.actor), expected_version=args.expected_version
    )
    data = result.to_dict()
    if data.get("status") == "completed":
        text = (
            f"completed: {data['before_tokens']:,} -> {data['after_tokens']:,} tokens, "
            f"{data['compressed_messages']} messages summarized into {data['file_path']} "
            f"(version {data.get('version')})"
        )
    else:
        text = f"no_op: {data.get('reason')} ({data['before_tokens']:,} tokens, nothing written)"
    return CommandResult(data, text=text)


# ---------------------------------------------------------------------------
# tool-results
# ---------------------------------------------------------------------------


def _cmd_tool_results(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.store.db import session_scope
    from yuxi_dash.tool_results import list_tool_results, verify_tool_results

    if args.verify:
        with session_scope() as session:
            report = verify_tool_results(session, thread_id=args.thread)
        counts = report.counts
        data = {
            "checked": len(report.results),
            "ok": counts["ok"],
            "missing": counts["missing"],
            "mismatch": counts["mismatch"],
            "problems": [item.to_dict() for item in report.problems],
        }
        text = (
            f"checked {data['checked']} files: {data['ok']} ok, "
            f"{data['missing']} missing, {data['mismatch']} mismatched"
        )
        if report.problems:
            rows = [
                (item.status, item.thread_id, item.tool_name, item.path) for item in report.problems
            ]
            text += "\n" + render_table(rows, ("CHECK", "THREAD", "TOOL", "PATH"))
        return CommandResult(data, text=text, exit_code=EXIT_OK if report.all_ok else EXIT_FAILURE)

    with session_scope() as session:
        items = [
            _row_to_dict(item)
            for item in list_tool_results(
                session, thread_id=args.thread, limit=args.limit, offset=args.offset
            )
        ]
    rows = [
        (
            item["id"],
            item["thread_id"],
            item["tool_name"],
            item["chars"],
            item["approx_tokens"],
            str(item["sha256"])[:16],
            item["path"],
        )
        for item in items
    ]
    text = render_table(rows, ("ID", "THREAD", "TOOL", "CHARS", "TOKENS", "SHA-256", "PATH"))
    if not items:
        text += "\n(no offloaded tool results)"
    return CommandResult(items, text=text)


def _row_to_dict(item: Any) -> dict[str, Any]:
    return {key: _iso(value) for key, value in item.to_dict().items()}


# ---------------------------------------------------------------------------
# registration
# ---------------------------------------------------------------------------


def _store_errors(handler: Callable[[argparse.Namespace], CommandResult]) -> Any:
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


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    """Add this group's commands to the top-level parser."""
    db_parser = sub.add_parser("db", help="database migrations")
    db_sub = db_parser.add_subparsers(dest="db_command", metavar="ACTION")
    db_sub.required = True
    upgrade = db_sub.add_parser("upgrade", help="apply pending migrations")
    upgrade.add_argument("revision", nargs="?", default="head", help="target (default head)")
    add_json_flag(upgrade)
    upgrade.set_defaults(handler=_store_errors(_cmd_db_upgrade))
    downgrade = db_sub.add_parser("downgrade", help="revert migrations down to REV")
    downgrade.add_argument("revision", metavar="REV", help="target revision, e.g. -1 or base")
    add_json_flag(downgrade)
    downgrade.set_defaults(handler=_store_errors(_cmd_db_downgrade))

    demo = sub.add_parser("demo", help="seed demo data into the configured stores")
    demo.add_argument("--reset", action="store_true", help="delete demo data first, start clean")
    demo.add_argument("--no-memory", action="store_true", help="threads only, no user graphs")
    add_json_flag(demo)
    demo.set_defaults(handler=_store_errors(_cmd_demo))

    imp = sub.add_parser("import-thread", help="import (or replace) a thread from a JSON file")
    imp.add_argument(
        "file", metavar="FILE", help="thread JSON: {thread_id, user_id, agent, messages}"
    )
    imp.add_argument("--actor", default="cli", help="who the audit log records (default cli)")
    add_json_flag(imp)
    imp.set_defaults(handler=_store_errors(_cmd_import_thread))

    threads = sub.add_parser("threads", help="threads with usage metrics, highest pressure first")
    threads.add_argument("--min-pressure", type=_ratio, metavar="R", help="e.g. 0.85")
    threads.add_argument("--agent", metavar="SLUG")
    threads.add_argument("--user", metavar="USER_ID")
    threads.add_argument("--status", choices=("active", "archived", "deleted"))
    threads.add_argument("--limit", type=_positive_int, default=50, metavar="N")
    threads.add_argument("--offset", type=_non_negative_int, default=0, metavar="N")
    add_json_flag(threads)
    threads.set_defaults(handler=_store_errors(_cmd_threads))

    context = sub.add_parser("context", help="what the next model call would see")
    context.add_argument("thread", metavar="THREAD")
    add_json_flag(context)
    context.set_defaults(handler=_store_errors(_cmd_context))

    compress = sub.add_parser("compress", help="manual compression through the locked core")
    compress.add_argument("thread", metavar="THREAD")
    compress.add_argument("--actor", required=True, help="who the audit log records")
    compress.add_argument(
        "--expected-version",
        type=_non_negative_int,
        metavar="V",
        help="refuse (stale_state) if the thread's state version moved",
    )
    add_json_flag(compress)
    compress.set_defaults(handler=_store_errors(_cmd_compress))

    tool_results = sub.add_parser("tool-results", help="offloaded tool results on disk")
    tool_results.add_argument("--thread", metavar="THREAD")
    tool_results.add_argument(
        "--verify", action="store_true", help="re-hash every file; exit 1 if any is bad"
    )
    tool_results.add_argument("--limit", type=_positive_int, default=200, metavar="N")
    tool_results.add_argument("--offset", type=_non_negative_int, default=0, metavar="N")
    add_json_flag(tool_results)
    tool_results.set_defaults(handler=_store_errors(_cmd_tool_results))

    simulate = sub.add_parser("simulate", help="drive agent turns with a deterministic fake model")
    simulate.add_argument("--threads", type=_positive_int, default=3, metavar="N")
    simulate.add_argument("--turns", type=_positive_int, default=6, metavar="N")
    simulate.add_argument("--seed", type=int, default=7, metavar="S")
    simulate.add_argument("--user", metavar="USER_ID", help="default: demo users in turn")
    simulate.add_argument("--agent", metavar="SLUG", help="default: ops-copilot")
    simulate.add_argument(
        "--pace", type=float, default=0.0, metavar="SECONDS", help="pause after each model call"
    )
    add_json_flag(simulate)
    simulate.set_defaults(handler=_store_errors(_cmd_simulate))
