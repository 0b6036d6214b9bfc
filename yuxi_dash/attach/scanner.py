"""The incremental scan: project an attached platform's threads into the dashboard's tables.

`scan(settings)` lists the threads with a checkpoint above a floor in ONE
read-only, parameterized query on the platform's ``checkpoints`` (root namespace,
statement timeout), then projects them in batches of `BATCH` (`attach.projector`).
The flow: docs/architecture.md, "An attach scan".

Rules:
- The floor is the stored watermark minus `attach.ids`' overlap; a listed thread
  whose newest checkpoint is already projected is skipped without a state read.
- The watermark is stored in ``scan_watermarks`` under `source_label` (host, port,
  database; never the URL) as the scan goes, threads in order of their newest
  checkpoint, so a stopped scan resumes. A failed thread holds it back; a
  refused one (`CheckpointRefused`, audited by `attach.refusals`) does not.
- A thread's user is its metadata's ``user_id`` (else "unknown"), its agent
  ``assistant_id`` or ``graph_id`` (else "attached").
- ``full=True`` lists every thread and marks the vanished ones ``deleted``.
- Nothing here writes to the platform: every transaction there is read-only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import psycopg
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session

from yuxi_dash.attach.ids import OVERLAP_SECONDS, scan_floor
from yuxi_dash.attach.projector import DELETED, ChangedThread, Tally, run_batch
from yuxi_dash.attach.stores import (
    PlatformStore,
    attach_conninfo,
    connect,
    opened_platform_store,
    platform_store,
    source_label,
    unavailable,
)
from yuxi_dash.records import Record
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import is_sqlite, session_scope
from yuxi_dash.store.models import ORIGIN_ATTACHED, Conversation, ScanWatermark, utcnow

log = logging.getLogger(__name__)

CHANGED_THREADS_SQL = """
SELECT thread_id, max(checkpoint_id) AS newest, count(*) AS checkpoints
FROM checkpoints
WHERE checkpoint_ns = '' AND checkpoint_id > %(floor)s
GROUP BY thread_id
"""
BATCH = 50  # threads projected in one transaction (a few platform queries, one write per table)
WORKERS = 4  # batches projected at once on PostgreSQL (SQLite has one writer: one at a time)
SAVE_EVERY = 500  # threads projected between two saves of the watermark in a long scan
_LOOKUP_CHUNK = 1000


@dataclass(frozen=True)
class ScanReport(Record):
    """What one scan read and did."""

    source: str  # host:port/database of the platform (no secret)
    watermark_before: str
    floor: str  # the scan read checkpoint ids above this
    watermark: str  # stored for the next scan
    threads_seen: int  # threads with a checkpoint in the window
    threads_changed: int  # of those, threads whose newest checkpoint was not projected yet
    projected: int
    unchanged: int  # changed when listed, already projected when locked (another scanner)
    conflicts: int  # the id of one of our own threads: skipped
    failed: int
    checkpoints_in_window: int
    checkpoints_read: int  # checkpoint states read from the platform to project
    new_checkpoints: int  # of those, the ones newer than what was projected
    attached_threads: int  # attached threads in our tables after the scan
    query_seconds: float
    seconds: float
    stopped: bool = False  # asked to stop before the end (the watermark says how far it got)
    deleted: int = 0  # a full scan: projected threads the platform no longer has, marked deleted
    conflict_threads: list[str] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)  # error code -> threads
    refused: int = 0  # threads whose checkpoint named a type outside the allow-list: not read
    refused_threads: list[str] = field(default_factory=list)  # the first of them


def changed_threads(
    conninfo: str, *, floor: str, store: PlatformStore | None = None
) -> list[ChangedThread]:
    """The platform's threads with a root checkpoint id above ``floor`` (one read-only query).

    Asked on ``store``'s pool when given (read-only, the same statement
    timeout; planned for its floor every time), else on a connection of its own.
    """
    params = {"floor": floor}
    if store is not None:
        rows = store.fetch(CHANGED_THREADS_SQL, params, prepare=False)
        return [
            ChangedThread(str(r["thread_id"]), str(r["newest"]), int(r["checkpoints"]))
            for r in rows
        ]
    try:
        with connect(conninfo) as conn, conn.cursor() as cursor:
            cursor.execute(CHANGED_THREADS_SQL, params)
            return [ChangedThread(str(t), str(n), int(c)) for t, n, c in cursor.fetchall()]
    except psycopg.Error as exc:
        raise unavailable(exc, conninfo) from None


def _projected(session: Session, thread_ids: Sequence[str]) -> dict[str, tuple[str, str | None]]:
    """thread id -> (origin, projected checkpoint id) for the ones we hold.

    PostgreSQL gets the ids as one array parameter (``= ANY``), not one
    parameter per id; SQLite an ``IN`` list per `_LOOKUP_CHUNK` ids.
    """
    columns = (Conversation.thread_id, Conversation.origin, Conversation.checkpoint_id)
    if not thread_ids:
        return {}
    if not is_sqlite(session):
        ids = sa.bindparam("ids", list(thread_ids), type_=postgresql.ARRAY(sa.String()))
        rows = session.execute(sa.select(*columns).where(Conversation.thread_id == sa.any_(ids)))
        return {t: (origin, checkpoint) for t, origin, checkpoint in rows}
    found: dict[str, tuple[str, str | None]] = {}
    for start in range(0, len(thread_ids), _LOOKUP_CHUNK):
        chunk = list(thread_ids[start : start + _LOOKUP_CHUNK])
        rows = session.execute(sa.select(*columns).where(Conversation.thread_id.in_(chunk)))
        found.update({t: (origin, checkpoint) for t, origin, checkpoint in rows})
    return found


def _attached_count(session: Session) -> int:
    return int(
        session.scalar(
            sa.select(sa.func.count())
            .select_from(Conversation)
            .where(Conversation.origin == ORIGIN_ATTACHED, Conversation.status != DELETED)
        )
        or 0
    )


def mark_deleted(settings: Settings, present: Sequence[str]) -> int:
    """Mark deleted every projected thread not in ``present`` (all the platform holds)."""
    listed = set(present)
    with session_scope(settings) as session:
        held = session.scalars(
            sa.select(Conversation.thread_id).where(
                Conversation.origin == ORIGIN_ATTACHED, Conversation.status != DELETED
            )
        )
        gone = sorted(t for t in held if t not in listed)
        now = utcnow()
        for start in range(0, len(gone), _LOOKUP_CHUNK):
            session.execute(
                sa.update(Conversation)
                .where(
                    Conversation.thread_id.in_(gone[start : start + _LOOKUP_CHUNK]),
                    Conversation.origin == ORIGIN_ATTACHED,
                    Conversation.status != DELETED,
                )
                .values(status=DELETED, deleted_at=now, updated_at=now)
                .execution_options(synchronize_session=False)
            )
    return len(gone)


def read_watermark(settings: Settings, source: str) -> ScanWatermark | None:
    """The stored watermark row of ``source`` (detached), None before the first scan."""
    with session_scope(settings) as session:
        row = session.get(ScanWatermark, source)
        if row is not None:
            session.expunge(row)
        return row


def _save_watermark(settings: Settings, source: str, checkpoint_id: str) -> int:
    """Store the watermark; returns the attached threads we hold."""
    for attempt in (1, 2):
        try:
            with session_scope(settings) as session:
                threads = _attached_count(session)
                row = session.get(ScanWatermark, source)
                if row is None:
                    row = ScanWatermark(source=source)
                    session.add(row)
                row.checkpoint_id = checkpoint_id
                row.scanned_at = utcnow()
                row.threads = threads
                return threads
        except sa.exc.IntegrityError:  # another scanner stored the first row at the same time
            if attempt == 2:
                raise
    return 0  # pragma: no cover - the loop returns or raises


def _next_watermark(before: str, reached: str | None, tally: Tally) -> str:
    """The watermark after projecting up to ``reached``: never past a thread that failed."""
    watermark = max(before, reached or "")
    if tally.held_back is not None:
        # the next floor is an overlap below the watermark, so that thread is read again
        return min(watermark, tally.held_back)
    return watermark


def scan(
    settings: Settings | None = None,
    *,
    full: bool = False,
    should_stop: Callable[[], bool] | None = None,
    progress: Callable[[str], None] | None = None,
    together: bool = True,
) -> ScanReport:
    """Project every platform thread that moved since the last scan (all of them with ``full``).

    ``together=False`` projects each thread alone under its row lock (the
    per-thread path the batches give the same rows as; for tests and the bench).
    """
    settings = settings or get_settings()
    conninfo = attach_conninfo(settings)
    source = source_label(conninfo)
    started = time.perf_counter()
    stored = None if full else read_watermark(settings, source)
    before = stored.checkpoint_id if stored is not None else ""
    floor = scan_floor(before, OVERLAP_SECONDS)
    query_started = time.perf_counter()
    seen = changed_threads(conninfo, floor=floor, store=opened_platform_store(conninfo))
    query_seconds = time.perf_counter() - query_started
    tally = Tally()
    with session_scope(settings) as session:
        projected = _projected(session, [t.thread_id for t in seen])
    changed: list[ChangedThread] = []
    missing = {t.thread_id for t in seen if t.thread_id not in projected}
    for thread in seen:
        origin, checkpoint = projected.get(thread.thread_id, (ORIGIN_ATTACHED, None))
        if origin != ORIGIN_ATTACHED:
            tally.conflict(thread.thread_id)
        elif checkpoint != thread.newest:
            changed.append(thread)
    changed.sort(key=lambda t: t.newest)  # oldest first: the watermark can follow the work
    reached: str | None = None
    stopped = False
    if changed:
        store = platform_store(settings)
        batches = [changed[i : i + BATCH] for i in range(0, len(changed), BATCH)]
        workers = 1 if is_sqlite(settings.database_url) else min(WORKERS, len(batches))
        unsaved = 0
        with ThreadPoolExecutor(workers, thread_name_prefix="yuxi-dash-scan") as pool:
            futures = [
                pool.submit(run_batch, settings, store, b, missing, should_stop, together=together)
                for b in batches
            ]
            try:
                for done, (batch, future) in enumerate(zip(batches, futures, strict=True)):
                    result = future.result()  # in order: every batch before it is done too
                    if result is None:
                        stopped = True
                        continue
                    tally.merge(result)
                    if stopped:
                        continue  # done after an earlier batch stopped: the watermark waits
                    reached = batch[-1].newest
                    unsaved += len(batch)
                    if unsaved >= SAVE_EVERY:
                        unsaved = 0
                        _save_watermark(settings, source, _next_watermark(before, reached, tally))
                        if progress is not None:
                            finished = sum(len(b) for b in batches[: done + 1])
                            progress(f"projected {finished:,} of {len(changed):,} threads")
            except BaseException:
                for future in futures:
                    future.cancel()
                if reached is not None:
                    _save_watermark(settings, source, _next_watermark(before, reached, tally))
                raise
    if not stopped:
        reached = max((t.newest for t in seen), default=None)
    deleted = mark_deleted(settings, [t.thread_id for t in seen]) if full and not stopped else 0
    watermark = _next_watermark(before, reached, tally)
    attached = _save_watermark(settings, source, watermark)
    report = ScanReport(
        source=source,
        watermark_before=before,
        floor=floor,
        watermark=watermark,
        threads_seen=len(seen),
        threads_changed=len(changed),
        projected=tally.projected,
        unchanged=tally.unchanged,
        conflicts=tally.conflicts,
        failed=tally.failed,
        checkpoints_in_window=sum(t.checkpoints for t in seen),
        checkpoints_read=tally.checkpoints_read,
        new_checkpoints=tally.new_checkpoints,
        attached_threads=attached,
        query_seconds=round(query_seconds, 4),
        seconds=round(time.perf_counter() - started, 4),
        stopped=stopped,
        deleted=deleted,
        conflict_threads=tally.conflict_threads,
        failures=tally.failures,
        refused=tally.refused,
        refused_threads=tally.refused_threads,
    )
    log.debug("attach scan of %s: %d threads projected", source, report.projected)
    return report
