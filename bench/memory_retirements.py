"""Retirements that look wrong at scale: one user's list and the matcher on the bench graph.

Run: `.venv/bin/python bench/memory_retirements.py [--scale 1.0] [--data-dir DIR]`.

Reuses bench/memory.py's builder (at scale 1: 50,000 entities, 200,000 facts,
5,000 episodes; 3 in 7 facts retired, created one a minute so the retirement
windows cover almost every fact: the matcher's worst case) on a private embedded
FalkorDB (or the graph already in `--data-dir`), a SQLite store and the
LaunchDarkly SDK's test data source. Times, median of 3 after a warm-up, side by
side in one run: the whole view (`open_view` + `retirements`, one page of 50),
the retired-fact read alone, the window read alone, and the matching in Python.
Prints the GRAPH.EXPLAIN of both statements. Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")

import sqlalchemy as sa  # noqa: E402
from falkordb import FalkorDB  # noqa: E402
from ldclient.integrations.test_data import TestData  # noqa: E402

from bench.memory import GROUP, seed_or_reuse  # noqa: E402
from yuxi_dash.access.roles import Actor, Role  # noqa: E402
from yuxi_dash.flags import FlagEvaluator  # noqa: E402
from yuxi_dash.memory.graph.client import GraphClient  # noqa: E402
from yuxi_dash.memory.graph.correction_rules import INVALIDATED_STATUSES  # noqa: E402
from yuxi_dash.memory.graph.server import ensure_server, stop_server  # noqa: E402
from yuxi_dash.memory.quality import retirement_queries as rq  # noqa: E402
from yuxi_dash.memory.quality import retirements  # noqa: E402
from yuxi_dash.memory.views import retiring_episode  # noqa: E402
from yuxi_dash.memory.views.gate import open_view  # noqa: E402
from yuxi_dash.memory.views.ratification import parse_time  # noqa: E402
from yuxi_dash.settings import Settings  # noqa: E402
from yuxi_dash.store.db import session_scope, upgrade  # noqa: E402
from yuxi_dash.store.models import AuditEntry, MemoryCorrection  # noqa: E402

USER = GROUP.removeprefix("user_")
VIEWER = Actor(id="bench@example.com", role=Role.VIEWER, via="cli")


def timed(call: Callable[[], Any], runs: int = 3) -> tuple[float, Any]:
    call()  # warm-up
    samples, result = [], None
    for _ in range(runs):
        started = time.perf_counter()
        result = call()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples), result


def _corrections_side_by_side(settings: Settings, facts: list[str]) -> None:
    """Our correction rows read whole (every snapshot) vs only each one's expired_at."""
    snapshot = {"expired_at": "2026-01-01T00:00:00+00:00", "fact_embedding": [0.1] * 1536}
    with session_scope(settings) as session:
        for n, fact in enumerate(facts):
            audit = AuditEntry(
                actor="bench", action="memory.retract", target=f"memory:{USER}", outcome="ok"
            )
            session.add(audit)
            session.flush()
            session.add(
                MemoryCorrection(
                    id=f"bench-{n}",
                    audit_id=audit.id,
                    actor="bench",
                    user_id=USER,
                    group_id=GROUP,
                    fact_uuid=fact,
                    action="retract",
                    before={fact: snapshot},
                    after={fact: snapshot},
                )
            )

    def whole() -> int:
        with session_scope(settings) as session:
            rows = session.execute(
                sa.select(MemoryCorrection.fact_uuid, MemoryCorrection.after).where(
                    MemoryCorrection.user_id == USER
                )
            ).all()
        return len(rows)

    whole_ms, _ = timed(whole)
    field_ms, ours = timed(lambda: retirements._corrections(settings, USER, facts))  # noqa: SLF001
    print(
        f"our {len(facts):,} correction rows (1,536-dim embedding in each snapshot): "
        f"whole rows {whole_ms:,.0f} ms vs expired_at only {field_ms:,.0f} ms "
        f"({len(ours):,} facts)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--data-dir", type=Path, help="FalkorDB data dir to keep (reused)")
    args = parser.parse_args()
    entities, facts, episodes = (int(n * args.scale) for n in (50_000, 200_000, 5_000))
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="yfdb-retire-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    store = Path(tempfile.mkdtemp(prefix="yretire-store-")) / "retire.db"
    settings = Settings(
        falkordb_data_dir=data_dir,
        falkordb_query_timeout_ms=120_000,
        database_url=f"sqlite:///{store}",
    )
    upgrade(settings.database_url)
    handle = ensure_server(settings)
    data = TestData.data_source()
    data.update(data.flag("graphiti-memory").variation_for_all(True))
    evaluator = FlagEvaluator.from_test_data(settings, data)
    try:
        client = GraphClient(FalkorDB(**handle.redis_kwargs()), settings, handle=handle)
        seed_or_reuse(client, GROUP, entities, facts, episodes)
        statuses = sorted(INVALIDATED_STATUSES)

        def view() -> dict[str, Any]:
            access = open_view(
                USER, "retirements", actor=VIEWER, settings=settings, evaluator=evaluator
            )
            return retirements.retirements(access, client=client, limit=50)

        view_ms, shown = timed(view)
        retired_ms, retired = timed(lambda: rq.retired_facts(client, GROUP, statuses))
        moments = [m for f in retired if (m := parse_time(f.get("expired_at"))) is not None]
        # the bench times the matcher's parts
        near_ms, near = timed(lambda: retiring_episode._episodes_near(client, GROUP, moments))  # noqa: SLF001
        uuids = [str(ep["uuid"]) for ep in near]
        facts_ms, by_episode = timed(lambda: retiring_episode._facts_of(client, GROUP, uuids))  # noqa: SLF001
        classify_ms, rows = timed(
            lambda: retirements.classify(client, GROUP, settings, USER), runs=1
        )
        print(f"\n{entities:,} entities / {facts:,} facts / {episodes:,} episodes")
        print(
            f"retired facts: {shown['retired']:,}; suspicious {shown['counts']['suspicious']:,}; "
            f"episodes near the expiries {len(near):,}; "
            f"facts listing them {sum(len(v) for v in by_episode.values()):,}"
        )
        print(f"whole view (gate, audit, classify, one page of 50): {view_ms:,.0f} ms")
        print(f"  retired-fact read: {retired_ms:,.0f} ms ({len(retired):,} rows)")
        print(f"  episodes near the expiries: {near_ms:,.0f} ms")
        print(f"  facts listing those episodes: {facts_ms:,.0f} ms")
        rest_ms = classify_ms - retired_ms - near_ms - facts_ms
        print(f"  classify (all reads + matching): {classify_ms:,.0f} ms; rest ~{rest_ms:,.0f} ms")
        print(f"  rows classified: {len(rows):,}")
        _corrections_side_by_side(settings, [str(f["uuid"]) for f in retired][:2000])
        params = {"statuses": statuses, "lo": 0, "hi": rq.SLICE, "episodes": 20}
        print("\nplan, retired facts:\n" + client.explain(GROUP, rq.RETIRED_FACTS, params))
        params = {
            "windows": retiring_episode.windows(moments[:200]),
            "wanted": uuids[:200],
            **params,
        }
        print(
            "plan, episodes near:\n"
            + client.explain(GROUP, retiring_episode.EPISODES_IN_WINDOWS, params)
        )
        print(
            "plan, their facts:\n"
            + client.explain(GROUP, retiring_episode.FACTS_OF_EPISODES, params)
        )
        client.close()
    finally:
        evaluator.close()
        if args.data_dir is None:
            stop_server(settings)


if __name__ == "__main__":
    main()
