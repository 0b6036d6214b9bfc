"""CLI commands `yuxi-dash attach scan|status`: project an attached platform's threads.

`scan` runs one incremental scan of the checkpointer named by
`YUXI_DASH_ATTACH_CHECKPOINTER` (`yuxi_dash.attach.scan`) and prints what it
read and projected; `--full` ignores the stored watermark and lists every
platform thread again (threads already projected are still skipped). It
exits 1 when a thread failed to project (a quarantined thread is no failure:
the scan moved past it). A scan of another platform than the last one is
refused (`platform_changed`) unless `--accept-new-platform` (audited under
`--actor`). `status` says what is attached (by its label: host, port and
database, never the URL), which platform, how far the last scan got and the
quarantined threads (a checkpoint naming a type outside the allow-list among
them: ``checkpoint_refused``) and flagged ones, from our own tables only; when the last
scan found no index led by ``checkpoint_id`` on the platform's ``checkpoints``, its window
query's time and the one statement the owner can run. Neither ever prints the connection string.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from yuxi_dash.cli.common import (
    EXIT_FAILURE,
    EXIT_OK,
    CommandResult,
    actor_help,
    add_json_flag,
    say_progress,
)
from yuxi_dash.cli.guards import store_errors

if TYPE_CHECKING:
    from yuxi_dash.attach.scan_progress import ScanProgress

PROGRESS_EVERY = 2.0  # seconds between two progress lines of a long scan


def progress_printer(every: float = PROGRESS_EVERY) -> Callable[[ScanProgress], None]:
    """A scan's progress on stderr: a line every ``every`` seconds, and the last one."""
    last = -every

    def show(progress: ScanProgress) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last >= every or progress.threads_done >= progress.threads_total:
            last = now
            say_progress(progress.line())

    return show


def _cmd_scan(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.access.roles import cli_actor
    from yuxi_dash.attach import scan
    from yuxi_dash.settings import get_settings

    settings = get_settings()
    actor = cli_actor(args.actor, settings=settings, default="cli").id
    report = scan(
        settings,
        full=args.full,
        progress=progress_printer(),
        accept_new_platform=args.accept_new_platform,
        actor=actor,
    )
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
    if report.platform_changed:
        lines.append(f"platform changed to {report.platform} (confirmed by {actor})")
    if report.watermark_reset:
        lines.append(
            "the stored watermark was dated past the platform's clock: read from the start"
        )
    if report.future:
        lines.append(
            f"{report.future:,} threads with a checkpoint dated past the platform's clock "
            "(projected, flagged; the watermark stays at the clock): "
            + ", ".join(report.future_threads)
        )
    if report.quarantined or report.quarantined_skipped:
        lines.append(
            f"quarantined {report.quarantined:,} (skipped, quarantined before: "
            f"{report.quarantined_skipped:,}); see `yuxi-dash attach status`"
            + (": " + ", ".join(report.quarantined_threads) if report.quarantined_threads else "")
        )
    if report.conflict_threads:
        lines.append(
            "skipped (one of our own threads has that id): " + ", ".join(report.conflict_threads)
        )
    if report.failures:
        lines.append(
            "failed: " + ", ".join(f"{code} {n}" for code, n in sorted(report.failures.items()))
        )
    return CommandResult(
        data=report.to_dict(),
        text="\n".join(lines),
        exit_code=EXIT_FAILURE if report.failed else EXIT_OK,
    )


def _cmd_status(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.attach.status import attach_status
    from yuxi_dash.platform.client import platform_label
    from yuxi_dash.settings import get_settings

    settings = get_settings()
    status = attach_status(settings)
    data = status.to_dict()
    # where its threads are compressed: the platform's endpoint (scheme://host:port), or None
    endpoint = platform_label(settings.platform_url or "") if settings.platform_configured else None
    data["compress_endpoint"] = endpoint
    data["create_index_statement"] = status.create_index_statement
    data["index_saving_ms"] = status.index_saving_ms
    data["index_saving_seconds_a_day"] = status.index_saving_seconds_a_day
    data["scan_running"] = status.scan_running
    attached = status.attached_threads
    if not status.configured:
        text = f"no platform attached (YUXI_DASH_ATTACH_CHECKPOINTER unset); {attached:,} attached"
    else:
        last = status.scanned_at.isoformat() if status.scanned_at else "never"
        text = (
            f"attached {status.source} (platform {status.platform_id or '-'}), scanned every "
            f"{settings.attach_scan_seconds:g} s; last scan {last}; "
            f"watermark {status.watermark or '-'}; {attached:,} attached threads"
        )
    text += (
        f"; compressed through {endpoint}"
        if endpoint
        else "; compressing them is refused (YUXI_DASH_PLATFORM_URL unset)"
    )
    if status.scan_running and status.progress is not None:
        text += "\na scan is running: " + status.progress.progress.line()
    if status.create_index_statement:
        took = f"{status.window_query_ms:g} ms" if status.window_query_ms is not None else "-"
        text += (
            "\nthe platform's checkpoints table has no index on checkpoint_id: the last scan's "
            f"window query took {took}"
        )
        if status.index_saving_ms is not None and status.index_saving_seconds_a_day is not None:
            text += (
                f", reading about {status.table_rows or 0:,} checkpoints for the "
                f"{status.window_rows or 0:,} in its window; with the index it reads only "
                f"those: up to {status.index_saving_ms:,.1f} ms saved per scan, "
                f"{status.index_saving_seconds_a_day:,.0f} s of the platform database's time "
                "a day at this scan interval"
            )
        text += "; the platform owner can run: " + status.create_index_statement
    for entry in status.problems:
        text += (
            f"\n{entry.action} {entry.thread} at {entry.checkpoint_id or '-'}: "
            f"{entry.reason} [{entry.code}]"
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
    scan.add_argument(
        "--accept-new-platform",
        action="store_true",
        help="confirm the attached checkpointer is now another platform (audited)",
    )
    scan.add_argument("--actor", metavar="NAME", help=actor_help())
    add_json_flag(scan)
    scan.set_defaults(handler=store_errors(_cmd_scan))
    status = actions.add_parser("status", help="what is attached and how far the last scan got")
    add_json_flag(status)
    status.set_defaults(handler=store_errors(_cmd_status))
