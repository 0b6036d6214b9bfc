"""The support bundle at scale: one user with 200,000 facts, streamed, against a raw Cypher dump.

Run: `.venv/bin/python bench/memory_bundle.py [--scale 1.0] [--data-dir DIR] [--page 20000]
[--no-gc-pause] [--markdown]`.

Seeds (or reuses, with a kept --data-dir) bench/memory.py's graph — 50,000
entities, 200,000 facts, 5,000 episodes in graphiti-core's true schema — on a
private embedded FalkorDB. Then, each in its own fresh process so the peak RSS
is that work's alone (VmHWM):

- the bundle: `memory.support.bundle.write_bundle` to a JSON file (gate, audit, facts a
  page at a time by keyset on the uuid, episodes, threads), as the dashboard
  process would run it, with a progress callback as the page and the CLI pass;
- with `--no-gc-pause`, the same bundle again with `bundle_sources.collector_paused`
  made a no-op in that process only (the cyclic collector runs as usual);
- with `--markdown`, the same bundle as Markdown (the format people read) instead of JSON;
- the raw dump: one `MATCH (s)-[e:RELATES_TO]->(t) RETURN ...` of the same
  columns, every row at once, written as JSON lines.

Prints the times side by side with their ratios, the peaks, the full collections
and the bundle's size. Target: the dashboard process stays under 500 MB. Asserts
nothing (speed is not a test).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")

from falkordb import FalkorDB  # noqa: E402

from yuxi_dash.memory.graph import server as server_module  # noqa: E402
from yuxi_dash.memory.graph.client import GraphClient  # noqa: E402
from yuxi_dash.memory.graph.server import ensure_server, stop_server  # noqa: E402
from yuxi_dash.memory.support.bundle_sources import FACT_PAGE  # noqa: E402
from yuxi_dash.settings import Settings  # noqa: E402

USER = "bench_hub"  # bench/memory.py's GROUP is user_bench_hub
RAW_DUMP = """
MATCH (s)-[e:RELATES_TO]->(t)
RETURN e.uuid AS uuid, s.name AS source, s.uuid AS source_uuid, e.name AS name,
       t.name AS target, t.uuid AS target_uuid, e.fact AS fact, e.status AS status,
       e.source_kind AS source_kind, e.created_at AS created_at, e.valid_at AS valid_at,
       e.invalid_at AS invalid_at, e.expired_at AS expired_at, e.episodes AS episodes
"""


def _bench_memory() -> object:
    spec = importlib.util.spec_from_file_location(
        "bench_memory", Path(__file__).with_name("memory.py")
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def status_mb(field: str) -> float:
    """VmHWM (this process's peak) or VmRSS (now), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def hwm_mb() -> float:
    return status_mb("VmHWM")


def settings_for(data_dir: Path, work: Path) -> Settings:
    return Settings(
        falkordb_data_dir=data_dir,
        falkordb_query_timeout_ms=120_000,
        database_url=f"sqlite:///{work / 'bench.db'}",
        workdir=work / "workdir",
    )


def child_bundle(data_dir: Path, work: Path, page: int, gc_pause: bool, fmt: str) -> None:
    from ldclient.integrations.test_data import TestData

    from yuxi_dash.access.roles import Actor, Role
    from yuxi_dash.files.workdir import Workdir
    from yuxi_dash.flags import FlagEvaluator
    from yuxi_dash.memory.support import bundle_sources
    from yuxi_dash.memory.support.bundle import bundle_to_file

    if not gc_pause:  # this bench process only: every page read with the collector on
        bundle_sources.collector_paused = contextlib.nullcontext  # type: ignore[assignment]
    settings = settings_for(data_dir, work)
    Workdir(settings.workdir).initialize()
    td = TestData.data_source()
    td.update(td.flag("graphiti-memory").variation_for_all(True))
    td.update(td.flag("graphiti-communities-enabled").variation_for_all(False))
    evaluator = FlagEvaluator.from_test_data(settings, td)
    out = work / ("bundle.md" if fmt == "md" else "bundle.json")
    reports: list[float] = []
    before = status_mb("VmRSS")  # the libraries a dashboard process has loaded anyway
    full_before = gc.get_stats()[2]["collections"]
    started = time.perf_counter()
    result = bundle_to_file(
        USER,
        out,
        actor=Actor(id="bench", role=Role.VIEWER),
        settings=settings,
        evaluator=evaluator,
        fact_page=page,
        progress=lambda step: reports.append(step.fraction),
        fmt=fmt,
    )
    seconds = time.perf_counter() - started
    full_collections = gc.get_stats()[2]["collections"] - full_before
    evaluator.close()
    print(
        json.dumps(
            {
                "seconds": seconds,
                "facts": result.facts,
                "bytes": out.stat().st_size,
                "peak_mb": hwm_mb(),
                "before_mb": before,
                "progress_reports": len(reports),
                "full_collections": full_collections,
            }
        )
    )


def child_raw(data_dir: Path, work: Path) -> None:
    settings = settings_for(data_dir, work)
    handle = ensure_server(settings)
    client = GraphClient(FalkorDB(**handle.redis_kwargs()), settings, handle=handle)
    out = work / "raw.jsonl"
    before = status_mb("VmRSS")
    started = time.perf_counter()
    rows = client.ro_rows("user_" + USER, RAW_DUMP)
    with out.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, default=str) + "\n")
    seconds = time.perf_counter() - started
    print(
        json.dumps(
            {
                "seconds": seconds,
                "facts": len(rows),
                "bytes": out.stat().st_size,
                "peak_mb": hwm_mb(),
                "before_mb": before,
            }
        )
    )
    client.close()


def run_child(*argv: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, *argv], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        print(done.stderr[-3000:], file=sys.stderr)
        raise SystemExit(f"child {argv[0]} failed")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument(
        "--data-dir", type=Path, help="FalkorDB data dir to keep (reused if seeded)"
    )
    parser.add_argument("--page", type=int, default=FACT_PAGE, help="facts per keyset page")
    parser.add_argument(
        "--no-gc-pause",
        action="store_true",
        help="also run the bundle with the collector on during page reads, and compare",
    )
    parser.add_argument(
        "--markdown", action="store_true", help="also run the bundle as Markdown, and compare"
    )
    parser.add_argument("--format", default="json", help=argparse.SUPPRESS)
    parser.add_argument("--unpaused", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child", choices=["bundle", "raw"], help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        if args.child == "bundle":
            child_bundle(
                args.data_dir, args.work, args.page, gc_pause=not args.unpaused, fmt=args.format
            )
        else:
            child_raw(args.data_dir, args.work)
        return

    bench_memory = _bench_memory()
    entities, facts, episodes = (int(n * args.scale) for n in (50_000, 200_000, 5_000))
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="yfdb-bundle-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="yuxi-bundle-bench-"))
    settings = settings_for(data_dir, work)
    server_module._START_TIMEOUT_SECONDS = 300.0  # a kept 200k-fact RDB loads for 10-20 s
    handle = ensure_server(settings)
    try:
        client = GraphClient(FalkorDB(**handle.redis_kwargs()), settings, handle=handle)
        bench_memory.seed_or_reuse(client, "user_" + USER, entities, facts, episodes)  # type: ignore[attr-defined]
        client.close()
        common = ["--data-dir", str(data_dir), "--work", str(work), "--page", str(args.page)]
        bundle = run_child("--child", "bundle", *common)
        unpaused = (
            run_child("--child", "bundle", "--unpaused", *common) if args.no_gc_pause else None
        )
        markdown = (
            run_child("--child", "bundle", "--format", "md", *common) if args.markdown else None
        )
        raw = run_child("--child", "raw", *common)
        print(
            f"\nsupport bundle, {int(bundle['facts']):,} facts, keyset pages of {args.page:,}: "
            f"{bundle['seconds']:.1f} s, {bundle['bytes'] / 1e6:.0f} MB of JSON, "
            f"peak RSS {bundle['peak_mb']:.0f} MB (target < 500 MB: "
            f"{500 / bundle['peak_mb']:.1f}x headroom; {bundle['before_mb']:.0f} MB before "
            f"the bundle, grown {bundle['peak_mb'] - bundle['before_mb']:.0f} MB; "
            f"{int(bundle['progress_reports'])} progress reports; "
            f"{int(bundle['full_collections'])} full collections)"
        )
        if unpaused is not None:
            print(
                f"collector paused during page reads vs on: {bundle['seconds']:.1f} s vs "
                f"{unpaused['seconds']:.1f} s ({unpaused['seconds'] / bundle['seconds']:.2f}x "
                f"slower on), full collections {int(bundle['full_collections'])} vs "
                f"{int(unpaused['full_collections'])}, peak RSS {bundle['peak_mb']:.0f} MB vs "
                f"{unpaused['peak_mb']:.0f} MB"
            )
        if markdown is not None:
            print(
                f"the same bundle as Markdown: {markdown['seconds']:.1f} s "
                f"({markdown['seconds'] / bundle['seconds']:.2f}x the JSON bundle), "
                f"{markdown['bytes'] / 1e6:.0f} MB, peak RSS {markdown['peak_mb']:.0f} MB, "
                f"{int(markdown['progress_reports'])} progress reports"
            )
        print(
            f"raw Cypher dump, {int(raw['facts']):,} facts in one result: {raw['seconds']:.1f} s, "
            f"{raw['bytes'] / 1e6:.0f} MB of JSON lines, peak RSS {raw['peak_mb']:.0f} MB "
            f"({raw['before_mb']:.0f} MB before, grown {raw['peak_mb'] - raw['before_mb']:.0f} MB)"
        )
        print(
            f"bundle / raw dump: time {bundle['seconds'] / raw['seconds']:.1f}x, "
            f"peak RSS {bundle['peak_mb'] / raw['peak_mb']:.2f}x"
            + (
                f"; Markdown bundle / raw dump: time {markdown['seconds'] / raw['seconds']:.1f}x"
                if markdown is not None
                else ""
            )
        )
    finally:
        stop_server(settings)


if __name__ == "__main__":
    main()
