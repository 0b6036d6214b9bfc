"""The incremental scan: project an attached platform's threads into the dashboard's tables.

`scan(settings)` lists the threads with a root checkpoint above a floor (ONE read-only,
timed-out query), shows those never seen at their newest usage from `SHOW_FIRST_MIN` on
(`attach.newest_usage`, while the workers start), then projects them (`attach.scan_workers`;
docs/architecture.md, "An attach scan"), writing nothing to the platform. Rules:
- The floor is the stored watermark minus `attach.checkpoint_clock`' overlap, never above the
  platform's ``now()`` minus it; a listed thread already projected is skipped unread.
- The watermark is stored in ``scan_watermarks`` under `source_label` (never the URL) as the
  scan goes, in order of newest checkpoint, so a stopped scan resumes. A failed thread holds
  it back; a quarantined one (`attach.quarantine`) does not, and is skipped until it moves.
- Another platform than the last is refused unless confirmed (`attach.platforms`); the
  watermark never passes the platform's ``now()`` plus a skew; a later-dated thread is flagged.
- A thread's user is its metadata's ``user_id`` (else "unknown"), its agent ``assistant_id``
  or ``graph_id`` (else "attached"). ``full=True`` lists all and marks vanished ones ``deleted``.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass, field

import psycopg
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session

from yuxi_dash.attach import quarantine
from yuxi_dash.attach.checkpoint_clock import OVERLAP_SECONDS, checkpoint_time, scan_floor
from yuxi_dash.attach.newest_usage import drop_quarantined, show_newest_usage
from yuxi_dash.attach.platform_store import (
    PlatformStore,
    attach_conninfo,
    connect,
    opened_platform_store,
    platform_store,
    source_label,
    unavailable,
)
from yuxi_dash.attach.platforms import (
    check_platform,
    checkpoint_table_rows,
    clock_cap,
    has_checkpoint_index,
    platform_identity,
)
from yuxi_dash.attach.projector import ACTIVE, DELETED, ChangedThread, Tally
from yuxi_dash.attach.quarantine import SCAN_ACTOR, Problem
from yuxi_dash.attach.scan_progress import FAILED, FINISHED, STOPPED, ProgressKeeper, ScanProgress
from yuxi_dash.attach.scan_workers import project_stretches
from yuxi_dash.printable_record import Record
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import is_sqlite, session_scope
from yuxi_dash.store.models import ORIGIN_ATTACHED, Conversation, ScanWatermark, utcnow
from yuxi_dash.store.origin import attached_rows, is_attached

log = logging.getLogger(__name__)

CHANGED_THREADS_SQL = """
SELECT thread_id, max(checkpoint_id) AS newest, count(*) AS checkpoints
FROM checkpoints
WHERE checkpoint_ns = '' AND checkpoint_id > %(floor)s
GROUP BY thread_id
"""
_FLAGS_SHOWN = 20
SAVE_EVERY = 500  # threads projected between two saves of the watermark in a long scan
SHOW_FIRST_MIN = 1_000  # threads never seen from which a scan shows their newest usage first
_LOOKUP_CHUNK = 1000
_FUTURE_REASON = "its newest checkpoint id is dated ahead of the platform database's clock"


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
    platform: str = ""  # "<system identifier>/<database>" of the platform scanned
    checkpoint_index: bool | None = None  # the platform's checkpoints has one led by checkpoint_id
    platform_changed: bool = False  # another platform than the last scan's, confirmed
    watermark_capped: bool = False  # a checkpoint dated past the platform's clock (+ skew)
    watermark_reset: bool = False  # the stored watermark was past that clock: read from the start
    future: int = 0  # threads whose newest checkpoint is dated past the clock (projected, flagged)
    quarantined: int = 0  # threads this scan could not project (quarantined, moved past)
    quarantined_skipped: int = 0  # quarantined before at the same checkpoint: not read again
    undeleted: int = 0  # threads marked deleted that the platform has again
    shown: int = 0  # threads never seen, shown at their newest usage before projecting
    shown_seconds: float | None = None  # from the scan's start until they were shown
    future_threads: list[str] = field(default_factory=list)  # printable ids
    quarantined_threads: list[str] = field(default_factory=list)  # printable ids


def changed_threads(
    conninfo: str, *, floor: str, store: PlatformStore | None = None
) -> tuple[list[ChangedThread], float]:
    """The platform's threads with a root checkpoint id above ``floor`` (one read-only query),
    and the seconds the query took (without opening a connection).

    Asked on ``store``'s pool when given (read-only, the same statement
    timeout; planned for its floor every time), else on a connection of its own.
    """
    params = {"floor": floor}
    if store is not None:
        started = time.perf_counter()
        rows = store.fetch(CHANGED_THREADS_SQL, params, prepare=False)
        seconds = time.perf_counter() - started
        return [
            ChangedThread(str(r["thread_id"]), str(r["newest"]), int(r["checkpoints"]))
            for r in rows
        ], seconds
    try:
        with connect(conninfo) as conn, conn.cursor() as cursor:
            started = time.perf_counter()
            cursor.execute(CHANGED_THREADS_SQL, params)
            found = [ChangedThread(str(t), str(n), int(c)) for t, n, c in cursor.fetchall()]
            return found, time.perf_counter() - started
    except psycopg.Error as exc:
        raise unavailable(exc, conninfo) from None


def _projected(
    session: Session, thread_ids: Sequence[str]
) -> dict[str, tuple[str, str | None, str]]:
    """thread id -> (origin, projected checkpoint id, status) for the ones we hold.

    PostgreSQL gets the ids as one array parameter (``= ANY``), not one
    parameter per id; SQLite an ``IN`` list per `_LOOKUP_CHUNK` ids.
    """
    columns = (
        Conversation.thread_id,
        Conversation.origin,
        Conversation.checkpoint_id,
        Conversation.status,
    )
    if not thread_ids:
        return {}
    if not is_sqlite(session):
        ids = sa.bindparam("ids", list(thread_ids), type_=postgresql.ARRAY(sa.String()))
        rows = session.execute(sa.select(*columns).where(Conversation.thread_id == sa.any_(ids)))
        return {t: (origin, checkpoint, status) for t, origin, checkpoint, status in rows}
    found: dict[str, tuple[str, str | None, str]] = {}
    for start in range(0, len(thread_ids), _LOOKUP_CHUNK):
        chunk = list(thread_ids[start : start + _LOOKUP_CHUNK])
        rows = session.execute(sa.select(*columns).where(Conversation.thread_id.in_(chunk)))
        found.update({t: (origin, checkpoint, status) for t, origin, checkpoint, status in rows})
    return found


def _touch_seen(
    settings: Settings, seen: Sequence[str], deleted: Sequence[str], platform_id: str
) -> None:
    """The platform of every attached thread seen; a deleted one seen again is active again."""
    now = utcnow()
    with session_scope(settings) as session:
        for start in range(0, len(deleted), _LOOKUP_CHUNK):
            session.execute(
                sa.update(Conversation)
                .where(
                    Conversation.thread_id.in_(deleted[start : start + _LOOKUP_CHUNK]),
                    attached_rows(),
                    Conversation.status == DELETED,
                )
                .values(status=ACTIVE, deleted_at=None, updated_at=now)
                .execution_options(synchronize_session=False)
            )
        for start in range(0, len(seen), _LOOKUP_CHUNK):
            session.execute(
                sa.update(Conversation)
                .where(
                    Conversation.thread_id.in_(seen[start : start + _LOOKUP_CHUNK]),
                    attached_rows(),
                    Conversation.platform_id.is_distinct_from(platform_id),
                )
                .values(platform_id=platform_id)
                .execution_options(synchronize_session=False)
            )


def _attached_count(session: Session) -> int:
    return int(
        session.scalar(
            sa.select(sa.func.count())
            .select_from(Conversation)
            .where(attached_rows(), Conversation.status != DELETED)
        )
        or 0
    )


def mark_deleted(settings: Settings, present: Sequence[str]) -> int:
    """Mark deleted every projected thread not in ``present`` (all the platform holds)."""
    listed = set(present)
    with session_scope(settings) as session:
        held = session.scalars(
            sa.select(Conversation.thread_id).where(attached_rows(), Conversation.status != DELETED)
        )
        gone = sorted(t for t in held if t not in listed)
        now = utcnow()
        for start in range(0, len(gone), _LOOKUP_CHUNK):
            session.execute(
                sa.update(Conversation)
                .where(
                    Conversation.thread_id.in_(gone[start : start + _LOOKUP_CHUNK]),
                    attached_rows(),
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


def _save_watermark(
    settings: Settings,
    source: str,
    checkpoint_id: str,
    platform_id: str | None = None,
    cost: tuple[bool, float, int, int | None] | None = None,
) -> int:
    """Store the watermark (and the platform scanned; ``cost``: whether it has the checkpoint_id
    index, the window query's ms, the checkpoints in the window and in the table); returns the
    attached threads we hold."""
    for attempt in (1, 2):
        try:
            with session_scope(settings) as session:
                threads = _attached_count(session)
                row = session.get(ScanWatermark, source)
                if row is None:
                    row = ScanWatermark(source=source)
                    session.add(row)
                row.checkpoint_id = checkpoint_id
                if platform_id is not None:
                    row.platform_id = platform_id
                if cost is not None:
                    row.checkpoint_index, row.window_query_ms, row.window_rows, row.table_rows = (
                        cost
                    )
                row.scanned_at = utcnow()
                row.threads = threads
                return threads
        except sa.exc.IntegrityError:  # another scanner stored the first row at the same time
            if attempt == 2:
                raise
    return 0  # pragma: no cover - the loop returns or raises


def _next_watermark(before: str, reached: str | None, tally: Tally, cap: str) -> str:
    """The watermark after projecting up to ``reached``: never past a thread that failed,
    never past ``cap`` (the platform database's clock plus a skew)."""
    watermark = max(before, reached or "")
    if checkpoint_time(watermark) is not None:  # a UUIDv6 id: its time is a clock to cap
        watermark = min(watermark, cap)
    if tally.held_back is not None:
        # the next floor is an overlap below the watermark, so that thread is read again
        return min(watermark, tally.held_back)
    return watermark


def scan(
    settings: Settings | None = None,
    *,
    full: bool = False,
    should_stop: Callable[[], bool] | None = None,
    progress: Callable[[ScanProgress], None] | None = None,
    together: bool = True,
    accept_new_platform: bool = False,
    actor: str = SCAN_ACTOR,
    show_first: bool | None = None,
) -> ScanReport:
    """Project every platform thread that moved since the last scan (all of them with ``full``).

    ``together=False`` projects each thread alone under its row lock (the
    per-thread path the batches give the same rows as; for tests and the bench).
    ``show_first``: show the threads never seen at their newest usage before
    projecting (None: from `SHOW_FIRST_MIN` of them on).
    PlatformChanged (nothing done) when the platform is not the one the last
    scan read, unless ``accept_new_platform``.
    """
    settings = settings or get_settings()
    conninfo = attach_conninfo(settings)
    source = source_label(conninfo)
    started = time.perf_counter()
    opened = opened_platform_store(conninfo)
    identity = platform_identity(conninfo, opened)
    changed_platform = check_platform(
        settings, source, identity, accept=accept_new_platform, actor=actor
    )
    cap = clock_cap(identity.now)
    stored = None if full else read_watermark(settings, source)
    before = stored.checkpoint_id if stored is not None else ""
    # a watermark past the platform's clock would blind every scan: read from the start
    reset = checkpoint_time(before) is not None and before > cap
    if reset:
        before = ""
    floor = scan_floor(before, OVERLAP_SECONDS, now=identity.now)  # a look-back from now()
    seen, query_seconds = changed_threads(conninfo, floor=floor, store=opened)
    indexed = has_checkpoint_index(conninfo, opened)  # once per scan (attach.platforms)
    table_rows = None if indexed else checkpoint_table_rows(conninfo, opened)
    tally = Tally()
    with session_scope(settings) as session:
        projected = _projected(session, [t.thread_id for t in seen])
    held = quarantine.held(settings, source, quarantine.QUARANTINED)
    flagged = quarantine.held(settings, source, quarantine.FLAGGED)
    changed: list[ChangedThread] = []
    skipped = 0
    retried: list[str] = []  # quarantined before, moved since: tried again
    revived: list[str] = []  # marked deleted, seen again with the checkpoint projected
    missing = {t.thread_id for t in seen if t.thread_id not in projected}
    for thread in seen:
        origin, checkpoint, status = projected.get(thread.thread_id, (ORIGIN_ATTACHED, None, ""))
        key = quarantine.thread_key(thread.thread_id)
        if not is_attached(origin):
            tally.conflict(thread.thread_id)
        elif held.get(key) == quarantine.printable(thread.newest, 64):
            skipped += 1  # quarantined at this checkpoint: moved past, not read again
        elif checkpoint != thread.newest:
            changed.append(thread)
            if key in held:
                retried.append(thread.thread_id)
        elif status == DELETED:
            revived.append(thread.thread_id)
    changed.sort(key=lambda t: t.newest)  # oldest first: the watermark can follow the work
    future = [
        Problem(t.thread_id, t.newest, "checkpoint_in_future", _FUTURE_REASON)
        for t in seen
        if t.newest > cap and checkpoint_time(t.newest) is not None
    ]
    reached: str | None = None
    stopped = False
    platform_id = identity.platform_id
    keeper = ProgressKeeper(settings, source)
    first = [t for t in changed if t.thread_id in missing]
    shown: set[str] = set()
    shown_seconds = None

    total = sum(t.checkpoints for t in changed)

    def show() -> None:  # while the projection's worker processes start
        nonlocal shown_seconds
        if first and (len(first) >= SHOW_FIRST_MIN if show_first is None else show_first):
            store = opened or platform_store(settings)
            if isinstance(store, PlatformStore):
                shown.update(show_newest_usage(settings, store, first, platform_id, should_stop))
                shown_seconds = round(time.perf_counter() - started, 4)
                keeper.update(
                    ScanProgress(0, len(changed), 0, total, 0.0, shown=len(shown)), now=True
                )

    def on_progress(now: ScanProgress) -> None:
        now = dataclasses.replace(now, shown=len(shown))
        if progress is not None:
            progress(now)
        keeper.update(now)

    if changed:
        keeper.update(ScanProgress(0, len(changed), 0, total, 0.0))
        unsaved = 0
        running = project_stretches(
            settings,
            changed,
            missing,
            should_stop,
            together=together,
            on_progress=on_progress,
            meanwhile=show,
        )
        try:
            with closing(running) as stretches:  # an error here waits for what runs, then stops
                for stretch, result in stretches:
                    if result is None:
                        stopped = True
                        continue
                    tally.merge(result)
                    if stopped:
                        continue  # done after an earlier stretch stopped: the watermark waits
                    reached = stretch[-1].newest
                    unsaved += len(stretch)
                    if unsaved >= SAVE_EVERY:
                        unsaved = 0
                        watermark = _next_watermark(before, reached, tally, cap)
                        _save_watermark(settings, source, watermark)
        except BaseException as exc:
            keeper.end(STOPPED if isinstance(exc, KeyboardInterrupt) else FAILED)
            if reached is not None:
                _save_watermark(settings, source, _next_watermark(before, reached, tally, cap))
            raise
        keeper.end(STOPPED if stopped else FINISHED)
    if not stopped:
        reached = max((t.newest for t in seen), default=None)
    quarantined = quarantine.record(settings, source, tally.problems, quarantine.QUARANTINED)
    # a quarantined thread is never drawn: no row shown at its newest usage stays, whichever
    # scan showed or quarantined it
    drop_quarantined(settings, source)
    quarantine.lift(
        settings, source, [t for t in retried if t in tally.done], quarantine.QUARANTINED
    )
    quarantine.record(settings, source, future, quarantine.FLAGGED)
    unflag = set(flagged) - {quarantine.thread_key(p.thread_id) for p in future}
    if unflag:  # flagged before, dated within the clock now
        back = [t.thread_id for t in seen if quarantine.thread_key(t.thread_id) in unflag]
        quarantine.lift(settings, source, back, quarantine.FLAGGED)
    _touch_seen(settings, [t.thread_id for t in seen], revived, platform_id)
    deleted = mark_deleted(settings, [t.thread_id for t in seen]) if full and not stopped else 0
    watermark = _next_watermark(before, reached, tally, cap)
    window = sum(t.checkpoints for t in seen)
    cost = (indexed, round(query_seconds * 1000, 1), window, table_rows)
    attached = _save_watermark(settings, source, watermark, platform_id, cost)
    report = ScanReport(
        source=source,
        watermark_before=stored.checkpoint_id if stored is not None else "",
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
        platform=platform_id,
        checkpoint_index=indexed,
        platform_changed=changed_platform,
        watermark_capped=bool(reached and reached > cap),
        watermark_reset=reset,
        future=len(future),
        quarantined=len(tally.problems),
        quarantined_skipped=skipped,
        undeleted=len(revived),
        shown=len(shown),
        shown_seconds=shown_seconds,
        future_threads=[quarantine.printable(p.thread_id) for p in future[:_FLAGS_SHOWN]],
        quarantined_threads=[
            quarantine.printable(p.thread_id) for p in tally.problems[:_FLAGS_SHOWN]
        ],
    )
    log.debug(
        "attach scan of %s: %d threads projected, %d newly quarantined",
        source,
        report.projected,
        quarantined,
    )
    return report
