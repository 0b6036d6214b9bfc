"""The incremental scan: project an attached platform's threads into the dashboard's tables.

`scan(settings)` finds the platform's threads that have a checkpoint newer
than the last scan with ONE read-only, parameterized query on its
``checkpoints`` table (root namespace only, with a statement timeout):

    SELECT thread_id, max(checkpoint_id), count(*) FROM checkpoints
    WHERE checkpoint_ns = '' AND checkpoint_id > %(floor)s GROUP BY thread_id

The floor is the stored watermark (the newest checkpoint id seen) minus an
overlap (`attach.ids`): checkpoint ids are UUIDv6, ordered by the creating
process's clock, so a checkpoint committed late or by a replica whose clock
runs behind can carry an id below the watermark; the overlap keeps reading
those. A thread the window returns whose newest checkpoint is the one already
projected (``conversations.checkpoint_id``) is skipped without reading its
state, so the overlap costs one row per thread, not a state read.

Each changed thread is then projected under its row lock: a missing row is
created with origin "attached" (user id from the checkpoint metadata's
``user_id``, else "unknown"; agent from ``assistant_id`` or ``graph_id``,
else "attached"; no title), and `service.projection.project_thread` reads the
checkpoints newer than the projected one through the platform's read-only
store (`attach.reader`: in pages, one step per model call). Threads go in
batches of `BATCH`, their rows locked together in one transaction (in thread
id order, with the service's lock timeout); a batch that fails in any way is
rolled back and redone one thread at a time under the service's
`thread_lock`, so a failure stays with its thread. A thread id that already
belongs to one of our own (origin "dashboard") threads is never mixed with
the platform's: it is skipped and counted as a conflict.

The watermark is stored in ``scan_watermarks`` under `source_label` (host,
port and database; never the URL or password), during long scans too: the
threads are projected in the order of their newest checkpoint, so a scan
stopped half way resumes where it was. A thread that failed (its row lock busy, say) holds
the watermark back to its checkpoint, so the next scan reads it again.

Nothing here writes to the platform: the query and the store run in
read-only transactions, and the platform store refuses writes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import psycopg
import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash import validation
from yuxi_dash.attach.ids import OVERLAP_SECONDS, scan_floor
from yuxi_dash.attach.reader import ProjectionReader
from yuxi_dash.attach.stores import (
    attach_conninfo,
    connect,
    platform_store,
    source_label,
    unavailable,
)
from yuxi_dash.errors import AttachUnavailable, InvalidInput, YuxiDashError
from yuxi_dash.records import Record
from yuxi_dash.service.locking import thread_lock
from yuxi_dash.service.projection import project_thread
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.checkpoints import CheckpointStore, ThreadCheckpoint
from yuxi_dash.store.db import is_lock_failure, is_sqlite, locked_session, session_scope
from yuxi_dash.store.models import ORIGIN_ATTACHED, Conversation, ScanWatermark, utcnow

log = logging.getLogger(__name__)

CHANGED_THREADS_SQL = """
SELECT thread_id, max(checkpoint_id) AS newest, count(*) AS checkpoints
FROM checkpoints
WHERE checkpoint_ns = '' AND checkpoint_id > %(floor)s
GROUP BY thread_id
"""
UNKNOWN_USER = "unknown"
ATTACHED_AGENT = "attached"
USER_KEYS = ("user_id",)
AGENT_KEYS = ("assistant_id", "graph_id")
BATCH = 25  # threads projected in one transaction (their row locks held together)
WORKERS = 4  # batches projected at once on PostgreSQL (SQLite has one writer: one at a time)
DEADLOCK = "40P01"
SAVE_EVERY = 500  # threads projected between two saves of the watermark in a long scan
_LOOKUP_CHUNK = 1000
_CONFLICTS_SHOWN = 20


@dataclass(frozen=True)
class ChangedThread:
    """One row of the platform query: a thread with a checkpoint in the scan window."""

    thread_id: str
    newest: str  # the thread's newest checkpoint id (the saver's "latest")
    checkpoints: int  # its checkpoints in the window


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
    conflict_threads: list[str] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)  # error code -> threads


@dataclass
class _Tally:
    projected: int = 0
    unchanged: int = 0
    conflicts: int = 0
    failed: int = 0
    checkpoints_read: int = 0
    new_checkpoints: int = 0
    conflict_threads: list[str] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)
    held_back: str | None = None  # the smallest newest id of a thread that failed

    def conflict(self, thread_id: str) -> None:
        self.conflicts += 1
        if len(self.conflict_threads) < _CONFLICTS_SHOWN:
            self.conflict_threads.append(thread_id)

    def merge(self, other: _Tally) -> None:
        self.projected += other.projected
        self.unchanged += other.unchanged
        self.checkpoints_read += other.checkpoints_read
        self.new_checkpoints += other.new_checkpoints
        for thread_id in other.conflict_threads:
            self.conflict(thread_id)
        self.conflicts += other.conflicts - len(other.conflict_threads)
        self.failed += other.failed
        for code, count in other.failures.items():
            self.failures[code] = self.failures.get(code, 0) + count
        if other.held_back is not None and (
            self.held_back is None or other.held_back < self.held_back
        ):
            self.held_back = other.held_back

    def fail(self, code: str, newest: str | None) -> None:
        self.failed += 1
        self.failures[code] = self.failures.get(code, 0) + 1
        if newest is not None and (self.held_back is None or newest < self.held_back):
            self.held_back = newest


def changed_threads(conninfo: str, *, floor: str) -> list[ChangedThread]:
    """The platform's threads with a root checkpoint id above ``floor`` (one read-only query)."""
    try:
        with connect(conninfo) as conn, conn.cursor() as cursor:
            cursor.execute(CHANGED_THREADS_SQL, {"floor": floor})
            return [ChangedThread(str(t), str(n), int(c)) for t, n, c in cursor.fetchall()]
    except psycopg.Error as exc:
        raise unavailable(exc, conninfo) from None


def _projected(session: Session, thread_ids: Sequence[str]) -> dict[str, tuple[str, str | None]]:
    """thread id -> (origin, projected checkpoint id) for the ones we hold."""
    found: dict[str, tuple[str, str | None]] = {}
    for start in range(0, len(thread_ids), _LOOKUP_CHUNK):
        chunk = list(thread_ids[start : start + _LOOKUP_CHUNK])
        rows = session.execute(
            sa.select(
                Conversation.thread_id, Conversation.origin, Conversation.checkpoint_id
            ).where(Conversation.thread_id.in_(chunk))
        )
        found.update({t: (origin, checkpoint) for t, origin, checkpoint in rows})
    return found


def _metadata_identifier(metadata: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    for key in keys:
        value = metadata.get(key)
        if isinstance(value, int | str) and not isinstance(value, bool):
            try:
                return validation.identifier(str(value), key)
            except InvalidInput:
                continue
    return None


def _adopt(conv: Conversation, latest: ThreadCheckpoint) -> None:
    """Who and which agent the platform's newest checkpoint names, and when it was written."""
    user = _metadata_identifier(latest.metadata, USER_KEYS)
    agent = _metadata_identifier(latest.metadata, AGENT_KEYS)
    if user is not None:
        conv.user_id = user
    if agent is not None:
        conv.agent_slug = agent
    if latest.created_at is not None:
        conv.last_activity_at = latest.created_at


def _new_row(session: Session, thread_id: str) -> Conversation:
    conv = Conversation(
        thread_id=thread_id,
        user_id=UNKNOWN_USER,
        agent_slug=ATTACHED_AGENT,
        title="",
        origin=ORIGIN_ATTACHED,
    )
    session.add(conv)
    session.flush()  # another scanner creating it too: IntegrityError here
    return conv


def _apply(
    session: Session,
    store: CheckpointStore,
    thread: ChangedThread,
    conv: Conversation | None,
    tally: _Tally,
) -> None:
    """Project one platform thread whose row the session holds locked (or creates)."""
    if conv is None:
        conv = _new_row(session, thread.thread_id)
    elif conv.origin != ORIGIN_ATTACHED:
        tally.conflict(thread.thread_id)
        return
    elif conv.checkpoint_id == thread.newest:
        tally.unchanged += 1
        return
    reader = ProjectionReader(store, since=conv.checkpoint_id)
    latest = project_thread(session, conv, reader)
    if latest is not None:
        _adopt(conv, latest)
    if reader.first_at is not None and reader.since is None:
        conv.created_at = reader.first_at  # when the platform started it, not when we saw it
    tally.checkpoints_read += reader.read
    tally.new_checkpoints += reader.new
    tally.projected += 1


def _project_one(
    settings: Settings, store: CheckpointStore, thread: ChangedThread, tally: _Tally
) -> None:
    """Project one platform thread under its row lock (the service's `thread_lock`)."""
    for attempt in (1, 2):
        try:
            with thread_lock(thread.thread_id, settings=settings) as (session, conv):
                _apply(session, store, thread, conv, tally)
                return
        except sa.exc.IntegrityError:  # another scanner created the row first: lock it, go on
            if attempt == 2:
                tally.fail("integrity_error", thread.newest)


def _project_batch(
    settings: Settings, store: CheckpointStore, batch: Sequence[ChangedThread], tally: _Tally
) -> bool:
    """Project ``batch`` in one transaction holding every row's lock; False: do them one by one.

    The rows are locked together (``FOR UPDATE`` in thread id order, so two
    scanners never deadlock) with the service's lock timeout, and released at
    the commit. Anything going wrong (a row lock busy, a row another scanner
    just created, one thread that cannot be projected) rolls the whole batch
    back, and the caller projects its threads one by one, each under
    `thread_lock`, where a failure stays with its thread.
    """
    local = _Tally()
    wait = settings.lock_timeout_seconds
    try:
        with locked_session(settings, wait_seconds=wait) as session:
            if not is_sqlite(session):
                session.execute(
                    sa.text("SELECT set_config('lock_timeout', :timeout, true)"),
                    {"timeout": f"{max(1, int(wait * 1000))}ms"},
                )
            rows = {
                conv.thread_id: conv
                for conv in session.scalars(
                    sa.select(Conversation)
                    .where(Conversation.thread_id.in_([t.thread_id for t in batch]))
                    .order_by(Conversation.thread_id)
                    .with_for_update()
                )
            }
            for thread in batch:
                _apply(session, store, thread, rows.get(thread.thread_id), local)
    except AttachUnavailable:
        raise  # the platform is gone: one by one would fail the same way
    except (sa.exc.OperationalError, sa.exc.InterfaceError) as exc:
        if is_lock_failure(exc) or getattr(exc.orig, "sqlstate", None) == DEADLOCK:
            return False
        raise  # our own database is down
    except Exception:  # noqa: BLE001 - one by one finds the thread that failed
        return False
    tally.merge(local)
    return True


def _run_batch(
    settings: Settings,
    store: CheckpointStore,
    batch: Sequence[ChangedThread],
    should_stop: Callable[[], bool] | None,
) -> _Tally | None:
    """One batch, in a worker: together if it can, else one by one; None when asked to stop."""
    if should_stop is not None and should_stop():
        return None
    tally = _Tally()
    valid = _valid(batch, tally)
    if valid and not _project_batch(settings, store, valid, tally):
        for thread in valid:
            _project_guarded(settings, store, thread, tally)
    return tally


def _valid(batch: Sequence[ChangedThread], tally: _Tally) -> list[ChangedThread]:
    """The threads whose ids we can hold; the others fail once and are never retried."""
    valid = []
    for thread in batch:
        try:
            validation.thread_id(thread.thread_id)
        except InvalidInput:
            tally.fail("invalid_input", None)
            continue
        valid.append(thread)
    return valid


def _project_guarded(
    settings: Settings, store: CheckpointStore, thread: ChangedThread, tally: _Tally
) -> None:
    """`_project_one` where a failure stays with its thread (and holds the watermark back)."""
    try:
        _project_one(settings, store, thread, tally)
    except AttachUnavailable:
        raise
    except YuxiDashError as exc:  # its row lock busy, say: read it again next time
        tally.fail(exc.code, thread.newest)
    except (sa.exc.OperationalError, sa.exc.InterfaceError):
        raise  # our own database is down: no point going on
    except Exception as exc:  # noqa: BLE001 - one odd thread must not stop the others
        log.warning("attach scan: a thread failed to project (%s)", type(exc).__name__)
        tally.fail("projection_error", thread.newest)


def _attached_count(session: Session) -> int:
    return int(
        session.scalar(
            sa.select(sa.func.count())
            .select_from(Conversation)
            .where(Conversation.origin == ORIGIN_ATTACHED)
        )
        or 0
    )


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


def _next_watermark(before: str, reached: str | None, tally: _Tally) -> str:
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
) -> ScanReport:
    """Project every platform thread that moved since the last scan (all of them with ``full``)."""
    settings = settings or get_settings()
    conninfo = attach_conninfo(settings)
    source = source_label(conninfo)
    started = time.perf_counter()
    stored = None if full else read_watermark(settings, source)
    before = stored.checkpoint_id if stored is not None else ""
    floor = scan_floor(before, OVERLAP_SECONDS)
    query_started = time.perf_counter()
    seen = changed_threads(conninfo, floor=floor)
    query_seconds = time.perf_counter() - query_started
    tally = _Tally()
    with session_scope(settings) as session:
        projected = _projected(session, [t.thread_id for t in seen])
    changed: list[ChangedThread] = []
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
            futures = [pool.submit(_run_batch, settings, store, b, should_stop) for b in batches]
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
        conflict_threads=tally.conflict_threads,
        failures=tally.failures,
    )
    log.debug("attach scan of %s: %d threads projected", source, report.projected)
    return report
