"""Benchmark: what the model-call families add to a `/metrics` scrape on a large usage table.

Loads threads and usage snapshots (default 100,000 × 20 = 2,000,000 rows, COPY through
psycopg, the generator of `bench/threads.py`) into a throw-away PostgreSQL database with a
prices file, then times in one run, side by side:

- the scrape without the model-call families (`api.metrics.DATABASE_PARTS` less
  `_model_calls`), the scrape the dashboard had before them;
- the whole scrape (`DatabaseCollector` as served);
- the model-call families alone (`costs.spend.spend_per_agent_label`, priced);
- with ``--index``: the same after a covering index for the aggregate, and its EXPLAIN.

The aggregate reads every recorded call, so it grows with history: the figures say by how
much at this size. Speed lives here, never in a timed test.

    .venv/bin/python bench/costs.py [--threads 100000] [--snapshots-per-thread 20] [--index]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.dbs import create_database, drop_database  # noqa: E402
from bench.threads import ADMIN_URL, AGENTS, load  # noqa: E402
from yuxi_dash.api.metrics import DATABASE_PARTS, DatabaseCollector, _model_calls  # noqa: E402
from yuxi_dash.costs.prices import load_prices  # noqa: E402
from yuxi_dash.costs.spend import _calls_query, spend_per_agent_label  # noqa: E402
from yuxi_dash.settings import Settings  # noqa: E402
from yuxi_dash.store import db  # noqa: E402
from yuxi_dash.store.labels import top_agents  # noqa: E402
from yuxi_dash.store.models import Conversation  # noqa: E402

# the index a scrape's aggregate could read instead of the table (index-only scan)
COVERING_INDEX = (
    "CREATE INDEX ix_usage_snapshots_model_calls ON usage_snapshots (source) "
    "INCLUDE (thread_id, llm_input_tokens, next_llm_input_tokens)"
)


def timed(fn: Callable[[], Any], repeats: int) -> float:
    """The median seconds of ``repeats`` calls after one warm-up."""
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def scrapes(settings: Settings, repeats: int) -> dict[str, float]:
    """Median seconds of the scrape without and with the model-call families, and of them alone."""
    without = tuple(part for part in DATABASE_PARTS if part is not _model_calls)
    prices = load_prices(settings)

    def scrape(parts: tuple[Any, ...]) -> Callable[[], int]:
        return lambda: len(list(DatabaseCollector(settings, parts).collect()))

    def alone() -> int:
        with db.session_scope(settings) as session:
            top = top_agents(session, settings.label_agents_max)
            return len(spend_per_agent_label(session, prices, top=top))

    return {
        "scrape without model-call families": timed(scrape(without), repeats),
        "scrape with them (as served)": timed(scrape(DATABASE_PARTS), repeats),
        "model-call families alone": timed(alone, repeats),
    }


def explain(settings: Settings) -> list[str]:
    """EXPLAIN (ANALYZE) of the model-call aggregate, as the scrape runs it."""
    with db.session_scope(settings) as session:
        query = _aggregate_sql(session)
        return [row[0] for row in session.execute(sa.text(f"EXPLAIN (ANALYZE, BUFFERS) {query}"))]


def _aggregate_sql(session: Any) -> str:
    compiled = _calls_query([], Conversation.agent_slug).compile(
        session.get_bind(), compile_kwargs={"literal_binds": True}
    )
    return str(compiled)


def report(title: str, figures: dict[str, float]) -> None:
    base = figures["scrape without model-call families"]
    print(title)
    for name, seconds in figures.items():
        print(f"  {name:<40} {seconds * 1000:9.1f} ms   {seconds / base:5.2f}× the old scrape")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--admin-url", default=ADMIN_URL)
    parser.add_argument("--threads", type=int, default=100_000)
    parser.add_argument("--snapshots-per-thread", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--index", action="store_true", help="also time with a covering index")
    args = parser.parse_args()

    url = create_database(args.admin_url, prefix="yuxi_bench_costs")
    with tempfile.TemporaryDirectory() as folder:
        prices_file = Path(folder) / "prices.json"
        prices = {slug: {"input_per_million": 3, "output_per_million": 15} for slug, *_ in AGENTS}
        prices_file.write_text(json.dumps(prices), encoding="utf-8")
        settings = Settings(database_url=url, model_prices=str(prices_file))
        try:
            start = time.perf_counter()
            db.upgrade(url)
            load(url, args.threads, args.snapshots_per_thread)
            rows = args.threads * args.snapshots_per_thread
            print(f"loaded {args.threads:,} threads, {rows:,} snapshots in "
                  f"{time.perf_counter() - start:.1f} s")  # fmt: skip
            report(
                f"{rows:,} usage rows, median of {args.repeats}:", scrapes(settings, args.repeats)
            )
            for line in explain(settings):
                print("  " + line)
            if args.index:
                engine = db.get_engine(settings)
                with engine.connect() as conn:
                    conn.execute(sa.text(COVERING_INDEX))
                    conn.commit()
                with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                    conn.execute(sa.text("VACUUM ANALYZE usage_snapshots"))
                report("with the covering index:", scrapes(settings, args.repeats))
                for line in explain(settings):
                    print("  " + line)
        finally:
            db.forget_engines()
            drop_database(args.admin_url, url)


if __name__ == "__main__":
    main()
