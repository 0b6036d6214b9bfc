"""Benchmark: the Compression quality page at 100,000 compression records in PostgreSQL.

Issue 39 item 4: the fleet page renders in <= 1 s at 100,000 records, because the database
counts (`store.compression_quality`), never Python. This seeds a throw-away database
(`bench.dbs`): our migrations, `--threads` conversations over `--agents` agents (our own and
an attached platform's), and `--records` compression records COPYed in one bulk insert,
spread over the last 30 days (all inside the page's default window: the worst case), each
with a summary and a ledger of realistic size. Then, side by side in one run:

- each aggregate query of the page (median of `--runs`),
- the page's loader, cache cleared (`ui.compressions.loaders.compression_quality`),
- the same figures computed in pandas from every record's columns (the baseline the page
  must not be): its time and the ratio to the loader, and a check that both agree,
- an AppTest render of the page (app.py, switched to it, every cache cleared before each
  run): cold, then the median of `--runs` reruns, with and without filters, against 1 s.

Wall and CPU time of this process are printed (the machine is shared). The database is
dropped at the end unless `--keep`.

    .venv/bin/python bench/compression_quality.py [--records 100000] [--runs 5] [--keep]
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import psycopg
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from streamlit.testing.v1 import AppTest  # noqa: E402

from bench.dbs import create_database, drop_database, psycopg_conninfo  # noqa: E402
from yuxi_dash.files.workdir import Workdir  # noqa: E402
from yuxi_dash.settings import get_settings  # noqa: E402
from yuxi_dash.store import compression_quality as quality  # noqa: E402
from yuxi_dash.store import db  # noqa: E402
from yuxi_dash.store.models import Conversation  # noqa: E402
from yuxi_dash.ui.compressions import loaders  # noqa: E402
from yuxi_dash.ui.loaders import clear_loaders  # noqa: E402

logging.getLogger("streamlit.runtime.caching.cache_data_api").setLevel(logging.ERROR)  # no runtime
ADMIN_URL = "postgresql+psycopg://127.0.0.1:5432/test"
APP = ROOT / "app.py"
PAGE = "app_pages/compression_quality.py"
TARGET_S = 1.0
DAYS = 30
SUMMARY = (
    "[Conversation summary] The earlier part of this conversation was summarized.\n\n"
    "## SESSION INTENT\n- Find the retention policy for the EU tenants.\n"
    "## USER REQUIREMENTS AND PREFERENCES\n- Cite the manual.\n"
    "## PROGRESS AND DECISIONS\n- Called query_kb x3\n"
    "## ARTIFACTS AND REFERENCES\n"
    + "".join(f"- Cited: chunk-{n}\n" for n in range(12))
    + "## NEXT STEPS\n- Draft the answer.\n"
)


def _ledger(rng: np.random.Generator) -> str:
    items = [
        {"kind": "kb_record", "value": f"chunk-{n}", "state": "recoverable", "cited": bool(n % 3),
         "named_by_user": False, "file": "outputs/large_tool_results/query_kb-0123.txt",
         "line": 1, "message_index": n, "source": f"docs/doc-{n}.pdf", "chunk_index": n,
         "title": None, "sha256": None}
        for n in range(int(rng.integers(2, 6)))
    ]  # fmt: skip
    return json.dumps({"items": items, "cutoff": 20, "summarized_messages": 20})


def seed(url: str, threads: int, agents: int, records: int, seed_value: int = 39) -> None:
    """Conversations by Core executemany (their defaults), records by one COPY."""
    rng = np.random.default_rng(seed_value)
    slugs = [f"agent-{n:02d}" for n in range(agents)]
    thread_agent = rng.integers(0, agents, threads)
    attached = rng.random(threads) < 0.4
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(
            sa.insert(Conversation),
            [
                {
                    "thread_id": f"thread-{i:06d}",
                    "user_id": f"user-{i % 2000:04d}",
                    "agent_slug": slugs[thread_agent[i]],
                    "origin": "attached" if attached[i] else "dashboard",
                }
                for i in range(threads)
            ],
        )
    engine.dispose()
    owner = rng.integers(0, threads, records)
    cited_total = rng.integers(0, 12, records)
    cited_visible = (cited_total * rng.beta(4, 2, records)).astype(int)
    cited_lost = ((cited_total - cited_visible) * rng.beta(1, 4, records)).astype(int)
    before = rng.integers(20_000, 200_000, records)
    now = datetime.now(UTC)
    at = pd.Timestamp(now) - pd.to_timedelta(rng.uniform(0, DAYS * 86400 - 600, records), unit="s")
    manual = rng.random(records) < 0.15
    ledgers = [_ledger(rng) for _ in range(500)]  # 500 shapes, reused
    frame = pd.DataFrame(
        {
            "thread_id": [f"thread-{i:06d}" for i in owner],
            "event_key": [f"{n:064x}" for n in range(records)],
            "at": at,
            "trigger": np.where(manual, "manual", "automatic"),
            "actor": np.where(manual, "ops@example.com", ""),
            "origin": np.where(attached[owner], "attached", "own"),
            "agent_slug": np.array(slugs)[thread_agent[owner]],
            "checkpoint_id": [f"cp-{n}" for n in range(records)],
            "before_tokens": before,
            "after_tokens": (before * rng.uniform(0.05, 0.3, records)).astype(int),
            "compressed_messages": rng.integers(10, 200, records),
            "summary": SUMMARY,
            "history_file": [f"outputs/conversation_history/session_thread-{i:06d}.md" for i in owner],
            "history_sha256": "",
            "ledger": [ledgers[n % len(ledgers)] for n in range(records)],
            "evidence_visible": cited_visible + rng.integers(0, 20, records),
            "evidence_recoverable": cited_total - cited_visible - cited_lost + rng.integers(0, 30, records),
            "evidence_lost": cited_lost + rng.integers(0, 3, records),
            "cited_total": cited_total,
            "cited_visible": cited_visible,
            "cited_lost": cited_lost,
        }
    )  # fmt: skip
    columns = ", ".join(frame.columns)
    with psycopg.connect(psycopg_conninfo(url), autocommit=True) as conn, conn.cursor() as cur:
        with cur.copy(
            f"COPY compressions ({columns}) FROM STDIN WITH (FORMAT csv, NULL '')"
        ) as copy:
            for start in range(0, records, 20_000):
                buffer = io.StringIO()
                frame.iloc[start : start + 20_000].to_csv(buffer, header=False, index=False)
                copy.write(buffer.getvalue())
        cur.execute("VACUUM ANALYZE")


def _isolate(url: str, root: Path) -> None:
    for name in list(os.environ):
        if name.startswith("YUXI_DASH_"):
            del os.environ[name]
    os.chdir(root)
    os.environ["YUXI_DASH_DATABASE_URL"] = url
    os.environ["YUXI_DASH_WORKDIR"] = str(root / "workdir")
    os.environ["YUXI_DASH_FALKORDB_DIR"] = str(root / "falkordb")
    os.environ["GRAPHITI_TELEMETRY_ENABLED"] = "false"
    Workdir(root / "workdir").initialize()
    get_settings.cache_clear()


def timed(runs: int, call: Callable[[], Any]) -> tuple[float, float, Any]:
    """(median wall s, median CPU s, the last result) of ``runs`` calls."""
    walls, cpus, result = [], [], None
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        result = call()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), result


def _since() -> datetime:
    return (datetime.now(UTC) - timedelta(days=30)).replace(second=0, microsecond=0)


def baseline(url: str, since: datetime) -> dict[str, Any]:
    """The page's figures from every record's columns, in pandas (what the page must not do)."""
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        rows = pd.read_sql(
            sa.text(
                "SELECT id, thread_id, at, agent_slug, trigger, actor, origin, before_tokens, "
                "after_tokens, cited_total, cited_visible, cited_lost, evidence_recoverable, "
                "evidence_lost FROM compressions WHERE at >= :since"
            ),
            conn,
            params={"since": since},
        )
    engine.dispose()
    rows["saved"] = rows["before_tokens"] - rows["after_tokens"]
    rows["hidden"] = rows["cited_total"] - rows["cited_visible"]
    days = rows.groupby([rows["at"].dt.tz_convert("UTC").dt.date, "trigger"]).agg(
        n=("id", "size"), saved=("saved", "sum")
    )
    agents = rows.groupby("agent_slug")[["cited_total", "cited_visible"]].sum()
    worst = (
        rows[rows["hidden"] > 0]
        .sort_values(["cited_lost", "hidden", "at", "id"], ascending=False)
        .head(quality.WORST_SHOWN)
    )
    return {
        "compressions": len(rows),
        "tokens_saved": int(rows["saved"].sum()),
        "cited_visible": int(rows["cited_visible"].sum()),
        "days": len(days),
        "agents": len(agents),
        "worst": worst["id"].tolist(),
    }


def render(runs: int, choices: dict[str, str]) -> tuple[float, float, float]:
    """(cold s, median rerun wall s, median rerun CPU s) of the page, caches cleared each run."""
    at = AppTest.from_file(str(APP), default_timeout=300)
    at.switch_page(PAGE)

    def once() -> None:
        clear_loaders()
        loaders.clear()
        at.run()
        if at.exception or not at.metric:
            raise SystemExit(f"the page did not draw its figures: {at.exception or at.info}")

    start = time.perf_counter()
    once()
    cold = time.perf_counter() - start
    for key, value in choices.items():  # each choice is a rerun of its own
        at.selectbox(key=key).set_value(value)
        once()
    wall, cpu, _ = timed(runs, once)
    return cold, wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--admin-url", default=ADMIN_URL)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--agents", type=int, default=40)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="do not drop the database")
    args = parser.parse_args()

    url = create_database(args.admin_url, "yuxi_bench_quality")
    try:
        start = time.perf_counter()
        db.upgrade(url)
        seed(url, args.threads, args.agents, args.records)
        print(
            f"seeded {sa.engine.make_url(url).database}: {args.records:,} records, "
            f"{args.threads:,} threads, {args.agents} agents in {time.perf_counter() - start:.1f} s"
        )
        with tempfile.TemporaryDirectory(prefix="bench-quality-") as tmp:
            _isolate(url, Path(tmp))
            try:
                measure(url, args.runs)
            finally:
                db.forget_engines()
    finally:
        if args.keep:
            print(f"kept: {url}")
        else:
            drop_database(args.admin_url, url)


def measure(url: str, runs: int) -> None:
    since = _since()
    where = quality.QualityFilter(since=since)
    settings = get_settings()
    print(f"\nqueries (median of {runs}, default window: last 30 days, every record in it):")
    with db.session_scope(settings) as session:
        for name, call in (
            ("totals", lambda: quality.totals(session, where)),
            ("per_day", lambda: quality.per_day(session, where)),
            ("per_agent", lambda: quality.per_agent(session, where)),
            ("worst", lambda: quality.worst(session, where)),
            ("agents (filter)", lambda: quality.agents(session)),
        ):
            wall, _cpu, _ = timed(runs, call)
            print(f"  {name:16s} {wall * 1000:8.1f} ms")

    def loader() -> dict[str, Any]:
        loaders.clear()
        loaders.quality_agents()
        return loaders.compression_quality(since=since)

    loader_wall, loader_cpu, figures = timed(runs, loader)
    base_wall, base_cpu, base = timed(max(1, runs // 2), lambda: baseline(url, since))
    totals = figures["totals"]
    same = (
        totals["compressions"] == base["compressions"]
        and totals["tokens_saved"] == base["tokens_saved"]
        and totals["cited_visible"] == base["cited_visible"]
        and len(figures["days"]) == base["days"]
        and figures["agents_total"] == base["agents"]
        and figures["worst"]["id"].tolist() == base["worst"]
    )
    print(
        f"\nloader, cache cleared: {loader_wall * 1000:.1f} ms (cpu {loader_cpu * 1000:.1f}) | "
        f"pandas over every record: {base_wall * 1000:.1f} ms (cpu {base_cpu * 1000:.1f}) | "
        f"ratio {base_wall / loader_wall:.1f}x | same figures: {'yes' if same else 'NO'}"
    )
    print(
        f"\nAppTest render of the page (every cache cleared before each run; target {TARGET_S} s):"
    )
    for label, choices in (
        ("no filter", {}),
        ("agent + automatic + attached", {"quality_agent": "agent-07", "quality_trigger": "automatic",
                                           "quality_origin": "attached platform"}),
        ("any time", {"quality_window": "any time"}),
    ):  # fmt: skip
        cold, wall, cpu = render(runs, choices)
        verdict = "ok" if wall <= TARGET_S else "OVER"
        print(
            f"  {label:30s} cold {cold:6.3f} s | rerun median {wall:6.3f} s (cpu {cpu:.3f}) "
            f"| {wall / TARGET_S:.2f} of target: {verdict}"
        )
    if not same:
        raise SystemExit("the loader and the pandas baseline disagree")


if __name__ == "__main__":
    main()
