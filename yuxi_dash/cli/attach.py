"""CLI commands `yuxi-dash attach scan|status`: project an attached platform's threads.

`scan` runs one incremental scan of the checkpointer named by
`YUXI_DASH_ATTACH_CHECKPOINTER` (`yuxi_dash.attach.scan`) and prints what it
read and projected; `--full` ignores the stored watermark and lists every
platform thread again (threads already projected are still skipped). It
exits 1 when a thread failed to project. `status` says what is attached (by
its label: host, port and database, never the URL) and how far the last scan
got, from our own tables only, with the threads whose checkpoint was refused
(a type outside the allow-list) and not projected since. Neither ever prints
the connection string.
"""

from __future__ import annotations

import argparse
from typing import Any

from yuxi_dash.cli.common import EXIT_FAILURE, EXIT_OK, CommandResult, add_json_flag, say_progress
from yuxi_dash.cli.guards import store_errors


def _cmd_scan(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.attach import scan
    from yuxi_dash.settings import get_settings

    report = scan(get_settings(), full=args.full, progress=say_progress)
    lines = [
        f"scanned {report.source} in {report.seconds:.2f} s (query {report.query_seconds:.3f} s)",
        f"threads seen {report.threads_seen:,}, changed {report.threads_changed:,}, "
        f"projected {report.projected:,}, conflicts {report.conflicts:,}, "
        f"failed {report.failed:,}",
        f"checkpoints in window {report.checkpoints_in_window:,}, "
        f"read {report.checkpoints_read:,}, new {report.new_checkpoints:,}",
        f"watermark {report.watermark or '-'} (was {report.watermark_before or '-'})",
        f"attached threads {report.attached_threads:,}",
    ]
    if report.conflict_threads:
        lines.append(
            "skipped (one of our own threads has that id): " + ", ".join(report.conflict_threads)
        )
    if report.failures:
        lines.append(
            "failed: " + ", ".join(f"{code} {n}" for code, n in sorted(report.failures.items()))
        )
    if report.refused:
        lines.append(
            f"refused {report.refused:,} (checkpoint_refused: a type outside the allow-list, "
            "nothing called): " + ", ".join(report.refused_threads)
        )
    return CommandResult(
        data=report.to_dict(),
        text="\n".join(lines),
        exit_code=EXIT_FAILURE if report.failed else EXIT_OK,
    )


def _cmd_status(args: argparse.Namespace) -> CommandResult:
    import sqlalchemy as sa

    from yuxi_dash.attach import attach_conninfo, read_watermark, source_label
    from yuxi_dash.attach.refusals import refused_threads
    from yuxi_dash.platform.client import platform_label
    from yuxi_dash.settings import get_settings
    from yuxi_dash.store.db import session_scope
    from yuxi_dash.store.models import ORIGIN_ATTACHED, Conversation

    settings = get_settings()
    with session_scope(settings) as session:
        attached = int(
            session.scalar(
                sa.select(sa.func.count())
                .select_from(Conversation)
                .where(Conversation.origin == ORIGIN_ATTACHED)
            )
            or 0
        )
    data: dict[str, Any] = {
        "configured": settings.attach_configured,
        "source": None,
        "scan_seconds": settings.attach_scan_seconds,
        "watermark": None,
        "scanned_at": None,
        "attached_threads": attached,
        "refused_threads": [r.to_dict() for r in refused_threads(settings)],
        # where its threads are compressed: the platform's endpoint (scheme://host:port), or None
        "compress_endpoint": platform_label(settings.platform_url or "")
        if settings.platform_configured
        else None,
    }
    if settings.attach_configured:
        source = source_label(attach_conninfo(settings))
        row = read_watermark(settings, source)
        data["source"] = source
        if row is not None:
            data["watermark"] = row.checkpoint_id or None
            data["scanned_at"] = row.scanned_at.isoformat()
    if not data["configured"]:
        text = f"no platform attached (YUXI_DASH_ATTACH_CHECKPOINTER unset); {attached:,} attached"
    else:
        last = data["scanned_at"] or "never"
        text = (
            f"attached {data['source']}, scanned every {settings.attach_scan_seconds:g} s; "
            f"last scan {last}; watermark {data['watermark'] or '-'}; "
            f"{attached:,} attached threads"
        )
    endpoint = data["compress_endpoint"]
    text += (
        f"; compressed through {endpoint}"
        if endpoint
        else "; compressing them is refused (YUXI_DASH_PLATFORM_URL unset)"
    )
    for refused in data["refused_threads"]:
        text += (
            f"\nrefused thread {refused['thread_id']} at {refused['refused_at']} "
            f"(checkpoint_refused: names {refused['type']}; via {refused['via']})"
        )
    return CommandResult(data=data, text=text)


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    """Add `attach` to the top-level parser."""
    parser = sub.add_parser(
        "attach",
        help="an attached platform's LangGraph checkpointer (YUXI_DASH_ATTACH_CHECKPOINTER)",
    )
    actions = parser.add_subparsers(dest="attach_command", metavar="ACTION")
    actions.required = True
    scan = actions.add_parser(
        "scan", help="project the platform's threads that moved since the last scan"
    )
    scan.add_argument(
        "--full",
        action="store_true",
        help="ignore the stored watermark: list every platform thread again",
    )
    add_json_flag(scan)
    scan.set_defaults(handler=store_errors(_cmd_scan))
    status = actions.add_parser("status", help="what is attached and how far the last scan got")
    add_json_flag(status)
    status.set_defaults(handler=store_errors(_cmd_status))
