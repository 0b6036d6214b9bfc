"""Offloaded tool-result files a compress wrote but never indexed: find them, sweep them.

Phase 3 of a compress writes its offloaded files before its transaction commits.
Files are content-addressed and shared by every thread (the same result twice is
one file), so a file is removed only when no `tool_results` row of any thread
names it, under the thread's row lock, and never while a run of the thread is
running (its agent may be offloading the same result). `created_files` tells
which planned files an attempt creates; `unindexed` which of a list no index row
names; `sweep_created` removes what a failed attempt created and says what it
did (the attempt's audit row carries it); files a committed checkpoint names
(SQLite's own file) are not the attempt's to sweep. A compress killed outright
sweeps nothing: the thread's next compress indexes its files (`adopted_files`),
else the workdir sweep (`service.sweep`) removes them. Phase 3 holds the files lock
shared (`hold_files_shared`), the sweep exclusively: it never decides mid-commit.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Sequence

import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash.compression.compaction import PendingOffload
from yuxi_dash.files.workdir import Workdir
from yuxi_dash.service.locking import thread_lock
from yuxi_dash.settings import Settings
from yuxi_dash.store.db import is_sqlite
from yuxi_dash.store.models import ToolResult
from yuxi_dash.store.queries import busy_reason

log = logging.getLogger(__name__)

SWEEP_WAIT_SECONDS = 2.0  # a sweep never queues behind a long lock: the files stay, and say so
# A fixed signed 64-bit key: compress phase 3 holds it shared, the workdir sweep exclusively.
FILES_LOCK_KEY = int.from_bytes(
    hashlib.sha256(b"yuxi-dash offloaded files").digest()[:8], "big", signed=True
)


def hold_files_shared(session: Session) -> None:
    """In phase 3's transaction: no workdir sweep decides until it commits or rolls back.

    PostgreSQL: a shared transaction advisory lock (compresses never wait for each
    other; the wait for a sweep is bounded by the session's lock_timeout). SQLite:
    nothing to take, the write lock (`BEGIN IMMEDIATE`) already excludes the sweep.
    """
    if not is_sqlite(session):
        session.execute(
            sa.text("SELECT pg_advisory_xact_lock_shared(:key)"), {"key": FILES_LOCK_KEY}
        )


def hold_files_exclusive(session: Session) -> None:
    """In the sweep's transaction: wait for every phase 3 in flight, and keep new ones out."""
    if not is_sqlite(session):
        session.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": FILES_LOCK_KEY})


def created_files(
    workdir: Workdir, pending: Iterable[PendingOffload]
) -> tuple[list[str], list[str]]:
    """(planned files not on disk yet, planned files already there) as workdir paths."""
    missing: list[str] = []
    present: list[str] = []
    for offload in pending:
        path = offload.saved.path
        if path in missing or path in present:
            continue
        (missing if workdir.verify(path, offload.saved.sha256) == "missing" else present).append(
            path
        )
    return missing, present


def unindexed(session: Session, paths: Sequence[str]) -> list[str]:
    """The paths no `tool_results` row of any thread names, in their order."""
    if not paths:
        return []
    named = set(session.scalars(sa.select(ToolResult.path).where(ToolResult.path.in_(paths))))
    return [path for path in paths if path not in named]


def sweep_created(
    thread_id: str, paths: Sequence[str], *, workdir: Workdir, settings: Settings
) -> dict[str, list[str]]:
    """Remove the files a failed attempt created that no index row names.

    Under the thread's lock (a short wait) and only while no run of the thread is
    running. Returns {"swept_files": [...], "left_files": [...]} (the lists that are
    not empty); a file left stays unindexed, so it is never listed.
    """
    swept: list[str] = []
    left: list[str] = list(paths)
    try:
        with thread_lock(thread_id, settings=settings, wait_seconds=SWEEP_WAIT_SECONDS) as (
            session,
            _conv,
        ):
            left = unindexed(session, paths)  # an indexed one is no leftover (a commit landed)
            if busy_reason(session, thread_id) != "running":
                for path in left:
                    workdir.remove_file(path)
                swept, left = left, []
    except Exception:  # the attempt's own error goes to the caller; the audit says what stayed
        log.warning("could not sweep the files of a failed compress", exc_info=True)
    return {key: value for key, value in (("swept_files", swept), ("left_files", left)) if value}
