"""A scan's progress: the figures, and the row the Attached platform page reads them from.

`ScanProgress` is how far a projection is (threads and checkpoints done of those to do, its
rate, the time left). `ProgressKeeper` stores it on the platform's ``scan_watermarks`` row
(``progress``) as a scan goes, for the page and `yuxi-dash attach status`. Rules:
- Only a scan with threads to project keeps a row; its state is running, then finished,
  stopped or failed. While running, the row is written every `SAVE_SECONDS` at most.
- Each scan has its own id: a row another scan keeps running (written within
  `RUNNING_SECONDS`) is left alone, so two scanners never take turns on it.
- A failed write is one log line by type; the scan goes on without it.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from yuxi_dash.settings import Settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import ScanWatermark, utcnow

log = logging.getLogger(__name__)

RUNNING, FINISHED, STOPPED, FAILED = "running", "finished", "stopped", "failed"
SAVE_SECONDS = 2.0  # at most one write of a running scan's row in this time
RUNNING_SECONDS = 120.0  # a running row not written for longer is a scan that died


@dataclass(frozen=True)
class ScanProgress:
    """How far a scan's projection is: threads and checkpoints done of those to do."""

    threads_done: int
    threads_total: int
    checkpoints_done: int
    checkpoints_total: int
    seconds: float  # since the projection started
    shown: int = 0  # threads shown at their newest usage before their history (`newest_usage`)

    @property
    def rate(self) -> float:
        """Threads projected per second so far (0.0 before the first stretch is done)."""
        return self.threads_done / self.seconds if self.seconds > 0 else 0.0

    @property
    def seconds_left(self) -> float | None:
        """The time left at the rate so far; None before there is a rate."""
        if self.rate <= 0:
            return None
        return (self.threads_total - self.threads_done) / self.rate

    @property
    def fraction(self) -> float:
        return self.threads_done / self.threads_total if self.threads_total else 1.0

    def line(self) -> str:
        """One line for a terminal: done of total, the rate, the time left."""
        left = self.seconds_left
        first = f"{self.shown:,} threads shown at their newest usage · " if self.shown else ""
        return first + (
            f"projected {self.threads_done:,} of {self.threads_total:,} threads "
            f"({self.checkpoints_done:,} of {self.checkpoints_total:,} checkpoints) · "
            f"{self.rate:,.0f} threads/s · "
            + ("time left unknown" if left is None else f"about {left:,.0f} s left")
        )


@dataclass(frozen=True)
class StoredProgress:
    """A progress row as read back: the figures, the state, when it was last written."""

    progress: ScanProgress
    state: str
    updated_at: datetime | None

    @property
    def running(self) -> bool:
        """A scan is under way: its row says running and was written within RUNNING_SECONDS."""
        if self.state != RUNNING or self.updated_at is None:
            return False
        return (utcnow() - self.updated_at).total_seconds() <= RUNNING_SECONDS


def read_progress(stored: dict[str, Any] | None) -> StoredProgress | None:
    """The ``progress`` column of a watermark row, or None when no scan kept one."""
    if not stored:
        return None
    figures = ScanProgress(
        threads_done=int(stored.get("threads_done", 0)),
        threads_total=int(stored.get("threads_total", 0)),
        checkpoints_done=int(stored.get("checkpoints_done", 0)),
        checkpoints_total=int(stored.get("checkpoints_total", 0)),
        seconds=float(stored.get("seconds", 0.0)),
        shown=int(stored.get("shown", 0)),
    )
    at = stored.get("updated_at")
    return StoredProgress(
        figures, str(stored.get("state", FINISHED)), datetime.fromisoformat(at) if at else None
    )


class ProgressKeeper:
    """One scan's progress row: `update` as it goes (throttled), `end` once."""

    def __init__(self, settings: Settings, source: str) -> None:
        self.settings = settings
        self.source = source
        self.scan_id = uuid.uuid4().hex
        self.last: ScanProgress | None = None
        self._saved_at = -SAVE_SECONDS

    def update(self, progress: ScanProgress, *, now: bool = False) -> None:
        """The scan moved (or is alive): written when SAVE_SECONDS have passed since the last
        (``now``: at once, a step the page should show without waiting)."""
        self.last = progress
        if now or time.monotonic() - self._saved_at >= SAVE_SECONDS:
            self._saved_at = time.monotonic()
            self._write(progress, RUNNING)

    def end(self, state: str) -> None:
        """The scan ended (FINISHED, STOPPED or FAILED) at the last progress it reported."""
        if self.last is not None:
            self._write(self.last, state)

    def _write(self, progress: ScanProgress, state: str) -> None:
        row = {
            "scan_id": self.scan_id,
            "state": state,
            "threads_done": progress.threads_done,
            "threads_total": progress.threads_total,
            "checkpoints_done": progress.checkpoints_done,
            "checkpoints_total": progress.checkpoints_total,
            "seconds": round(progress.seconds, 3),
            "shown": progress.shown,
            "updated_at": utcnow().isoformat(),
        }
        try:
            with session_scope(self.settings) as session:
                stored = session.get(ScanWatermark, self.source, with_for_update=True)
                if stored is None:
                    session.add(ScanWatermark(source=self.source, progress=row))
                    return
                other = read_progress(stored.progress)
                theirs = (stored.progress or {}).get("scan_id") != self.scan_id
                if theirs and other is not None and other.running:
                    return  # another scanner's running row: left to it
                stored.progress = row
        except sa.exc.SQLAlchemyError as exc:
            log.warning("attach scan: its progress was not stored (%s)", type(exc).__name__)
