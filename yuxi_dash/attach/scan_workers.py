"""Running a scan's projection: its changed threads in stretches, on threads or worker processes.

`project_stretches` projects the threads a scan found changed (oldest newest checkpoint first)
and yields each stretch with its `Tally` in the order submitted, so the scanner's watermark only
follows finished work. Rules:
- SQLite: one batch at a time in the caller's thread (one writer). PostgreSQL: `WORKERS`
  batches at once on threads; from `PROCESS_MIN` threads on (a first scan), chunks of `CHUNK`
  on `process_count` processes (`worker_context`: forked from the fork server, never from
  the caller), all starting while the caller's ``meanwhile`` step runs. Both give the same rows
  (`tests/attach/test_scan_workers.py`). Stretches shrink towards the end (`split_stretches`).
- No more stretches are under way than there are workers; `should_stop` is asked before each
  one starts and while waiting, so a stop waits for at most the stretches already running.
- `on_progress` gets a `ScanProgress` after each stretch and, on PostgreSQL, every
  `HEARTBEAT_SECONDS` while a long stretch runs (the same counts, a later time).
"""

from __future__ import annotations

import gc
import math
import multiprocessing
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Collection, Generator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from multiprocessing.context import BaseContext
from pathlib import Path

from yuxi_dash.attach.platform_store import platform_store
from yuxi_dash.attach.projector import ChangedThread, Tally, run_batch
from yuxi_dash.attach.scan_progress import ScanProgress
from yuxi_dash.settings import Settings
from yuxi_dash.store.db import is_sqlite

BATCH = 50  # threads projected in one transaction (a few platform queries, one write per table)
WORKERS = 4  # batches projected at once on threads (PostgreSQL)
PROCESS_MIN = 2_000  # changed threads from which a scan projects on worker processes
MAX_PROCESSES = 4  # each opens its own pools on the platform and on our database
CHUNK = 250  # threads a worker process projects per task (BATCH at a time)
HEARTBEAT_SECONDS = 2.0  # progress while a stretch runs long
CGROUP_ROOT = Path("/sys/fs/cgroup")  # where cgroup v2 (or v1's controllers) is mounted
CGROUP_MEMBERSHIP = Path("/proc/self/cgroup")  # "0::/its/path" (v2), "4:cpu,cpuacct:/path" (v1)
V2_QUOTA = "cpu.max"
V1_QUOTA, V1_PERIOD = "cpu.cfs_quota_us", "cpu.cfs_period_us"


def process_count(settings: Settings, quota_file: Path | None = None) -> int:
    """Worker processes for a large scan: ``attach_scan_processes`` when set, else the cores this
    process may use and its cgroup's CPU quota allow (`cpu_quota` of ``quota_file``, by default
    `cgroup_quota_file`), at most `MAX_PROCESSES`."""
    if settings.attach_scan_processes is not None:
        return settings.attach_scan_processes
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        usable = os.cpu_count() or 1
    quota = cpu_quota(quota_file or cgroup_quota_file())
    if quota is not None:
        usable = min(usable, quota)
    return max(1, min(usable, MAX_PROCESSES))


def cgroup_quota_file(root: Path = CGROUP_ROOT, membership: Path = CGROUP_MEMBERSHIP) -> Path:
    """This process's CPU quota file: its own cgroup's v2 ``cpu.max``, else its v1 ``cpu``
    group's ``cpu.cfs_quota_us``, else that v1 mount's root one, else the v2 root ``cpu.max``
    (a container with its own cgroup namespace sees its group at the root)."""
    try:
        lines = membership.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        lines = []
    own: list[Path] = []  # its own group's files, v2 first
    mounts: list[Path] = []  # the v1 cpu mounts' root ones
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        path = path.strip().lstrip("/")
        if line.startswith("0::"):
            own.insert(0, root / path / V2_QUOTA)
        elif "cpu" in controllers.split(","):
            for mount in dict.fromkeys((controllers, "cpu")):  # "cpu,cpuacct" or its "cpu" link
                own.append(root / mount / path / V1_QUOTA)
                mounts.append(root / mount / V1_QUOTA)
    return next((f for f in [*own, *mounts] if f.is_file()), root / V2_QUOTA)


def cpu_quota(quota_file: Path) -> int | None:
    """The cores a cgroup CPU quota allows, rounded up (v2 ``"150000 100000"``, or v1
    ``cpu.cfs_quota_us`` 150000 beside ``cpu.cfs_period_us`` 100000: 2); None without a quota
    or a readable file."""
    try:
        if quota_file.name == V1_QUOTA:
            limit = quota_file.read_text(encoding="ascii").strip()
            period = (quota_file.parent / V1_PERIOD).read_text(encoding="ascii").strip()
        else:
            limit, period = quota_file.read_text(encoding="ascii").split()[:2]
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if limit in ("max", "-1"):
        return None
    try:
        return max(1, math.ceil(int(limit) / int(period)))
    except (ValueError, ZeroDivisionError):
        return None


def _start_worker() -> None:
    """A worker process leaves Ctrl-C to its parent, which stops the scan; what it imported
    lives as long as it does, so the garbage collector never walks it again (`gc.freeze`:
    not in each full collection of a chunk, not at the worker's exit)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gc.freeze()


def _ready() -> None:
    """A first task that only starts a worker process (`_start_worker`)."""


def _start_workers(pool: Executor, workers: int) -> None:
    """Start the worker processes of ``pool`` now, one `_ready` task each (a worker that is
    already idle takes the next task instead: the pool starts the rest on later tasks)."""
    for _ in range(workers):
        pool.submit(_ready)


def worker_context() -> BaseContext:
    """How a scan's worker processes start: forked from Python's fork server, a fresh
    single-threaded interpreter started once per process that imports this module first (if
    that fails, each worker imports it, as a spawned one would). The caller is never forked: it
    may be a server with threads. Each worker still runs the program's main module."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])  # no effect once the server runs
    return context


def project_chunk(
    settings: Settings, chunk: Sequence[ChangedThread], missing: Collection[str], together: bool
) -> Tally:
    """A worker process's task: ``chunk`` in batches of `BATCH`, one after the other."""
    store = platform_store(settings)
    tally = Tally()
    for start in range(0, len(chunk), BATCH):
        batch = chunk[start : start + BATCH]
        result = run_batch(settings, store, batch, missing, None, together=together)
        if result is not None:
            tally.merge(result)
    return tally


def _pool(settings: Settings, changed: Sequence[ChangedThread]) -> tuple[Executor, int, int]:
    """The pool a scan of ``changed`` runs on (PostgreSQL), its workers, the stretch size."""
    processes = process_count(settings)
    if len(changed) >= PROCESS_MIN and processes > 1:
        pool = ProcessPoolExecutor(
            processes, mp_context=worker_context(), initializer=_start_worker
        )
        return pool, processes, CHUNK
    workers = max(1, min(WORKERS, -(-len(changed) // BATCH)))
    return ThreadPoolExecutor(workers, thread_name_prefix="yuxi-dash-scan"), workers, BATCH


def split_stretches(
    changed: Sequence[ChangedThread], size: int, workers: int
) -> list[Sequence[ChangedThread]]:
    """``changed`` in order, in stretches of ``size`` that shrink towards the end (to a
    `BATCH`), so the workers finish together: none waits long on one last big stretch."""
    stretches = []
    start = 0
    while start < len(changed):
        left = len(changed) - start
        step = min(size, max(BATCH, -(-left // (2 * workers))))
        stretches.append(changed[start : start + step])
        start += step
    return stretches


def project_stretches(
    settings: Settings,
    changed: Sequence[ChangedThread],
    missing: Collection[str],
    should_stop: Callable[[], bool] | None,
    *,
    together: bool = True,
    on_progress: Callable[[ScanProgress], None] | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> Generator[tuple[Sequence[ChangedThread], Tally | None], None, None]:
    """Each stretch of ``changed`` with its tally (None: stopped before it ran), in order.

    ``meanwhile`` runs in this thread first, while the worker processes start (the fork server
    imports what they run, once per process; the scanner shows the new threads' newest usage
    then)."""
    if not changed:
        if meanwhile is not None:
            meanwhile()
        return
    started = time.perf_counter()
    checkpoints_total = sum(t.checkpoints for t in changed)
    threads_done = checkpoints_done = 0

    def report() -> None:
        if on_progress is not None:
            seconds = time.perf_counter() - started
            on_progress(
                ScanProgress(
                    threads_done, len(changed), checkpoints_done, checkpoints_total, seconds
                )
            )

    def stopping() -> bool:
        return should_stop is not None and should_stop()

    if is_sqlite(settings.database_url):
        if meanwhile is not None:
            meanwhile()
        store = platform_store(settings)
        for start in range(0, len(changed), BATCH):
            stretch = changed[start : start + BATCH]
            wanted = {t.thread_id for t in stretch if t.thread_id in missing}
            result = run_batch(settings, store, stretch, wanted, should_stop, together=together)
            if result is not None:
                threads_done += len(stretch)
                checkpoints_done += sum(t.checkpoints for t in stretch)
                report()
            yield stretch, result
        return
    executor, workers, size = _pool(settings, changed)
    stretches = split_stretches(changed, size, workers)
    on_processes = isinstance(executor, ProcessPoolExecutor)
    running: deque[Future[Tally | None]] = deque()
    stopped = False
    with executor as pool:
        if on_processes:  # the first start waits for the fork server's imports: not here
            with ThreadPoolExecutor(1, thread_name_prefix="yuxi-dash-scan-start") as starter:
                starting = starter.submit(_start_workers, pool, workers)
                if meanwhile is not None:
                    meanwhile()
                starting.result()
        elif meanwhile is not None:
            meanwhile()

        def submit(stretch: Sequence[ChangedThread]) -> Future[Tally | None]:
            wanted = {t.thread_id for t in stretch if t.thread_id in missing}
            if on_processes:
                return pool.submit(project_chunk, settings, stretch, wanted, together)
            store = platform_store(settings)
            return pool.submit(run_batch, settings, store, stretch, wanted, None, together=together)

        ahead = iter(stretches)
        for stretch in stretches:
            while len(running) < workers and not stopped:  # keep every worker busy, no more
                following = next(ahead, None)
                if following is None:
                    break
                stopped = stopping()
                if not stopped:
                    running.append(submit(following))
            if not running:  # stopped before this stretch started
                yield stretch, None
                continue
            future = running.popleft()
            while not wait([future], timeout=HEARTBEAT_SECONDS).done:
                report()  # a long stretch: the same counts, a later time
                stopped = stopped or stopping()
            result = future.result()  # in order: every stretch before it is done
            if result is not None:
                threads_done += len(stretch)
                checkpoints_done += sum(t.checkpoints for t in stretch)
                report()
            yield stretch, result
