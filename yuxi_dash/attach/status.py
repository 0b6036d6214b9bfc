"""What is attached, as `yuxi-dash attach status` and the Attached platform page show it.

`attach_status(settings)` reads our own tables only (never the platform): the
source label (host, port and database, never the URL), the platform it was
last scanned as, the watermark and when, the attached threads, and the
quarantined and flagged threads (`attach.quarantine`), their strings printable,
the last scan's cost: its window query's time and whether the platform's
``checkpoints`` has an index led by ``checkpoint_id`` (`attach.platforms`), and what that
index would save (`index_saving_ms`), and the running or last scan's progress.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa

from yuxi_dash.attach.platform_store import attach_conninfo, source_label
from yuxi_dash.attach.platforms import CREATE_INDEX_STATEMENT
from yuxi_dash.attach.quarantine import QuarantineEntry, entries
from yuxi_dash.attach.scan_progress import StoredProgress, read_progress
from yuxi_dash.attach.scanner import read_watermark
from yuxi_dash.printable_record import Record
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Conversation
from yuxi_dash.store.origin import attached_rows


@dataclass(frozen=True)
class AttachStatus(Record):
    """The attached platform as our tables know it."""

    configured: bool
    source: str | None
    scan_seconds: float
    watermark: str | None
    scanned_at: datetime | None
    attached_threads: int
    platform_id: str | None = None
    problems: list[QuarantineEntry] = field(default_factory=list)
    checkpoint_index: bool | None = None  # None: no scan has read it yet
    window_query_ms: float | None = None  # the last scan's window query
    window_rows: int | None = None  # the checkpoints in that window
    table_rows: int | None = None  # the platform's checkpoints (the catalog's estimate)
    progress: StoredProgress | None = None  # the running or last scan's projection

    @property
    def create_index_statement(self) -> str | None:
        """The one statement the platform's owner can run, when the last scan found no index."""
        return CREATE_INDEX_STATEMENT if self.checkpoint_index is False else None

    @property
    def index_saving_ms(self) -> float | None:
        """What the index would save per scan: the window query reads the window's rows instead
        of the whole table (measured on the last scan; None without the figures)."""
        if self.checkpoint_index is not False or self.window_query_ms is None:
            return None
        if self.window_rows is None or not self.table_rows:
            return None
        return self.window_query_ms * max(0.0, 1.0 - self.window_rows / self.table_rows)

    @property
    def index_saving_seconds_a_day(self) -> float | None:
        """`index_saving_ms` over a day of scans every ``scan_seconds``."""
        saving = self.index_saving_ms
        if saving is None or self.scan_seconds <= 0:
            return None
        return saving / 1000 * 86_400 / self.scan_seconds

    @property
    def scan_running(self) -> bool:
        """A scan's projection is under way (`StoredProgress.running`)."""
        return self.progress is not None and self.progress.running

    @property
    def quarantined(self) -> list[QuarantineEntry]:
        return [p for p in self.problems if p.action == "quarantined"]

    @property
    def flagged(self) -> list[QuarantineEntry]:
        return [p for p in self.problems if p.action == "flagged"]


def attach_status(settings: Settings | None = None) -> AttachStatus:
    """The status of the attached platform (from our tables; the platform is not asked)."""
    settings = settings or get_settings()
    with session_scope(settings) as session:
        attached = int(
            session.scalar(
                sa.select(sa.func.count()).select_from(Conversation).where(attached_rows())
            )
            or 0
        )
    source = watermark = platform_id = indexed = query_ms = window = table = None
    scanned_at = None
    progress: StoredProgress | None = None
    if settings.attach_configured:
        source = source_label(attach_conninfo(settings))
        row = read_watermark(settings, source)
        if row is not None:
            watermark = row.checkpoint_id or None
            scanned_at = row.scanned_at
            platform_id = row.platform_id
            indexed, query_ms = row.checkpoint_index, row.window_query_ms
            window, table = row.window_rows, row.table_rows
            progress = read_progress(row.progress)
    return AttachStatus(
        configured=settings.attach_configured,
        source=source,
        scan_seconds=settings.attach_scan_seconds,
        watermark=watermark,
        scanned_at=scanned_at,
        attached_threads=attached,
        platform_id=platform_id,
        problems=entries(settings, source),
        checkpoint_index=indexed,
        window_query_ms=query_ms,
        window_rows=window,
        table_rows=table,
        progress=progress,
    )


def stored_progress(settings: Settings | None = None) -> StoredProgress | None:
    """The running or last scan's progress alone (one row of our tables), for a page that
    redraws it often; None when nothing is attached or no scan kept one."""
    settings = settings or get_settings()
    if not settings.attach_configured:
        return None
    row = read_watermark(settings, source_label(attach_conninfo(settings)))
    return read_progress(row.progress) if row is not None else None
