"""Benchmark: attached threads compressed in bulk through the stand-in platform's endpoint.

Builds a platform in a throw-away PostgreSQL database as `bench/attach.py` does
(real `create_agent` template threads, cloned to --threads threads), scans it
into a second throw-away database (the dashboard's), starts the stand-in
platform server (`tests/attach/platform_server.py`, uvicorn) over the platform's
database, and compresses every thread through the one seam
(`sources.compress_each`: at most 3 calls in flight). Prints the wall
time, calls per second, and our overhead per call: the seam's whole time for a
thread (the stale-click read, the HTTP call, the re-projection, the audit rows)
minus the platform's own handling time (its Server-Timing), p50 and p95
(target p95 <= 20 ms), and its HTTP part; the CPU each call costs, ours and the
stand-in's (on one machine, calls in flight queue for the same cores); then the
same for --sequential other threads compressed one at a time (no contention of
our own). Speed lives here, never in a timed test.

    .venv/bin/python bench/platform_compress.py [--threads 200] [--sequential 30] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.attach import ADMIN_URL, clone_threads, conninfo_of, run_templates  # noqa: E402
from bench.dbs import create_database, drop_database  # noqa: E402
from tests.fixtures.live_server import free_port, started  # noqa: E402
from yuxi_dash.access.roles import Actor, Role  # noqa: E402
from yuxi_dash.attach import scan  # noqa: E402
from yuxi_dash.attach.platform_store import close_platform_stores  # noqa: E402
from yuxi_dash.files.workdir import Workdir  # noqa: E402
from yuxi_dash.platform.client import close_platform_clients  # noqa: E402
from yuxi_dash.settings import Settings  # noqa: E402
from yuxi_dash.sources import PLATFORM_CALLS, Outcome, compress_each  # noqa: E402
from yuxi_dash.store import db  # noqa: E402
from yuxi_dash.store.db import session_scope  # noqa: E402
from yuxi_dash.store.history import list_audit  # noqa: E402

TOKEN = "bench-token-0123456789"


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def wait_serving(url: str, process_text: object, deadline_seconds: float = 120) -> None:
    deadline = time.monotonic() + deadline_seconds
    while True:
        try:
            httpx.get(f"{url}/_record", timeout=5).raise_for_status()
            return
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise SystemExit(f"the stand-in platform did not start:\n{process_text}") from None
            time.sleep(0.2)


def cpu_seconds(pid: int) -> float:
    """A process's user + system CPU seconds so far (Linux /proc; all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def attempt_times(settings: Settings) -> dict[str, tuple[float, float]]:
    """thread -> (the platform's handling ms, our HTTP call's ms) of its last attempt (audit)."""
    with session_scope(settings) as session:
        rows = list_audit(session, action="compress", limit=100_000)
    found: dict[str, tuple[float, float]] = {}
    for row in rows:  # newest first: the first seen per thread is its last attempt
        thread_id = row.target.removeprefix("thread:")
        handled, latency = row.detail.get("platform_ms"), row.detail.get("latency_ms")
        if thread_id not in found and isinstance(handled, int | float):
            found[thread_id] = (float(handled), float(latency or 0.0))
    return found


def report(label: str, outcomes: list[Outcome], times: dict[str, tuple[float, float]]) -> None:
    """Our overhead per call: the whole seam, and its HTTP part, beyond the platform's handling."""
    timed = [o for o in outcomes if o.thread_id in times]
    seam = [o.seconds * 1000 - times[o.thread_id][0] for o in timed]
    http = [times[o.thread_id][1] - times[o.thread_id][0] for o in timed]
    p95 = percentile(seam, 0.95)
    print(
        f"{label}: our overhead per call p50 {statistics.median(seam):.1f} ms, p95 {p95:.1f} ms "
        f"(target p95 <= 20 ms: {'met' if p95 <= 20 else 'NOT met'}); of which the HTTP call "
        f"p50 {statistics.median(http):.1f} ms, p95 {percentile(http, 0.95):.1f} ms, the rest "
        "(stale-click read, re-projection, audit rows)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=200)
    parser.add_argument(
        "--sequential", type=int, default=30, help="then this many other threads, one at a time"
    )
    parser.add_argument("--keep", action="store_true", help="keep both databases")
    args = parser.parse_args()

    platform_url = create_database(ADMIN_URL, "yuxi_bench_platform")
    dashboard_url = create_database(ADMIN_URL, "yuxi_bench_dash")
    conninfo = conninfo_of(platform_url)
    root = Path(tempfile.mkdtemp(prefix="yuxi-bench-platform-"))
    workdir = root / "workdir"
    Workdir(workdir).initialize()
    port = free_port()
    base = {"database_url": dashboard_url, "workdir": workdir, "lock_timeout_seconds": 30}
    settings = Settings(
        **base,
        attach_checkpointer=conninfo,
        platform_url=f"http://127.0.0.1:{port}",
        platform_token=TOKEN,
    )
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    try:
        built = time.perf_counter()
        every = clone_threads(
            conninfo, run_templates(conninfo, workdir), args.threads + args.sequential
        )
        thread_ids, spare = every[: args.threads], every[args.threads :]
        scanned = scan(settings)
        print(
            f"platform: {len(every)} threads built and scanned "
            f"({scanned.projected} projected) in {time.perf_counter() - built:.1f} s"
        )
        spec = root / "platform.json"
        spec.write_text(
            json.dumps(
                {"conninfo": conninfo, "workdir": str(workdir), "token": TOKEN, "port": port}
            )
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("YUXI_DASH_")}
        env["PYTHONPATH"] = str(ROOT)
        command = [sys.executable, "-m", "tests.attach.platform_server", str(spec)]
        with started(command, cwd=ROOT, env=env) as process:
            wait_serving(str(settings.platform_url), process.text())
            actor = Actor(id="bench@example.com", role=Role.OPERATOR, via="cli")
            ours, theirs = time.process_time(), cpu_seconds(process.popen.pid)
            started_at = time.perf_counter()
            outcomes = compress_each(
                [(t, None) for t in thread_ids], actor=actor, settings=settings
            )
            wall = time.perf_counter() - started_at
            ours = (time.process_time() - ours) * 1000 / len(thread_ids)
            theirs = (cpu_seconds(process.popen.pid) - theirs) * 1000 / len(thread_ids)
            record = httpx.get(f"{settings.platform_url}/_record", timeout=10).json()
            times = attempt_times(settings)  # the bulk's attempts, before the second pass
            alone = [  # other threads, no other call in flight: no contention of our own
                compress_each([(t, None)], actor=actor, settings=settings)[0] for t in spare
            ]
        statuses: dict[str, int] = {}
        for outcome in outcomes:
            key = outcome.result.status if outcome.result else getattr(outcome.error, "code", "?")
            statuses[key] = statuses.get(key, 0) + 1
        platform = [times[o.thread_id][0] for o in outcomes if o.thread_id in times]
        print(f"outcomes: {statuses}; calls received {len(record['calls'])}, "
              f"most in flight {record['max_in_flight']} (limit {PLATFORM_CALLS})")  # fmt: skip
        print(f"wall time: {wall:.2f} s for {len(outcomes)} threads "
              f"({len(outcomes) / wall:.1f} threads/s)")  # fmt: skip
        print(
            f"platform handling per call: p50 {statistics.median(platform):.1f} ms, "
            f"p95 {percentile(platform, 0.95):.1f} ms"
        )
        report(f"in bulk ({PLATFORM_CALLS} in flight)", outcomes, times)
        # Little's law: a call's latency is the calls in flight times the time between two
        # calls done. Each process runs its Python on one core at a time (its interpreter
        # lock), and the two share the machine's cores.
        between = max(ours, theirs, (ours + theirs) / (os.cpu_count() or 1))
        print(
            f"CPU per call in bulk: ours {ours:.1f} ms, the stand-in platform's {theirs:.1f} ms "
            f"(same machine); at best one call done per {between:.1f} ms, so each of "
            f"{PLATFORM_CALLS} in flight takes about {PLATFORM_CALLS * between:.0f} ms"
        )
        if alone:
            report(f"one at a time ({len(alone)} calls)", alone, attempt_times(settings))
    finally:
        close_platform_clients()
        close_platform_stores()
        db.forget_engines()
        if not args.keep:
            drop_database(ADMIN_URL, platform_url)
            drop_database(ADMIN_URL, dashboard_url)


if __name__ == "__main__":
    main()
