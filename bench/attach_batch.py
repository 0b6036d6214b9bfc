"""Benchmark: does `attach.batch` (langgraph internals) earn its place on the first scan?

One platform (built as `bench/attach.py` builds it: real template threads by a
`create_agent` graph with our middleware, cloned into --threads threads of 20
checkpoints each), then the FIRST attach scan of every thread, timed side by
side in one run, each into a new dashboard database:

(batch)  the scan as shipped: each batch of 50 read by `attach.batch`
         (two or three queries, each blob decoded once, langgraph internals);
(public) the same scan, the same batches and writes, but each thread of a batch
         read through the public API: `ProjectionReader` (the per-thread reader,
         `graph.get_state_history` in pages) in place of
         `attach.batch.read_new_checkpoints` (patched in the bench only);
(alone)  with --alone, also `scan(together=False)`: every thread projected alone
         under its row lock (the per-thread path, for reference).

Every variant must project every thread, fail none, and write the same rows
(`same_rows`). With --rounds N the two are timed N times, in alternating order.
Prints each wall time (the scan's own), the bench process's CPU time, the
medians and the ratio public / batch (the rule: the internals stay only if they
buy at least 2x on the wall time).

    .venv/bin/python bench/attach_batch.py [--threads 10000] [--rounds 3] [--alone] [--keep-platform]
    .venv/bin/python bench/attach_batch.py --platform URL   # a platform kept by an earlier run
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from pydantic import SecretStr

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.attach import ADMIN_URL, clone_threads, platform_threads, run_templates  # noqa: E402
from bench.dbs import create_database, drop_database, psycopg_conninfo  # noqa: E402
from tests.attach.test_projector import dump  # noqa: E402
from yuxi_dash.attach import projector  # noqa: E402
from yuxi_dash.attach.batch import ThreadRead  # noqa: E402
from yuxi_dash.attach.platform_store import PlatformStore, close_platform_stores  # noqa: E402
from yuxi_dash.attach.reader import ProjectionReader  # noqa: E402
from yuxi_dash.attach.scanner import ScanReport, scan  # noqa: E402
from yuxi_dash.errors import CheckpointRefused  # noqa: E402
from yuxi_dash.files.workdir import Workdir  # noqa: E402
from yuxi_dash.service.projection import split_since  # noqa: E402
from yuxi_dash.settings import Settings  # noqa: E402
from yuxi_dash.store import db  # noqa: E402
from yuxi_dash.store.models import ToolResult  # noqa: E402

Reads = dict[str, ThreadRead | None]
_PATH = 4  # the path in a `dump` row of tool_results (thread, tool, call id, sha256, path)


def public_reads(store: PlatformStore, since: Mapping[str, str | None]) -> Reads:
    """`read_new_checkpoints` through the public API: each thread by `ProjectionReader`.

    The same answer: None where the projected checkpoint is gone or a blob is
    refused (the scanner projects those alone); the counts `ProjectionReader`
    keeps for `project_thread`.
    """
    reads: Reads = {}
    for thread_id, projected in since.items():
        reader = ProjectionReader(store, since=projected)
        try:
            baseline, newer = split_since(reader.history(thread_id), projected)
        except CheckpointRefused:
            reads[thread_id] = None
            continue
        if projected is not None and baseline is None:
            reads[thread_id] = None  # pruned: alone, it is projected from the start
            continue
        reads[thread_id] = ThreadRead(
            baseline=baseline,
            newer=newer,
            read=reader.read,
            new=reader.new,
            first_at=reader.first_at,
        )
    return reads


@contextmanager
def reader(kind: str) -> Iterator[None]:
    """The batch reader the projector uses during one scan (``public``: `public_reads`)."""
    shipped: Callable[..., Reads] = projector.read_new_checkpoints
    if kind == "public":
        projector.read_new_checkpoints = public_reads
    try:
        yield
    finally:
        projector.read_new_checkpoints = shipped


Rows = dict[str, list[tuple[Any, ...]]]


@dataclass(frozen=True)
class Timed:
    """One first scan: its report, the bench process's CPU seconds, the load after it."""

    report: ScanReport
    cpu: float
    load: float


def first_scan(kind: str, conninfo: str, workdir: Path, thread_count: int) -> tuple[Timed, Rows]:
    """The first scan of every thread into a new dashboard database; its timing and rows."""
    url = create_database(ADMIN_URL, "yuxi_bench_dash")
    settings = Settings(
        database_url=url,
        workdir=workdir,
        attach_checkpointer=SecretStr(conninfo),
        lock_timeout_seconds=30,
    )
    try:
        db.get_engine(settings)  # migrated before the clock starts
        cpu = time.process_time()
        with reader(kind):
            report = scan(settings, together=kind != "alone")
        cpu = time.process_time() - cpu
        assert report.projected == thread_count and report.failed == 0, report
        assert not report.quarantined, report
        return Timed(report, cpu, os.getloadavg()[0]), dump(settings)
    finally:
        close_platform_stores()
        db.forget_engines()
        drop_database(ADMIN_URL, url)


def same_rows(batch: Rows, other: Rows) -> bool:
    """The same rows, but for which owner indexed a saved-result file many owners share.

    The bench's clones of one template share its saved-result files across
    users; the first owner to index one keeps it (`service.saved_results`), and
    which one is first depends on how the scan's workers interleave. So
    ``tool_results`` is compared on the files indexed, every other table whole.
    """
    same = True
    for table, rows in batch.items():
        mine, theirs = set(rows), set(other[table])
        if table == ToolResult.__tablename__:
            paths = {row[_PATH] for row in mine} == {row[_PATH] for row in theirs}
            if mine != theirs:
                print(
                    f"  {table}: {len(mine - theirs)} rows only in (batch), "
                    f"{len(theirs - mine)} only in it (the same files indexed: {paths})"
                )
            same = same and paths
            continue
        if mine == theirs:
            continue
        same = False
        print(
            f"  {table}: {len(mine - theirs)} rows only in (batch), {len(theirs - mine)} only in it"
        )
        for row in sorted(mine - theirs, key=str)[:3]:
            print("    batch:", row)
        for row in sorted(theirs - mine, key=str)[:3]:
            print("    other:", row)
    return same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=1, help="alternate the scans this many times")
    parser.add_argument("--alone", action="store_true", help="also time scan(together=False)")
    parser.add_argument("--platform", help="reuse a platform kept by --keep-platform")
    parser.add_argument("--keep-platform", action="store_true", help="keep the platform database")
    args = parser.parse_args()

    reuse = args.platform is not None
    platform_url = args.platform or create_database(ADMIN_URL, "yuxi_bench_platform")
    conninfo = psycopg_conninfo(platform_url)
    workdir = Path(tempfile.mkdtemp(prefix="yuxi-bench-attach-batch-")) / "workdir"
    Workdir(workdir).initialize()
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    try:
        started = time.perf_counter()
        if reuse:
            thread_ids = platform_threads(conninfo)
        else:
            thread_ids = clone_threads(conninfo, run_templates(conninfo, workdir), args.threads)
        with psycopg.connect(conninfo) as conn:
            row = conn.execute(
                "SELECT (SELECT count(*) FROM checkpoints), (SELECT count(*) FROM checkpoint_blobs),"
                " pg_size_pretty(pg_database_size(current_database()))"
            ).fetchone()
        assert row is not None
        print(
            f"platform: {len(thread_ids):,} threads, {row[0]:,} checkpoints, {row[1]:,} blobs, "
            f"{row[2]} ({'reused' if reuse else 'built'} in {time.perf_counter() - started:.1f} s)"
        )
        kinds = ["batch", "public"] + (["alone"] if args.alone else [])
        timed: dict[str, list[Timed]] = {kind: [] for kind in kinds}
        first_rows: dict[str, Rows] = {}
        for round_ in range(args.rounds):
            order = kinds if round_ % 2 == 0 else [*reversed(kinds[:2]), *kinds[2:]]
            for kind in order:
                result, rows = first_scan(kind, conninfo, workdir, len(thread_ids))
                timed[kind].append(result)
                first_rows.setdefault(kind, rows)
                r = result.report
                print(
                    f"round {round_ + 1} ({kind}) first scan of {r.projected:,} threads: "
                    f"{r.seconds:.1f} s wall, {result.cpu:.1f} s CPU in this process, "
                    f"{r.checkpoints_read:,} checkpoints read, load {result.load:.1f}"
                )
        for kind in kinds[1:]:
            same = same_rows(first_rows["batch"], first_rows[kind])
            print(f"rows of ({kind}) == rows of (batch): {same}")
            assert same, f"({kind}) projected other rows than (batch)"
        wall = {k: statistics.median(t.report.seconds for t in v) for k, v in timed.items()}
        cpu = {k: statistics.median(t.cpu for t in v) for k, v in timed.items()}
        for kind in kinds:
            print(
                f"({kind}) median of {args.rounds}: {wall[kind]:.1f} s wall, {cpu[kind]:.1f} s CPU"
            )
        for kind in kinds[1:]:
            print(
                f"ratio ({kind}) / (batch): {wall[kind] / wall['batch']:.2f}x wall, "
                f"{cpu[kind] / cpu['batch']:.2f}x CPU"
            )
        ratio = wall["public"] / wall["batch"]
        verdict = "earns its place" if ratio >= 2 else "does NOT earn its place"
        print(f"attach.batch buys {ratio:.2f}x on the first scan: it {verdict} (rule: >= 2x)")
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    finally:
        close_platform_stores()
        db.forget_engines()
        if args.keep_platform or reuse:
            print(f"kept: platform {platform_url} (reuse it with --platform)")
        else:
            drop_database(ADMIN_URL, platform_url)
        shutil.rmtree(workdir.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
