"""The Attached platform page's data: `attach.status` as tables of printable strings.

Read from our own tables on every run (a few small queries; never the
platform). The quarantined and flagged threads' ids are already escaped
(`attach.quarantine.printable`) and a table cell shows them as written.
"""

from __future__ import annotations

import pandas as pd

from yuxi_dash.attach.quarantine import QuarantineEntry
from yuxi_dash.attach.scan_progress import FINISHED, RUNNING, StoredProgress
from yuxi_dash.attach.status import AttachStatus, attach_status, stored_progress
from yuxi_dash.settings import get_settings
from yuxi_dash.ui.page_text import stamp

__all__ = ["FINISHED", "RUNNING", "problems_frame", "progress", "status"]

COLUMNS = ["thread", "checkpoint", "code", "reason", "first seen", "last seen"]


def status() -> AttachStatus:
    """The attached platform as our tables know it."""
    return attach_status(get_settings())


def progress() -> StoredProgress | None:
    """The running or last scan's progress alone (what the page redraws every few seconds)."""
    return stored_progress(get_settings())


def problems_frame(rows: list[QuarantineEntry]) -> pd.DataFrame:
    """One row per quarantined (or flagged) thread, newest first."""
    return pd.DataFrame(
        [
            {
                "thread": row.thread,
                "checkpoint": row.checkpoint_id,
                "code": row.code,
                "reason": row.reason,
                "first seen": stamp(row.first_seen_at),
                "last seen": stamp(row.last_seen_at),
            }
            for row in rows
        ],
        columns=COLUMNS,
    )
