"""Benchmark: the tuning lab's replay (`tuning.plan.run_tuning`) at 1,000 and 100,000 threads.

Seeds a throw-away PostgreSQL database the way the rest of bench/ does, but with threads our
engine really ran: `yuxi_dash.sim.run.simulate` plays template threads of three lengths
through a real agent graph with our middleware (checkpoints, usage snapshots, offloaded
files), then SQL clones them (conversation row, usage snapshots, the newest checkpoint with
its blobs and writes) under new thread ids, so every clone is a readable recorded thread.

1. 1,000 threads, two settings (in force and a proposal): wall time (target <= 60 s,
   progress on stderr) and threads per second, beside a plain loop that replays the same
   threads with one `compact_messages` call per turn (one setting, no summaries).
2. `--sample 200` of 100,000 threads: wall time (target <= 30 s).

    .venv/bin/python bench/tune.py [--threads 1000] [--fleet 100000] [--sample 200] [--keep]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.dbs import create_database, drop_database, psycopg_conninfo  # noqa: E402

ADMIN_URL = "postgresql+psycopg://127.0.0.1:5432/test"
AGENT = "tune-bench"
LENGTHS = ((4, 4), (4, 10), (4, 18))  # (template threads, turns each)


def seed_templates(settings: object) -> list[str]:
    """Template threads our engine really ran, of three lengths; their ids."""
    from yuxi_dash.service import upsert_agent
    from yuxi_dash.sim.run import simulate
    from yuxi_dash.store.db import session_scope

    with session_scope(settings) as session:  # type: ignore[arg-type]
        upsert_agent(
            session,
            AGENT,
            name="Tune bench",
            capabilities=["context_compression"],
            context_window=32_000,
            summary_threshold=8,
        )
    ids: list[str] = []
    for number, (threads, turns) in enumerate(LENGTHS):
        report = simulate(
            settings,  # type: ignore[arg-type]
            threads=threads,
            turns=turns,
            seed=number,
            agent_slug=AGENT,
            thread_prefix=f"tpl{number}",
        )
        ids.extend(thread.thread_id for thread in report.threads)
    return ids


def _columns(cur: psycopg.Cursor, table: str, skip: tuple[str, ...]) -> list[str]:
    cur.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
        "ORDER BY ordinal_position",
        (table,),
    )
    return [name for (name,) in cur.fetchall() if name not in skip]


def clone(url: str, templates: list[str], start: int, stop: int) -> None:
    """Clones ``start..stop-1`` of the templates (round robin), named ``clone-<n>``."""
    with psycopg.connect(psycopg_conninfo(url)) as conn, conn.cursor() as cur:
        cur.execute("CREATE TEMP TABLE tpl (k int, thread_id text)")
        cur.executemany("INSERT INTO tpl VALUES (%s, %s)", list(enumerate(templates)))
        cur.execute(
            "CREATE TEMP TABLE pairs AS SELECT 'clone-' || lpad(g::text, 6, '0') AS new_id, "
            "t.thread_id AS old_id FROM generate_series(%s::int, %s::int) g JOIN tpl t "
            "ON t.k = g %% %s",
            (start, stop - 1, len(templates)),
        )
        for table, alias in (("conversations", "c"), ("usage_snapshots", "s")):
            columns = _columns(cur, table, ("id", "thread_id"))
            order = sql.SQL(" ORDER BY p.new_id, s.id" if alias == "s" else "")
            cur.execute(
                sql.SQL(
                    "INSERT INTO {table} (thread_id, {names}) SELECT p.new_id, {values} "
                    "FROM pairs p JOIN {table} {alias} ON {alias}.thread_id = p.old_id"
                ).format(
                    table=sql.Identifier(table),
                    names=sql.SQL(", ").join(map(sql.Identifier, columns)),
                    values=sql.SQL(", ").join(sql.Identifier(alias, c) for c in columns),
                    alias=sql.Identifier(alias),
                )
                + order
            )
        cur.execute(
            "CREATE TEMP TABLE newest AS SELECT DISTINCT ON (thread_id) thread_id, "
            "checkpoint_id, checkpoint FROM checkpoints WHERE checkpoint_ns = '' "
            "AND thread_id IN (SELECT thread_id FROM tpl) ORDER BY thread_id, checkpoint_id DESC"
        )
        cur.execute(
            "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
            "parent_checkpoint_id, type, checkpoint, metadata) "
            "SELECT p.new_id, c.checkpoint_ns, c.checkpoint_id, NULL, c.type, c.checkpoint, "
            "c.metadata FROM pairs p JOIN newest n ON n.thread_id = p.old_id "
            "JOIN checkpoints c ON c.thread_id = n.thread_id AND c.checkpoint_id = n.checkpoint_id"
        )
        cur.execute(
            "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) "
            "SELECT p.new_id, b.checkpoint_ns, b.channel, b.version, b.type, b.blob "
            "FROM pairs p JOIN newest n ON n.thread_id = p.old_id "
            "JOIN LATERAL jsonb_each_text(n.checkpoint -> 'channel_versions') v ON true "
            "JOIN checkpoint_blobs b ON b.thread_id = n.thread_id AND b.channel = v.key "
            "AND b.version = v.value AND b.checkpoint_ns = ''"
        )
        writes = _columns(cur, "checkpoint_writes", ("thread_id",))
        cur.execute(
            sql.SQL(
                "INSERT INTO checkpoint_writes (thread_id, {names}) SELECT p.new_id, {values} "
                "FROM pairs p JOIN newest n ON n.thread_id = p.old_id JOIN checkpoint_writes w "
                "ON w.thread_id = n.thread_id AND w.checkpoint_id = n.checkpoint_id"
            ).format(
                names=sql.SQL(", ").join(map(sql.Identifier, writes)),
                values=sql.SQL(", ").join(sql.Identifier("w", c) for c in writes),
            )
        )
        conn.commit()
    with psycopg.connect(psycopg_conninfo(url), autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def reuse(url: str) -> list[str]:
    """The templates of a kept database, its clones removed."""
    with psycopg.connect(psycopg_conninfo(url)) as conn, conn.cursor() as cur:
        for table in ("checkpoint_writes", "checkpoint_blobs", "checkpoints", "usage_snapshots"):
            cur.execute(
                sql.SQL("DELETE FROM {} WHERE thread_id LIKE 'clone-%%'").format(
                    sql.Identifier(table)
                )
            )
        cur.execute("DELETE FROM conversations WHERE thread_id LIKE 'clone-%%'")
        cur.execute(
            "SELECT thread_id FROM conversations WHERE agent_slug = %s ORDER BY id", (AGENT,)
        )
        found = [thread_id for (thread_id,) in cur.fetchall()]
        conn.commit()
    return found


def _progress(label: str) -> object:
    marks = {"next": 0.0}

    def show(done: int, total: int) -> None:
        if done == total or time.monotonic() >= marks["next"]:
            print(f"  {label}: {done:,} of {total:,} threads", file=sys.stderr, flush=True)
            marks["next"] = time.monotonic() + 5

    return show


def spread_rows(settings: object, most: int) -> list[object]:
    """``most`` of the agent's threads spread over the fleet (every length)."""
    from yuxi_dash.store.db import session_scope
    from yuxi_dash.tuning.recorded import thread_rows

    with session_scope(settings) as session:  # type: ignore[arg-type]
        listed = thread_rows(session, AGENT)
    return list(listed[:: max(1, len(listed) // most)][:most])


def ours_on(settings: object, rows: list[object]) -> float:
    """Seconds for the tuning replay (two settings, one process) of exactly ``rows``."""
    from tests.service.builders import OPERATOR
    from yuxi_dash.tuning.plan import plan_tuning

    run = plan_tuning(AGENT, actor=OPERATOR, summary_threshold_k=6, keep_messages=6)
    run.planned = rows  # type: ignore[assignment]
    began = time.perf_counter()
    run.step()
    took = time.perf_counter() - began
    run.finish()  # completes the run's audit row
    return took


def plain_loop(settings: object, rows: list[object]) -> tuple[float, int]:
    """``rows``' threads, one `compact_messages` call per turn (one setting)."""
    from yuxi_dash.compression import compact_messages
    from yuxi_dash.files.workdir import Workdir
    from yuxi_dash.tuning.dry_workdir import DryWorkdir
    from yuxi_dash.tuning.recorded import RecordedThread, load_recorded
    from yuxi_dash.tuning.replay import model_call_indices

    start = time.perf_counter()
    count = 0
    for thread in load_recorded(rows, settings, Workdir(settings.workdir)):  # type: ignore[arg-type, attr-defined]
        if not isinstance(thread, RecordedThread):
            continue
        workdir = DryWorkdir()
        for index in model_call_indices(thread.messages):
            compact_messages(thread.messages[:index], workdir, tool_result_token_limit=300)
        count += 1
    return time.perf_counter() - start, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1_000)
    parser.add_argument("--fleet", type=int, default=100_000)
    parser.add_argument("--sample", type=int, default=200)
    parser.add_argument("--plain-threads", type=int, default=200, help="threads the loop replays")
    parser.add_argument("--keep", action="store_true", help="keep the database")
    parser.add_argument("--url", help="reuse the database a --keep run left (with --workdir)")
    parser.add_argument("--workdir", help="the workdir of that run")
    args = parser.parse_args()
    url = args.url or create_database(ADMIN_URL, prefix="yuxi_tune")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="yuxi-tune-"))
    os.environ["YUXI_DASH_DATABASE_URL"] = url
    os.environ["YUXI_DASH_WORKDIR"] = str(workdir)
    if args.keep or args.url:
        print(f"database {url}, workdir {workdir}")
    try:
        from tests.service.builders import OPERATOR
        from yuxi_dash.files.workdir import Workdir
        from yuxi_dash.settings import get_settings
        from yuxi_dash.store.db import upgrade
        from yuxi_dash.tuning.plan import run_tuning

        settings = get_settings()
        began = time.perf_counter()
        if args.url:  # a database a --keep run left: its templates, without the clones
            templates = reuse(url)
        else:
            upgrade(url)
            Workdir(workdir).initialize()
            templates = seed_templates(settings)
        print(
            f"templates: {len(templates)} threads our engine ran "
            f"({'reused, clones removed' if args.url else 'seeded'}) in "
            f"{time.perf_counter() - began:.1f} s"
        )
        began = time.perf_counter()
        clone(url, templates, 0, args.threads - len(templates))
        print(f"cloned to {args.threads:,} threads in {time.perf_counter() - began:.1f} s")

        timings: dict[int, float] = {}
        result = None
        for workers in (1, 2):
            began = time.perf_counter()
            result = run_tuning(
                AGENT,
                actor=OPERATOR,
                summary_threshold_k=6,
                keep_messages=6,
                settings=settings,
                on_progress=_progress(f"replay, {workers} process(es)"),  # type: ignore[arg-type]
                workers=workers,
            )
            timings[workers] = time.perf_counter() - began
        assert result is not None
        rows = spread_rows(settings, args.plain_threads)
        plain, plain_threads = plain_loop(settings, rows)
        same = ours_on(settings, rows)
        turns, threads = result.current.turns, result.current.threads
        print(f"\n1. {threads:,} threads ({turns:,} turns), two settings")
        for workers, took in timings.items():
            print(
                f"   tuning replay, {workers} process(es): {took:6.1f} s  "
                f"{threads / took:6.1f} threads/s (target <= 60 s)"
            )
        print(
            f"   on the same {plain_threads} threads spread over the fleet: tuning replay "
            f"{plain_threads / same:5.1f} threads/s (two settings, summaries, evidence), plain "
            f"loop {plain_threads / plain:5.1f} threads/s (one compact_messages call per turn, "
            f"one setting, no summaries): {plain / same:.2f}x"
        )
        print(
            f"   compressions in force {result.current.compressions:,} "
            f"({result.current.compressions_per_1000_turns:.0f} per 1,000 turns), "
            f"proposed {result.proposed.compressions:,} (summaries); offload-only passes "
            f"in force {result.current.offload_only_passes:,}, "
            f"proposed {result.proposed.offload_only_passes:,}"
        )

        began = time.perf_counter()
        clone(url, templates, args.threads - len(templates), args.fleet - len(templates))
        print(f"\ncloned to {args.fleet:,} threads in {time.perf_counter() - began:.1f} s")
        for workers in (1, 2):
            began = time.perf_counter()
            sampled = run_tuning(
                AGENT,
                actor=OPERATOR,
                summary_threshold_k=6,
                keep_messages=6,
                sample=args.sample,
                settings=settings,
                on_progress=_progress(f"sample, {workers} process(es)"),  # type: ignore[arg-type]
                workers=workers,
            )
            took = time.perf_counter() - began
            spread = sampled.proposed.fleet_estimate["compressions"]
            print(
                f"2. --sample {args.sample} of {sampled.threads_listed:,} threads, {workers} "
                f"process(es): {took:.1f} s (target <= 30 s); {sampled.current.threads} replayed"
            )
            print(
                f"   proposed compressions, fleet estimate: {spread.value:,.0f} "
                f"± {spread.plus_minus:,.0f} (approximate 95%)"
                f"{'; partial' if spread.partial else ''}"
            )
    finally:
        if not (args.keep or args.url):
            from yuxi_dash.resources import close_all

            close_all()
            drop_database(ADMIN_URL, url)


if __name__ == "__main__":
    main()
