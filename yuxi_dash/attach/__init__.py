"""Attach to a platform: read its LangGraph PostgreSQL checkpointer and project its threads.

`YUXI_DASH_ATTACH_CHECKPOINTER` names the platform's checkpointer (a
read-only role is enough). `scan` projects every thread that moved since the
last scan into our tables (origin "attached"), so the fleet view, the 85%
list, thread detail and tool results cover the platform's threads;
`thread_store` is where a thread's state is read from. The platform owns
those threads' state and lock: nothing is ever written there, and a compress
of an attached thread is refused (`ThreadAttached`).

- `checkpoint_clock`: UUIDv6 checkpoint ids as a clock, and the scan window's floor.
- `stores`: the platform's conninfo, its secret-free label, its read-only store.
- `scanner`: `scan(settings) -> ScanReport`: what moved, the watermark, deleted threads.
- `projector`: a batch of moved threads projected in one transaction (or one by one).
- `batch`: the batch's new checkpoints read in two or three platform queries.
- `reader`: one thread's new checkpoints, read in pages (the per-thread path).
- `loop`: the scan every `YUXI_DASH_ATTACH_SCAN_SECONDS` inside `yuxi-dash serve`.
- `platforms`: which platform a scan reads (system identifier, name) and its clock.
- `quarantine`: threads a scan could not project (or flagged), moved past and listed.
- `status`: what is attached, for `yuxi-dash attach status` and the page.
"""

from __future__ import annotations

from yuxi_dash.attach.scanner import ScanReport, read_watermark, scan
from yuxi_dash.attach.stores import attach_conninfo, platform_store, source_label, thread_store

__all__ = [
    "ScanReport",
    "attach_conninfo",
    "platform_store",
    "read_watermark",
    "scan",
    "source_label",
    "thread_store",
]
