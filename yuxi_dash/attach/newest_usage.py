"""A large first scan's threads shown at once, each at the usage its newest checkpoint states.

A first scan projects every checkpoint of every thread: minutes on a large platform. Before
that, `show_newest_usage` gives each thread the scan holds no row for a row with the usage
its newest checkpoint's ``token_usage`` states (what the fleet pages and the 85% list read),
its user, agent and last activity: one platform query (`NEWEST_USAGE_SQL`) and one insert per
`CHUNK` threads. Rules:
- The row's projected checkpoint stays empty, so the projection that follows reads the
  thread from its first checkpoint, as it would have, and sets every figure again.
- Shown only: a newest checkpoint in the saver's current format, without writes of no task,
  with usage and ids we can hold. The others wait for the projection, which measures,
  refuses or quarantines them as always; `drop_quarantined` removes the row of a thread
  that is quarantined. A row that exists by then is left as it is.
- Nothing is written to the platform; the watermark is the projection's alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, cast

import sqlalchemy as sa

from yuxi_dash import validation
from yuxi_dash.attach.batch import FORMAT_WITH_SENDS, NULL_TASK_ID
from yuxi_dash.attach.platform_store import PlatformStore
from yuxi_dash.attach.projector import DEADLOCK, ChangedThread, finish_row, new_row_values
from yuxi_dash.attach.quarantine import QUARANTINED, thread_key
from yuxi_dash.compression.state_format import TOKEN_USAGE_KEY
from yuxi_dash.service.bulk_rows import insert_new_rows
from yuxi_dash.service.projection import usage_from_values, usage_measured_at
from yuxi_dash.service.usage_writes import set_current_usage
from yuxi_dash.settings import Settings
from yuxi_dash.store.checkpoint_serde import strict
from yuxi_dash.store.checkpointer import ThreadCheckpoint
from yuxi_dash.store.db import is_lock_failure, locked_session, session_scope
from yuxi_dash.store.models import AttachQuarantine, Conversation
from yuxi_dash.store.origin import attached_rows

log = logging.getLogger(__name__)

CHUNK = 1000  # threads read in one platform query and inserted in one statement
# each wanted thread's newest root checkpoint, whether it can stand alone (current format, no
# writes of no task), and its token_usage blob (the version the checkpoint names)
NEWEST_USAGE_SQL = """
SELECT c.thread_id, c.checkpoint_id, c.metadata, c.checkpoint->>'ts' AS ts,
    (c.parent_checkpoint_id IS NOT NULL
     AND CASE WHEN jsonb_typeof(c.checkpoint->'v') = 'number'
              THEN (c.checkpoint->>'v')::numeric ELSE 0 END < %(format_with_sends)s
     OR EXISTS (
        SELECT 1 FROM checkpoint_writes cw
        WHERE cw.thread_id = c.thread_id AND cw.checkpoint_ns = c.checkpoint_ns
          AND cw.checkpoint_id = c.checkpoint_id AND cw.task_id = %(null_task)s
     )) AS not_alone,
    b.type, b.blob
FROM unnest(%(threads)s::text[], %(newest)s::text[]) AS wanted(w_thread, w_newest)
JOIN checkpoints c
  ON c.thread_id = wanted.w_thread AND c.checkpoint_ns = '' AND c.checkpoint_id = wanted.w_newest
LEFT JOIN checkpoint_blobs b
  ON b.thread_id = c.thread_id AND b.checkpoint_ns = '' AND b.channel = %(usage)s
  AND b.version = c.checkpoint->'channel_versions'->>%(usage)s
"""
# the columns a shown row sets (the rest keep their defaults until the projection)
SHOWN_COLUMNS = (
    "thread_id", "user_id", "agent_slug", "title", "origin", "platform_id", "last_activity_at",
    "llm_input_tokens", "next_llm_input_tokens", "context_window", "context_usage_ratio",
    "summary_trigger_tokens", "summary_pressure_ratio", "summary_active", "usage_measured_at",
)  # fmt: skip


def show_newest_usage(
    settings: Settings,
    store: PlatformStore,
    threads: Sequence[ChangedThread],
    platform_id: str | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> set[str]:
    """Rows for ``threads`` at the usage their newest checkpoints state; the ids shown.

    Best effort: a chunk whose insert waits past the lock timeout, deadlocks with another
    scanner or is refused is left to the projection (a log line naming the error's type).
    """
    shown: set[str] = set()
    table = cast(sa.Table, Conversation.__table__)
    for start in range(0, len(threads), CHUNK):
        if should_stop is not None and should_stop():
            break
        rows = _rows(store, threads[start : start + CHUNK], platform_id)
        try:
            with locked_session(settings, wait_seconds=settings.lock_timeout_seconds) as session:
                shown |= insert_new_rows(session, table, rows, "thread_id")
        except (sa.exc.OperationalError, sa.exc.IntegrityError, sa.exc.DataError) as exc:
            if isinstance(exc, sa.exc.OperationalError) and not _busy(exc):
                raise  # our own database is down
            log.warning(
                "attach scan: %d threads wait for their projection (%s)",
                len(rows),
                type(exc.orig).__name__,
            )
    return shown


def drop_quarantined(settings: Settings, source: str) -> int:
    """Remove the shown rows of ``source``'s quarantined threads, whichever scan quarantined
    them; how many.

    Every scan asks, whatever its window, so a drop that was busy (or never came: a stopped
    scan, a crash) comes with a later scan. A valid thread id is its own printable label: the
    quarantine is joined on it, then matched on the exact id's key.
    """
    with session_scope(settings) as session:
        found = session.execute(
            sa.select(Conversation.thread_id, AttachQuarantine.thread_key)
            .join(AttachQuarantine, AttachQuarantine.thread_label == Conversation.thread_id)
            .where(
                AttachQuarantine.source == source,
                AttachQuarantine.action == QUARANTINED,
                *_shown_rows(),
            )
        ).all()
    return drop_unprojected(settings, [t for t, key in found if thread_key(t) == key])


def drop_unprojected(settings: Settings, thread_ids: Sequence[str]) -> int:
    """Remove the rows of ``thread_ids`` shown at their newest usage; how many.

    Such a row is an attached one with usage but without a projected checkpoint, and no rows
    refer to it (a row the batch made for a thread it read alone has no usage: it stays, as
    without showing). Busy (a lock timeout, a deadlock): 0 and one log line; a later scan's
    `drop_quarantined` asks again.
    """
    if not thread_ids:
        return 0
    dropped = 0
    refer = _referring()  # what a delete would cascade to
    try:
        with locked_session(settings, wait_seconds=settings.lock_timeout_seconds) as session:
            for start in range(0, len(thread_ids), CHUNK):
                done = session.execute(
                    sa.delete(Conversation).where(
                        Conversation.thread_id.in_(list(thread_ids[start : start + CHUNK])),
                        *_shown_rows(),
                        *(~sa.exists().where(column == Conversation.thread_id) for column in refer),
                    )
                )
                dropped += int(getattr(done, "rowcount", 0) or 0)
    except sa.exc.OperationalError as exc:
        if not _busy(exc):
            raise
        log.info("attach scan: shown rows of quarantined threads wait for a later scan")
        return 0
    return dropped


def _shown_rows() -> tuple[sa.ColumnElement[bool], ...]:
    """A row shown at its newest usage: attached, with usage, nothing projected into it."""
    return (
        attached_rows(),
        Conversation.checkpoint_id.is_(None),
        Conversation.usage_measured_at.is_not(None),
    )


def _referring() -> list[sa.Column[Any]]:
    """The columns of every table that refer to a thread's row, read from the schema."""
    thread = Conversation.__table__.c.thread_id
    tables = Conversation.metadata.tables.values()
    return [fk.parent for table in tables for fk in table.foreign_keys if fk.column is thread]


def _busy(exc: sa.exc.OperationalError) -> bool:
    return is_lock_failure(exc) or getattr(exc.orig, "sqlstate", None) == DEADLOCK


def _rows(
    store: PlatformStore, threads: Sequence[ChangedThread], platform_id: str | None
) -> list[dict[str, Any]]:
    """The shown rows of one chunk of threads (one platform query), in thread id order."""
    found = store.fetch(
        NEWEST_USAGE_SQL,
        {
            "threads": [t.thread_id for t in threads],
            "newest": [t.newest for t in threads],
            "format_with_sends": FORMAT_WITH_SENDS,
            "null_task": NULL_TASK_ID,
            "usage": TOKEN_USAGE_KEY,
        },
        binary=True,  # the usage blob as its bytes
    )
    serde = strict(store.saver.serde)
    rows = []
    for row in found:
        if row["not_alone"] or row["blob"] is None or row["type"] == "empty":
            continue
        try:
            validation.thread_id(str(row["thread_id"]))
            usage = serde.loads_typed((row["type"], row["blob"]))
            checkpoint = _checkpoint(row, {TOKEN_USAGE_KEY: usage})
            figures = usage_from_values(checkpoint.values)
        except Exception:  # noqa: BLE001 - outside data: the projection says what is wrong
            continue  # an id, a type, a time, metadata or figures we cannot hold
        if figures is None or checkpoint.created_at is None:
            continue  # no usage stated (measured on the messages) or no time: the projection
        conv = Conversation(**new_row_values(checkpoint.thread_id), platform_id=platform_id)
        set_current_usage(
            conv, figures, measured_at=usage_measured_at(checkpoint.values, checkpoint)
        )
        finish_row(conv, checkpoint, first_at=None, fresh=False)
        rows.append({name: getattr(conv, name) for name in SHOWN_COLUMNS})
    return sorted(rows, key=lambda row: row["thread_id"])  # the batches' order: no deadlock


def _checkpoint(row: Mapping[str, Any], values: dict[str, Any]) -> ThreadCheckpoint:
    """The newest checkpoint with ``values`` (its usage alone), as the projection sees it."""
    metadata = dict(row["metadata"]) if isinstance(row["metadata"], Mapping) else {}
    created = datetime.fromisoformat(row["ts"]) if row["ts"] else None
    return ThreadCheckpoint(
        thread_id=str(row["thread_id"]),
        checkpoint_id=str(row["checkpoint_id"]),
        values=values,
        created_at=created.astimezone(UTC) if created else None,
        step=0,
        source="",
        metadata=metadata,
    )
