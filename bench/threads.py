"""Benchmark: the thread list and overview at scale, via our queries vs a pandas baseline.

Loads 100,000 threads and 1,000,000 usage snapshots into a throw-away PostgreSQL
database (COPY through psycopg), then times

- "threads at or above 0.85, highest first, page of 50" (`queries.list_threads`)
  and its count (`queries.count_threads`),
- the overview aggregates (`store.overview.overview_kpis` and `pressure_heatmap`),

against a baseline that loads every snapshot into pandas and filters there.
Prints both timings, the ratio (target >= 20x) and the EXPLAIN of the list
query, which must use an index. Speed lives here, never in a timed test.

    .venv/bin/python bench/threads.py [--threads 100000] [--snapshots-per-thread 10] [--keep]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import psycopg
import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.dbs import create_database, drop_database, psycopg_conninfo  # noqa: E402
from yuxi_dash.settings import Settings  # noqa: E402
from yuxi_dash.store import db, queries  # noqa: E402

ADMIN_URL = "postgresql+psycopg://127.0.0.1:5432/test"
AGENTS = (
    # slug, context window, summary threshold K, capabilities
    ("research", 128_000, 100, '["context_compression"]'),
    ("coder", 200_000, 150, '["context_compression"]'),
    ("faq", 32_000, 20, "[]"),
)
SUGGESTION = 0.85
PAGE = 50


def _psycopg_url(url: str) -> str:
    return psycopg_conninfo(url)


def _copy_frame(cur: psycopg.Cursor, table: str, frame: pd.DataFrame, chunk: int = 200_000) -> None:
    columns = ", ".join(frame.columns)
    with cur.copy(f"COPY {table} ({columns}) FROM STDIN WITH (FORMAT csv, NULL '')") as copy:
        for start in range(0, len(frame), chunk):
            buffer = io.StringIO()
            frame.iloc[start : start + chunk].to_csv(buffer, header=False, index=False)
            copy.write(buffer.getvalue())


def load(url: str, threads: int, per_thread: int, seed: int = 7) -> None:
    """Generate and COPY agents, conversations and usage snapshots (current usage = last one)."""
    rng = np.random.default_rng(seed)
    now = datetime.now(UTC)
    n_snap = threads * per_thread

    agent_idx = rng.integers(0, len(AGENTS), threads)
    windows = np.array([a[1] for a in AGENTS])[agent_idx]
    triggers = np.array([a[2] * 1024 for a in AGENTS])[agent_idx]
    # pressure of every snapshot: a sawtooth-ish random walk per thread, last one is "current"
    pressure = rng.beta(2.0, 4.0, size=n_snap) * 1.4
    next_tokens = np.round(pressure * np.repeat(triggers, per_thread)).astype(np.int64)
    llm_tokens = np.maximum(0, next_tokens - rng.integers(0, 800, n_snap))
    rep_windows = np.repeat(windows, per_thread)
    rep_triggers = np.repeat(triggers, per_thread)
    pressure_ratio = np.round(next_tokens / rep_triggers, 4)
    usage_ratio = np.minimum(1.0, np.round(llm_tokens / rep_windows, 4))
    offsets = np.sort(rng.uniform(0, 30 * 86400, size=(threads, per_thread)), axis=1)[:, ::-1]
    measured = pd.Timestamp(now) - pd.to_timedelta(offsets.ravel(), unit="s")
    source_pick = rng.random(n_snap)
    sources = np.where(
        source_pick < 0.08,
        "auto_compaction",
        np.where(source_pick < 0.10, "manual_compression", "model_call"),
    )
    active = sources != "model_call"
    thread_ids = np.array([f"thread-{i:06d}" for i in range(threads)])
    snapshots = pd.DataFrame(
        {
            "thread_id": np.repeat(thread_ids, per_thread),
            "measured_at": measured,
            "llm_input_tokens": llm_tokens,
            "next_llm_input_tokens": next_tokens,
            "context_window": rep_windows,
            "context_usage_ratio": usage_ratio,
            "summary_trigger_tokens": rep_triggers,
            "summary_pressure_ratio": pressure_ratio,
            "summary_active": active,
            "source": sources,
        }
    )
    last = snapshots.groupby("thread_id", sort=False).tail(1).set_index("thread_id")
    status_pick = rng.random(threads)
    status = np.where(
        status_pick < 0.01, "deleted", np.where(status_pick < 0.03, "archived", "active")
    )
    created = pd.Timestamp(now) - pd.Timedelta(days=31)
    conversations = pd.DataFrame(
        {
            "thread_id": thread_ids,
            "user_id": [f"user-{i % 5000:04d}" for i in range(threads)],
            "agent_slug": np.array([a[0] for a in AGENTS])[agent_idx],
            "title": "untitled",
            "status": status,
            "created_at": created,
            "updated_at": created,
            "deleted_at": None,
            "llm_input_tokens": last.loc[thread_ids, "llm_input_tokens"].to_numpy(),
            "next_llm_input_tokens": last.loc[thread_ids, "next_llm_input_tokens"].to_numpy(),
            "context_window": windows,
            "context_usage_ratio": last.loc[thread_ids, "context_usage_ratio"].to_numpy(),
            "summary_trigger_tokens": triggers,
            "summary_pressure_ratio": last.loc[thread_ids, "summary_pressure_ratio"].to_numpy(),
            "summary_active": last.loc[thread_ids, "summary_active"].to_numpy(),
            "usage_measured_at": last.loc[thread_ids, "measured_at"].to_numpy(),
            "last_compression_at": None,
            "last_activity_at": last.loc[thread_ids, "measured_at"].to_numpy(),
        }
    )
    with psycopg.connect(_psycopg_url(url)) as conn, conn.cursor() as cur:
        for slug, window, threshold, caps in AGENTS:
            cur.execute(
                "INSERT INTO agents (slug, name, capabilities, context_window, summary_threshold,"
                " summary_keep_messages, summary_tool_result_token_limit, created_at)"
                " VALUES (%s, %s, %s, %s, %s, 10, 300, now())",
                (slug, slug.title(), caps, window, threshold),
            )
        _copy_frame(cur, "conversations", conversations)
        _copy_frame(cur, "usage_snapshots", snapshots)
        conn.commit()
    with psycopg.connect(_psycopg_url(url), autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def timed(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    fn()  # warm-up
    samples = []
    result = None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), result


def run(url: str, repeats: int) -> None:
    from yuxi_dash.store import overview

    settings = Settings(database_url=url)
    engine = db.get_engine(settings)

    def ours_list() -> list[str]:
        with db.session_scope(settings) as session:
            rows = queries.list_threads(session, min_pressure=SUGGESTION, limit=PAGE)
            total = queries.count_threads(session, min_pressure=SUGGESTION)
            return [r.thread_id for r in rows] + [str(total)]

    def ours_overview() -> tuple[Any, int]:
        with db.session_scope(settings) as session:
            kpis = overview.overview_kpis(session)
            cells = overview.pressure_heatmap(session)
            return kpis.at_or_over_suggestion, len(cells)

    def load_frames() -> tuple[pd.DataFrame, pd.DataFrame]:
        with engine.connect() as conn:
            snaps = pd.read_sql(sa.text("SELECT * FROM usage_snapshots"), conn)
            convs = pd.read_sql(
                sa.text("SELECT thread_id, status, agent_slug FROM conversations"), conn
            )
        return snaps, convs

    def latest(snaps: pd.DataFrame, convs: pd.DataFrame) -> pd.DataFrame:
        snaps = snaps.sort_values(["thread_id", "measured_at", "id"])
        current = snaps.groupby("thread_id", sort=False).tail(1).merge(convs, on="thread_id")
        return current[current["status"] != "deleted"]

    def baseline_list() -> list[str]:
        current = latest(*load_frames())
        hot = current[current["summary_pressure_ratio"] >= SUGGESTION].sort_values(
            ["summary_pressure_ratio", "thread_id"], ascending=False
        )
        return list(hot["thread_id"].head(PAGE)) + [str(len(hot))]

    def baseline_overview() -> tuple[int, int]:
        snaps, convs = load_frames()
        current = latest(snaps, convs)
        at_or_over = int((current["summary_pressure_ratio"] >= SUGGESTION).sum())
        x = np.clip(np.floor(current["context_usage_ratio"] * 40 + 1e-9), 0, 39)
        y = np.clip(np.floor(current["summary_pressure_ratio"] / 0.05 + 1e-9), 0, 29)
        cells = pd.DataFrame({"x": x, "y": y}).value_counts()
        since = pd.Timestamp.now(tz="UTC") - pd.Timedelta(hours=24)
        recent = snaps[(snaps["measured_at"] >= since) & (snaps["source"] != "model_call")]
        _ = recent.merge(convs[convs["status"] != "deleted"], on="thread_id")[
            "source"
        ].value_counts()
        return at_or_over, len(cells)

    ours_list_s, ours_rows = timed(ours_list, repeats)
    base_list_s, base_rows = timed(baseline_list, max(1, repeats // 10))
    if ours_rows != base_rows:
        raise SystemExit("list results differ between our query and the pandas baseline")
    ours_over_s, ours_over = timed(ours_overview, max(1, repeats // 4))
    base_over_s, base_over = timed(baseline_overview, max(1, repeats // 10))
    if ours_over != base_over:
        raise SystemExit(f"overview differs: ours {ours_over} vs baseline {base_over}")

    print(f"threads >= {SUGGESTION} ({ours_rows[-1]} of them), page of {PAGE}, highest first:")
    print(f"  ours (list_threads + count_threads): {ours_list_s * 1000:9.2f} ms")
    print(f"  pandas baseline (load all + filter): {base_list_s * 1000:9.2f} ms")
    print(f"  ratio: {base_list_s / ours_list_s:,.0f}x (target >= 20x)")
    print("overview aggregates (KPIs incl. 24 h compressions, pressure heatmap):")
    print(f"  ours (overview_kpis + pressure_heatmap): {ours_over_s * 1000:9.2f} ms")
    print(f"  pandas baseline:                         {base_over_s * 1000:9.2f} ms")
    print(f"  ratio: {base_over_s / ours_over_s:,.0f}x (target >= 20x)")

    with engine.connect() as conn:
        page_query = (
            sa.select(queries.Conversation.thread_id)
            .where(
                queries.Conversation.summary_pressure_ratio >= SUGGESTION,
                queries.Conversation.status != "deleted",
            )
            .order_by(
                queries.Conversation.summary_pressure_ratio.desc(),
                queries.Conversation.thread_id.desc(),
            )
            .limit(PAGE)
        )
        compiled = page_query.compile(engine, compile_kwargs={"literal_binds": True})
        plan = conn.exec_driver_sql(f"EXPLAIN (ANALYZE, COSTS OFF) {compiled}").scalars().all()
    print("EXPLAIN of the page query:")
    for line in plan:
        print("  " + line)
    if not any("Index" in line and "ix_conversations_pressure" in line for line in plan):
        raise SystemExit("the page query does not use ix_conversations_pressure")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--admin-url", default=ADMIN_URL)
    parser.add_argument("--threads", type=int, default=100_000)
    parser.add_argument("--snapshots-per-thread", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--keep", action="store_true", help="keep the bench database")
    args = parser.parse_args()

    url = create_database(args.admin_url)
    try:
        start = time.perf_counter()
        db.upgrade(url)
        load(url, args.threads, args.snapshots_per_thread)
        total = args.threads * args.snapshots_per_thread
        print(
            f"loaded {args.threads:,} threads and {total:,} snapshots "
            f"in {time.perf_counter() - start:.1f} s"
        )
        run(url, args.repeats)
    finally:
        db.forget_engines()
        if args.keep:
            print(f"kept {url}")
        else:
            drop_database(args.admin_url, url)


if __name__ == "__main__":
    main()
