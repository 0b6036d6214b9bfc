"""Running a scan's projection: its changed threads in stretches, on threads or worker processes.

`project_stretches` projects the threads a scan found changed (oldest newest checkpoint first)
and yields each stretch with its `Tally` in the order submitted, so the scanner's watermark only
follows finished work. Rules:
- SQLite: one batch at a time in the caller's thread (one writer: the scanner's own saves
  between batches never wait on a batch). PostgreSQL: `WORKERS` threads, a batch each; from
  `PROCESS_MIN` threads on (a first scan), one spawned process per core (never forked: the
  caller may be a server with threads), each projecting a `CHUNK` of threads in its own
  connections. Both give the same rows: `tests/attach/test_scan_workers.py`.
- `should_stop` is asked before each stretch starts: a stop cancels what has not started; a
  running chunk finishes (at most `CHUNK` threads). A stopped stretch yields None.
- `ScanProgress` counts threads and checkpoints done of those to do, the rate since the start,
  and the time left at that rate.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass

from yuxi_dash.attach.platform_store import platform_store
from yuxi_dash.attach.projector import ChangedThread, Tally, run_batch
from yuxi_dash.settings import Settings
from yuxi_dash.store.db import is_sqlite

BATCH = 50  # threads projected in one transaction (a few platform queries, one write per table)
WORKERS = 4  # batches projected at once on threads (PostgreSQL)
PROCESS_MIN = 5_000  # changed threads from which a scan projects on worker processes
CHUNK = 250  # threads a worker process projects per task (BATCH at a time)


@dataclass(frozen=True)
class ScanProgress:
    """How far a scan's projection is: threads and checkpoints done of those to do."""

    threads_done: int
    threads_total: int
    checkpoints_done: int
    checkpoints_total: int
    seconds: float  # since the projection started

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
        return (
            f"projected {self.threads_done:,} of {self.threads_total:,} threads "
            f"({self.checkpoints_done:,} of {self.checkpoints_total:,} checkpoints) · "
            f"{self.rate:,.0f} threads/s · "
            + ("time left unknown" if left is None else f"about {left:,.0f} s left")
        )


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


def _executor(settings: Settings, changed: Sequence[ChangedThread]) -> tuple[Executor, int]:
    """The pool a scan of ``changed`` runs on (PostgreSQL), and the threads in each stretch."""
    cores = os.cpu_count() or 1
    if len(changed) >= PROCESS_MIN and cores > 1:
        spawn = multiprocessing.get_context("spawn")
        return ProcessPoolExecutor(cores, mp_context=spawn), CHUNK
    workers = min(WORKERS, -(-len(changed) // BATCH))
    return ThreadPoolExecutor(workers, thread_name_prefix="yuxi-dash-scan"), BATCH


def project_stretches(
    settings: Settings,
    changed: Sequence[ChangedThread],
    missing: Collection[str],
    should_stop: Callable[[], bool] | None,
    *,
    together: bool = True,
    on_progress: Callable[[ScanProgress], None] | None = None,
) -> Iterator[tuple[Sequence[ChangedThread], Tally | None]]:
    """Each stretch of ``changed`` with its tally (None: stopped before it ran), in order."""
    if not changed:
        return
    started = time.perf_counter()
    checkpoints_total = sum(t.checkpoints for t in changed)
    threads_done = checkpoints_done = 0

    def report(stretch: Sequence[ChangedThread]) -> None:
        nonlocal threads_done, checkpoints_done
        threads_done += len(stretch)
        checkpoints_done += sum(t.checkpoints for t in stretch)
        if on_progress is not None:
            seconds = time.perf_counter() - started
            on_progress(
                ScanProgress(
                    threads_done, len(changed), checkpoints_done, checkpoints_total, seconds
                )
            )

    if is_sqlite(settings.database_url):
        store = platform_store(settings)
        for start in range(0, len(changed), BATCH):
            stretch = changed[start : start + BATCH]
            wanted = {t.thread_id for t in stretch if t.thread_id in missing}
            result = run_batch(settings, store, stretch, wanted, should_stop, together=together)
            if result is not None:
                report(stretch)
            yield stretch, result
        return
    executor, size = _executor(settings, changed)
    stretches = [changed[i : i + size] for i in range(0, len(changed), size)]
    with executor as pool:
        futures: list[Future[Tally | None]] = []
        for stretch in stretches:
            wanted = {t.thread_id for t in stretch if t.thread_id in missing}
            if isinstance(pool, ProcessPoolExecutor):
                futures.append(pool.submit(project_chunk, settings, stretch, wanted, together))
            else:
                store = platform_store(settings)
                futures.append(
                    pool.submit(
                        run_batch, settings, store, stretch, wanted, should_stop, together=together
                    )
                )
        try:
            for stretch, future in zip(stretches, futures, strict=True):
                if should_stop is not None and should_stop():
                    for pending in futures:
                        pending.cancel()
                if future.cancelled():
                    yield stretch, None
                    continue
                result = future.result()  # in order: every stretch before it is done
                if result is not None:
                    report(stretch)
                yield stretch, result
        finally:
            for pending in futures:
                pending.cancel()
