"""The locked service core: every write to a thread goes through this package.

One module per job, the public names re-exported here. It serves our own threads;
`yuxi_dash.sources` routes a thread to it or to the attached platform. The modules:
- `locking`: THE lock on a thread's `conversations` row (`thread_lock`), the refusals
  checked under it, a thread's audit target.
- `compress`: manual compression of our own thread in three phases; `compress_preview` and
  `readiness`: read-only (its preview; which threads a compress would leave unchanged).
- `projection`, `projected_rows`, `bulk_rows`, `usage_writes`: checkpoints into our tables.
- `unindexed_files`: offloaded files of a compress that did not commit, the files lock; `sweep`:
  the workdir sweep of orphaned offloaded files (admin), and on a timer in `serve`.
- `runs`: the platform's intake (`enqueue_request`) and the run lifecycle; `threads`: agents,
  thread rows, thread status, and `import_thread`.

The lock protocol: docs/architecture.md, "A compress click (the lock protocol)".
"""

from yuxi_dash.service.compress import CompressResult, compress_own_thread
from yuxi_dash.service.compress_preview import CompressionPreview, preview_own_thread
from yuxi_dash.service.locking import thread_lock, thread_target
from yuxi_dash.service.readiness import compress_readiness
from yuxi_dash.service.runs import (
    INTAKE_ACTION,
    PLATFORM_ACTOR,
    RequestInfo,
    RunInfo,
    cancel_request,
    dispatch_next_request,
    enqueue_request,
    finish_run,
    start_run,
)
from yuxi_dash.service.threads import (
    IMPORT_ACTION,
    ImportResult,
    create_thread,
    import_thread,
    record_import_refusal,
    set_thread_status,
    upsert_agent,
)
from yuxi_dash.service.usage_writes import (
    PER_CALL_USAGE_FIELDS,
    index_saved_files,
)
from yuxi_dash.store.origin import COMPRESS_ACTION

__all__ = [
    "COMPRESS_ACTION",
    "compress_readiness",
    "IMPORT_ACTION",
    "INTAKE_ACTION",
    "PER_CALL_USAGE_FIELDS",
    "PLATFORM_ACTOR",
    "CompressResult",
    "CompressionPreview",
    "ImportResult",
    "RequestInfo",
    "RunInfo",
    "cancel_request",
    "compress_own_thread",
    "create_thread",
    "dispatch_next_request",
    "enqueue_request",
    "finish_run",
    "import_thread",
    "index_saved_files",
    "preview_own_thread",
    "record_import_refusal",
    "set_thread_status",
    "start_run",
    "thread_lock",
    "thread_target",
    "upsert_agent",
]
