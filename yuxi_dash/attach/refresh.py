"""Re-project one attached thread now: after its platform compressed it, not at the next scan.

`reproject_thread(settings, thread_id)` reads the thread's newest checkpoint
from the platform's checkpointer and projects what is new under the
service's `thread_lock`, exactly as a scan projects a thread alone
(`projector.project_one`). It returns that newest checkpoint (None when the
platform holds none). The scan's watermark is left alone: the next scan
finds the thread projected already and skips it.
"""

from __future__ import annotations

# the module, not its names: `attach` loads the service package, which reaches this module
# while `projector` is still loading; its names are looked up when a thread is projected
from yuxi_dash.attach import projector
from yuxi_dash.attach.stores import platform_store
from yuxi_dash.settings import Settings
from yuxi_dash.store.checkpoints import ThreadCheckpoint


def reproject_thread(settings: Settings, thread_id: str) -> ThreadCheckpoint | None:
    """Project ``thread_id`` from the platform's newest checkpoint; that checkpoint."""
    store = platform_store(settings)
    latest = store.latest(thread_id)
    if latest is None:
        return None
    changed = projector.ChangedThread(thread_id, latest.checkpoint_id, 1)
    projector.project_one(settings, store, changed, projector.Tally())
    return latest
