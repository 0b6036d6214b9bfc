"""A thread's source, resolved once: ours, or the attached platform's.

Every caller that acts on one thread (pages, CLI, API, bulk) asks its `ThreadSource`
and never tests the origin itself. `base`: the interface. `own`: our thread (our
checkpointer, our row lock and engine, `service`). `attached`: the platform's (read-only
from its checkpointer, `attach`; compressed through its endpoint, `platform`).
`resolver`: picks a thread id's source. `compress`: the entry points,
`compress_thread_context`, `preview_compression` and `compress_each` (at most 3
platform calls in flight). Whose thread it is is read in `yuxi_dash.store.origin`,
below the service, so alerts can ask it too.
"""

from yuxi_dash.sources.base import ThreadSource
from yuxi_dash.sources.compress import (
    PLATFORM_CALLS,
    Outcome,
    compress_each,
    compress_thread_context,
    preview_compression,
)
from yuxi_dash.sources.resolver import thread_source, thread_sources, thread_store

__all__ = [
    "PLATFORM_CALLS",
    "Outcome",
    "ThreadSource",
    "compress_each",
    "compress_thread_context",
    "preview_compression",
    "thread_source",
    "thread_sources",
    "thread_store",
]
