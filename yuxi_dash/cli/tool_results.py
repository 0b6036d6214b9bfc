"""The `tool-results` command: offloaded tool results on disk, listed or re-hashed.

Lists the workdir's saved tool results (newest first, paged) or, with
`--verify`, re-hashes every file and exits 1 if any is not on this volume
(missing: no such file, or its workdir is not mounted) or its content changed;
`--verify` with `--limit` or `--offset` re-hashes just the page the listing shows.
Heavy modules are imported inside the handler so `yuxi-dash --help` stays fast.
"""

from __future__ import annotations

import argparse
from typing import Any

from yuxi_dash.cli.arguments import add_page_flags
from yuxi_dash.cli.common import EXIT_FAILURE, EXIT_OK, CommandResult, add_json_flag
from yuxi_dash.cli.guards import cli_refusals, store_errors
from yuxi_dash.cli.output import iso, render_table
from yuxi_dash.wording import attached_label, check_label

LIST_LIMIT = 200  # rows a listing shows unless --limit says otherwise


def _cmd_tool_results(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash import validation
    from yuxi_dash.store.db import session_scope
    from yuxi_dash.tool_results.index import list_tool_results, verify_tool_results

    target = "tool_results:*" if args.thread is None else f"thread:{args.thread}"
    with cli_refusals(args, "cli.tool_results", target):
        validation.optional_identifier(args.thread, "thread id")  # "" once listed everything
    paged = args.limit is not None or args.offset is not None
    limit = LIST_LIMIT if args.limit is None else args.limit
    offset = args.offset or 0
    if args.verify:  # with --limit or --offset: the page the listing shows, newest first
        report = verify_tool_results(
            thread_id=args.thread, limit=limit if paged else None, offset=offset
        )
        counts = report.counts
        data = {
            "checked": len(report.results),
            "ok": counts["ok"],
            "missing": counts["missing"],
            "mismatch": counts["mismatch"],
            "problems": [item.to_dict() for item in report.problems],
        }
        scope = f" (--limit {limit}, --offset {offset}, newest first)" if paged else ""
        text = (
            f"checked {data['checked']} files{scope}: {data['ok']} ok, "
            f"{data['mismatch']} content changed, {data['missing']} file not on this volume"
        )
        if report.problems:
            problems = [
                (check_label(item.status), item.thread_id, item.tool_name, item.path)
                for item in report.problems
            ]
            text += "\n" + render_table(problems, ("CHECK", "THREAD", "TOOL", "PATH"))
        return CommandResult(data, text=text, exit_code=EXIT_OK if report.all_ok else EXIT_FAILURE)

    with session_scope() as session:
        items = [
            _row_to_dict(item)
            for item in list_tool_results(
                session, thread_id=args.thread, limit=limit, offset=offset
            )
        ]
    rows = [
        (
            str(item["id"]),  # an id: no thousands separators
            item["thread_id"],
            attached_label(item["platform"]) if item["attached"] else "ours",
            item["tool_name"],
            item["chars"],
            item["approx_tokens"],
            str(item["sha256"])[:16],
            item["path"],
        )
        for item in items
    ]
    text = render_table(
        rows, ("ID", "THREAD", "THREAD OF", "TOOL", "CHARS", "TOKENS", "SHA-256", "PATH")
    )
    if not items:
        text += "\n(no offloaded tool results)"
    return CommandResult(items, text=text)


def _row_to_dict(item: Any) -> dict[str, Any]:
    return {key: iso(value) for key, value in item.to_dict().items()}


# ---------------------------------------------------------------------------
# registration
# ---------------------------------------------------------------------------


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    """Add this group's commands to the top-level parser."""
    tool_results = sub.add_parser("tool-results", help="offloaded tool results on disk")
    tool_results.add_argument(
        "--thread", metavar="THREAD", help="only this thread's (default: every thread)"
    )
    tool_results.add_argument(
        "--verify",
        action="store_true",
        help="re-hash every file, or only the listed page when --limit or --offset is given; "
        "exit 1 if any is missing or changed",
    )
    add_page_flags(tool_results, limit=LIST_LIMIT, order="newest first")
    # None: not given, so --verify checks every file; a listing still shows LIST_LIMIT rows
    tool_results.set_defaults(limit=None, offset=None)
    add_json_flag(tool_results)
    tool_results.set_defaults(handler=store_errors(_cmd_tool_results))
