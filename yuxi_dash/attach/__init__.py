"""Attach to a platform: read its LangGraph PostgreSQL checkpointer and project its threads.

`YUXI_DASH_ATTACH_CHECKPOINTER` names the platform's checkpointer (a read-only role is enough).
`scan` projects every thread that moved since the last scan into our tables (origin
"attached"), so the pages and the CLI cover the platform's threads; `audited_platform_store` is
where their state is read from. The platform owns their state and lock: nothing is ever written
there. A compress of an attached thread goes to the platform's endpoint (`yuxi_dash.platform`,
sent by `yuxi_dash.sources`), or is refused (`ThreadAttached`).

The modules: `scanner` (the scan), `newest_usage` (a first scan's threads shown first),
`projector` (a batch in one transaction, or one by one), `batch` and `reader` (new checkpoints,
per batch or per thread), `checkpoint_clock` (ids as a clock), `platform_store` (the platform's
read-only store, its secret-free label), `platforms` (which platform, its clock, its index),
`quarantine` (threads a scan could not project), `status` (what is attached), `loop` (the scan
in `serve`, on one replica), `refresh` (one thread now, after a platform compress).
"""

from __future__ import annotations

from yuxi_dash.attach.platform_store import (
    attach_conninfo,
    audited_platform_store,
    platform_store,
    source_label,
)
from yuxi_dash.attach.scanner import ScanReport, read_watermark, scan

__all__ = [
    "ScanReport",
    "attach_conninfo",
    "audited_platform_store",
    "platform_store",
    "read_watermark",
    "scan",
    "source_label",
]
