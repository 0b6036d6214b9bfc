"""Projecting a batch of moved platform threads into our tables: together, or one by one.

`run_batch` projects a batch in ONE transaction of our database and two or three queries on
the platform (the steps: docs/architecture.md, "An attach scan"). Rules:
- A row another transaction holds, a thread the batch cannot stand for, and every thread of
  a failed batch go through `project_one` (`thread_lock`, `ProjectionReader`,
  `project_thread`), so a failure stays with its thread.
- A thread that cannot be projected (an id we cannot hold, a typed refusal of its rows, a
  `CheckpointRefused` checkpoint read alone) goes into the tally's ``problems`` to be
  quarantined (`attach.quarantine`); a transient failure (its row lock busy) holds the
  watermark back instead.
- A thread id of one of our own threads is skipped and counted as a conflict.
- A thread marked deleted that has checkpoints again is active again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash import validation
from yuxi_dash.attach.batch import MESSAGES_CHANNEL, ThreadRead, read_new_checkpoints
from yuxi_dash.attach.platform_store import PlatformStore
from yuxi_dash.attach.quarantine import TRANSIENT, Problem
from yuxi_dash.attach.reader import ProjectionReader
from yuxi_dash.errors import AttachUnavailable, CheckpointRefused, InvalidInput, YuxiDashError
from yuxi_dash.service.bulk_rows import insert_new_rows, update_rows
from yuxi_dash.service.locking import thread_lock
from yuxi_dash.service.projected_rows import ProjectedRows, load_projected
from yuxi_dash.service.projection import (
    ProjectionWrites,
    new_message_ids,
    project_checkpoints,
    project_thread,
)
from yuxi_dash.settings import Settings
from yuxi_dash.store.checkpointer import CheckpointStore, ThreadCheckpoint
from yuxi_dash.store.db import is_lock_failure, locked_session
from yuxi_dash.store.models import ORIGIN_ATTACHED, Agent, Conversation, utcnow
from yuxi_dash.store.origin import UNNAMED_AGENT, is_attached

log = logging.getLogger(__name__)

UNKNOWN_USER = "unknown"
ATTACHED_AGENT = UNNAMED_AGENT  # no agent named: never grouped as one agent (`capability`)
USER_KEYS = ("user_id",)
AGENT_KEYS = ("assistant_id", "graph_id")
DEADLOCK = "40P01"
DELETED = "deleted"
ACTIVE = "active"
_CONFLICTS_SHOWN = 20
# the conversation columns a projection sets (written back in one UPDATE per batch)
_PROJECTED = (
    "user_id", "agent_slug", "status", "deleted_at", "created_at", "last_activity_at",
    "llm_input_tokens", "next_llm_input_tokens", "context_window", "context_usage_ratio",
    "summary_trigger_tokens", "summary_pressure_ratio", "summary_active", "usage_measured_at",
    "last_compression_at", "checkpoint_id",
)  # fmt: skip


@dataclass(frozen=True)
class ChangedThread:
    """One row of the platform query: a thread with a checkpoint in the scan window."""

    thread_id: str
    newest: str  # the thread's newest checkpoint id (the saver's "latest")
    checkpoints: int  # its checkpoints in the window


@dataclass
class Tally:
    """What projecting some threads did (merged over the batches of a scan)."""

    projected: int = 0
    unchanged: int = 0
    conflicts: int = 0
    failed: int = 0
    checkpoints_read: int = 0
    new_checkpoints: int = 0
    conflict_threads: list[str] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)
    held_back: str | None = None  # the smallest newest id of a thread that failed
    problems: list[Problem] = field(default_factory=list)  # threads to quarantine
    done: set[str] = field(default_factory=set)  # threads projected (or found up to date)

    def conflict(self, thread_id: str) -> None:
        self.conflicts += 1
        if len(self.conflict_threads) < _CONFLICTS_SHOWN:
            self.conflict_threads.append(thread_id)

    def merge(self, other: Tally) -> None:
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
        self.problems.extend(other.problems)
        self.done |= other.done

    def fail(self, code: str, newest: str | None) -> None:
        self.failed += 1
        self.failures[code] = self.failures.get(code, 0) + 1
        if newest is not None and (self.held_back is None or newest < self.held_back):
            self.held_back = newest

    def quarantine(
        self, thread: ChangedThread, code: str, reason: str, detail: Mapping[str, str] | None = None
    ) -> None:
        """The thread cannot be projected: quarantined, and the scan moves past it."""
        self.problems.append(
            Problem(thread.thread_id, thread.newest, code, reason, dict(detail or {}))
        )


def _metadata_identifier(metadata: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    for key in keys:
        value = metadata.get(key)
        if isinstance(value, int | str) and not isinstance(value, bool):
            try:
                return validation.identifier(str(value), key)
            except InvalidInput:
                continue
    return None


def finish_row(
    conv: Conversation, latest: ThreadCheckpoint | None, *, first_at: datetime | None, fresh: bool
) -> None:
    """Who and which agent the newest checkpoint names, when it was written; alive again."""
    if latest is not None:
        name_row(conv, latest)
        if latest.created_at is not None:
            conv.last_activity_at = latest.created_at
        if conv.status == DELETED:  # the platform has the thread again
            conv.status, conv.deleted_at = ACTIVE, None
    if first_at is not None and fresh:
        conv.created_at = first_at  # when the platform started it, not when we saw it


def name_row(conv: Conversation, newest: ThreadCheckpoint) -> None:
    """The user and agent the newest checkpoint's metadata names (kept where it names none).

    Set before a thread's checkpoints are projected too: what they record (a compression's
    agent, the agent whose settings measure a state without usage) is the newest agent's.
    """
    user = _metadata_identifier(newest.metadata, USER_KEYS)
    agent = _metadata_identifier(newest.metadata, AGENT_KEYS)
    if user is not None:
        conv.user_id = user
    if agent is not None:
        conv.agent_slug = agent


def _new_row(session: Session, thread_id: str) -> Conversation:
    conv = Conversation(**new_row_values(thread_id))
    session.add(conv)
    session.flush()  # another scanner creating it too: IntegrityError here
    return conv


def _apply(
    session: Session,
    store: CheckpointStore,
    thread: ChangedThread,
    conv: Conversation | None,
    tally: Tally,
) -> None:
    """Project one platform thread whose row the session holds locked (or creates)."""
    if conv is None:
        conv = _new_row(session, thread.thread_id)
    elif not is_attached(conv.origin):
        tally.conflict(thread.thread_id)
        return
    elif conv.checkpoint_id == thread.newest:
        tally.unchanged += 1
        tally.done.add(thread.thread_id)
        return
    reader = ProjectionReader(store, since=conv.checkpoint_id)
    latest = project_thread(session, conv, reader, naming=name_row)
    finish_row(conv, latest, first_at=reader.first_at, fresh=reader.since is None)
    tally.checkpoints_read += reader.read
    tally.new_checkpoints += reader.new
    tally.projected += 1
    tally.done.add(thread.thread_id)


def project_one(
    settings: Settings, store: CheckpointStore, thread: ChangedThread, tally: Tally
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


def _insert_missing(session: Session, thread_ids: Sequence[str]) -> set[str]:
    """Rows for threads we never saw (one statement, `insert_new_rows`); returns the ones this
    inserted. A row another scanner made meanwhile is kept as it is (and projected from what
    it holds)."""
    rows = [new_row_values(thread_id) for thread_id in sorted(thread_ids)]
    return insert_new_rows(session, cast(sa.Table, Conversation.__table__), rows, "thread_id")


def new_row_values(thread_id: str) -> dict[str, Any]:
    """The columns of a new attached thread's row before anything is projected into it."""
    return {
        "thread_id": thread_id,
        "user_id": UNKNOWN_USER,
        "agent_slug": ATTACHED_AGENT,
        "title": "",
        "origin": ORIGIN_ATTACHED,
    }


def _lock_rows(session: Session, thread_ids: Sequence[str]) -> dict[str, Conversation]:
    """The rows of the batch no other transaction holds, locked (detached copies to project)."""
    table = Conversation.__table__
    rows = session.execute(
        sa.select(table)
        .where(table.c.thread_id.in_(list(thread_ids)))
        .order_by(table.c.thread_id)
        .with_for_update(skip_locked=True)
    )
    return {row.thread_id: Conversation(**dict(row._mapping)) for row in rows}


def _write_rows(session: Session, convs: Sequence[Conversation]) -> None:
    """The projected conversations back, in one UPDATE (`service.bulk_rows`)."""
    now = utcnow()
    update_rows(
        session,
        Conversation.__table__,  # type: ignore[arg-type]
        [
            {"id": conv.id, "updated_at": now, **{name: getattr(conv, name) for name in _PROJECTED}}
            for conv in convs
        ],
    )


def _project_together(
    session: Session,
    store: PlatformStore,
    batch: Sequence[ChangedThread],
    missing: Collection[str],
    tally: Tally,
) -> list[ChangedThread]:
    """Project the batch in the session's transaction; returns the threads left to do alone."""
    _insert_missing(session, [t.thread_id for t in batch if t.thread_id in missing])
    convs = _lock_rows(session, [t.thread_id for t in batch])
    alone: list[ChangedThread] = []
    todo: list[tuple[ChangedThread, Conversation]] = []
    for thread in batch:
        conv = convs.get(thread.thread_id)
        if conv is None:
            alone.append(thread)  # another transaction holds its row: alone, it waits for it
        elif not is_attached(conv.origin):
            tally.conflict(thread.thread_id)
        elif conv.checkpoint_id == thread.newest:
            tally.unchanged += 1
            tally.done.add(thread.thread_id)
        else:
            todo.append((thread, conv))
    reads = read_new_checkpoints(store, {t.thread_id: c.checkpoint_id for t, c in todo})
    ready: list[tuple[Conversation, ThreadRead]] = []
    for thread, conv in todo:
        read = reads.get(thread.thread_id)
        if read is None:
            alone.append(thread)
        else:
            ready.append((conv, read))
    # a row holds projected rows only once its checkpoint id is set (the same transaction)
    known = [conv.thread_id for conv, _ in ready if conv.checkpoint_id is not None]
    talk = {conv.thread_id: new_message_ids(read.baseline, read.newer) for conv, read in ready}
    # the saved results of a newest checkpoint read without its messages are indexed already
    indexing = {c.thread_id for c, r in ready if r.newer and MESSAGES_CHANNEL in r.newer[-1].values}
    rows = load_projected(session, known, messages=talk, indexing=indexing)
    for conv, read in ready:
        if read.newer:
            name_row(conv, read.newer[-1])  # before projecting, as `project_thread` does
    slugs = sorted({conv.agent_slug for conv, _ in ready})
    agents = {a.slug: a for a in session.scalars(sa.select(Agent).where(Agent.slug.in_(slugs)))}
    agent_of: Callable[[str], Agent | None] = agents.get
    writes = ProjectionWrites(known=set(known))
    for conv, read in ready:
        thread_rows = rows.get(conv.thread_id) or ProjectedRows()
        latest = project_checkpoints(conv, read.baseline, read.newer, thread_rows, writes, agent_of)
        finish_row(conv, latest, first_at=read.first_at, fresh=read.baseline is None)
        tally.checkpoints_read += read.read
        tally.new_checkpoints += read.new
        tally.projected += 1
        tally.done.add(conv.thread_id)
    writes.flush(session)
    _write_rows(session, [conv for conv, _ in ready])
    return alone


def _project_batch(
    settings: Settings,
    store: PlatformStore,
    batch: Sequence[ChangedThread],
    missing: Collection[str],
    tally: Tally,
) -> list[ChangedThread]:
    """The batch together (`_project_together`); what is left, or all of it when that failed."""
    local = Tally()
    wait = settings.lock_timeout_seconds
    try:
        with locked_session(settings, wait_seconds=wait) as session:
            alone = _project_together(session, store, batch, missing, local)
    except AttachUnavailable:
        raise  # the platform is gone: one by one would fail the same way
    except (sa.exc.OperationalError, sa.exc.InterfaceError) as exc:
        if is_lock_failure(exc) or getattr(exc.orig, "sqlstate", None) == DEADLOCK:
            return list(batch)
        raise  # our own database is down
    except Exception as exc:  # noqa: BLE001 - one by one finds the thread that failed
        log.warning(
            "attach scan: a batch failed (%s); its threads go one by one", type(exc).__name__
        )
        return list(batch)
    tally.merge(local)
    return alone


def run_batch(
    settings: Settings,
    store: CheckpointStore,
    batch: Sequence[ChangedThread],
    missing: Collection[str],
    should_stop: Callable[[], bool] | None,
    *,
    together: bool = True,
) -> Tally | None:
    """One batch, in a worker: together if it can, the rest one by one; None when asked to stop.

    ``missing``: the threads the scan found no row for. ``together=False``
    projects every thread alone (the reference path the batch must match).
    """
    if should_stop is not None and should_stop():
        return None
    tally = Tally()
    valid = _valid(batch, tally)
    if valid and together and isinstance(store, PlatformStore):
        valid = _project_batch(settings, store, valid, missing, tally)
    for thread in valid:
        _project_guarded(settings, store, thread, tally)
    return tally


def _valid(batch: Sequence[ChangedThread], tally: Tally) -> list[ChangedThread]:
    """The threads whose ids we can hold; the others are quarantined (tried again if they move)."""
    valid = []
    for thread in batch:
        try:
            validation.thread_id(thread.thread_id)
        except InvalidInput as exc:
            tally.quarantine(thread, exc.code, exc.message)
            continue
        valid.append(thread)
    return valid


def _project_guarded(
    settings: Settings, store: CheckpointStore, thread: ChangedThread, tally: Tally
) -> None:
    """`project_one` where a failure stays with its thread (and holds the watermark back)."""
    try:
        project_one(settings, store, thread, tally)
    except AttachUnavailable:
        raise
    except TRANSIENT as exc:  # its row lock busy, say: read it again next time
        tally.fail(getattr(exc, "code", "internal_error"), thread.newest)
    except CheckpointRefused as exc:  # nothing it names was called: quarantined, audited
        tally.quarantine(thread, exc.code, exc.message, {"type": str(exc.detail.get("type", "?"))})
    except YuxiDashError as exc:  # a refusal of this thread's own rows: quarantined
        tally.quarantine(thread, exc.code, exc.message)
    except (sa.exc.OperationalError, sa.exc.InterfaceError):
        raise  # our own database is down: no point going on
    except Exception as exc:  # noqa: BLE001 - one odd thread must not stop the others
        log.warning("attach scan: a thread failed to project (%s)", type(exc).__name__)
        tally.quarantine(thread, "projection_error", f"projecting it failed ({type(exc).__name__})")
