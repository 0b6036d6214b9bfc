"""Re-project one attached thread now: after its platform compressed it, not at the next scan.

`newest_checkpoint_id(settings, thread_id)` is the platform checkpointer's
newest root checkpoint id of a thread, read with one indexed query (no state
decoded: the stale-click guard's read). `reproject_thread(settings, thread_id)`
projects what is new of that thread as a scan batch of one
(`projector.run_batch`: two or three platform queries, one write per table,
the thread's row locked; a failure stays with the thread and the next scan
projects it) and returns the newest checkpoint id (None when the platform holds
none). The scan's watermark is left alone: the next scan finds the thread
projected already and skips it.
"""

from __future__ import annotations

from yuxi_dash.attach import projector
from yuxi_dash.attach.platform_store import PlatformStore, platform_store
from yuxi_dash.settings import Settings

NEWEST_SQL = """
SELECT checkpoint_id FROM checkpoints
WHERE thread_id = %(thread_id)s AND checkpoint_ns = ''
ORDER BY checkpoint_id DESC LIMIT 1
"""


def newest_checkpoint_id(settings: Settings, thread_id: str) -> str | None:
    """The thread's newest root checkpoint id on the platform (one query), None without one."""
    store = platform_store(settings)
    if isinstance(store, PlatformStore):
        rows = store.fetch(NEWEST_SQL, {"thread_id": thread_id})
        return str(rows[0]["checkpoint_id"]) if rows else None
    latest = store.latest(thread_id)  # pragma: no cover - platform_store opens a PlatformStore
    return latest.checkpoint_id if latest is not None else None


def reproject_thread(settings: Settings, thread_id: str) -> str | None:
    """Project ``thread_id`` up to the platform's newest checkpoint now; that checkpoint's id."""
    newest = newest_checkpoint_id(settings, thread_id)
    if newest is None:
        return None
    changed = projector.ChangedThread(thread_id, newest, 1)
    projector.run_batch(settings, platform_store(settings), [changed], set(), None)
    return newest
