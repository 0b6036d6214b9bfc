"""Assistant-only facts at scale: one user's share on the bench graph.

Run: `.venv/bin/python bench/memory_assistant_only.py [--scale 1.0] [--data-dir DIR]`.

Reuses bench/memory.py's builder (at scale 1: 50,000 entities, 200,000 facts, 5,000
episodes; source kinds user_asserted, assistant_derived and tool_observed in turn) on a
private embedded FalkorDB (or the graph already in `--data-dir`), a SQLite store and the
LaunchDarkly SDK's test data source. Times, median of 3 after a warm-up, side by side in
one run: the share (`open_view` + `assistant_only_share`: grouped reads) beside the list
(`assistant_only_facts`: one row per candidate fact), and the parts: live facts per source
kind, the candidate groups, the candidates, the episodes' openings. Prints the
GRAPH.EXPLAIN of the statements. Prints; asserts nothing.
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

from falkordb import FalkorDB  # noqa: E402
from ldclient.integrations.test_data import TestData  # noqa: E402

from bench.memory import GROUP, seed_or_reuse  # noqa: E402
from yuxi_dash.access.roles import Actor, Role  # noqa: E402
from yuxi_dash.flags import FlagEvaluator  # noqa: E402
from yuxi_dash.memory.graph.client import GraphClient  # noqa: E402
from yuxi_dash.memory.graph.server import ensure_server, stop_server  # noqa: E402
from yuxi_dash.memory.quality import assistant_only as ao  # noqa: E402
from yuxi_dash.memory.quality import assistant_only_queries as aoq  # noqa: E402
from yuxi_dash.memory.views.gate import open_view  # noqa: E402
from yuxi_dash.settings import Settings  # noqa: E402
from yuxi_dash.store.db import upgrade  # noqa: E402

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--data-dir", type=Path, help="FalkorDB data dir to keep (reused)")
    args = parser.parse_args()
    entities, facts, episodes = (int(n * args.scale) for n in (50_000, 200_000, 5_000))
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="yfdb-words-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    store = Path(tempfile.mkdtemp(prefix="ywords-store-")) / "words.db"
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

        def share() -> dict[str, Any]:
            access = open_view(USER, ao.VIEW, actor=VIEWER, settings=settings, evaluator=evaluator)
            return ao.assistant_only_share(access, client=client)

        def listed() -> dict[str, Any]:
            access = open_view(USER, ao.VIEW, actor=VIEWER, settings=settings, evaluator=evaluator)
            return ao.assistant_only_facts(access, client=client)

        share_ms, counts = timed(share)
        list_ms, _shown = timed(listed)
        kinds_ms, kinds = timed(lambda: aoq.live_by_source_kind(client, GROUP))
        groups_ms, groups = timed(lambda: aoq.candidate_groups(client, GROUP))
        candidates_ms, rows = timed(lambda: aoq.candidates(client, GROUP))
        wanted = sorted({str(e) for r in rows for e in (r.get("episodes") or [])})
        openings_ms, openings = timed(lambda: aoq.episode_openings(client, GROUP, wanted))
        print(f"\n{entities:,} entities / {facts:,} facts / {episodes:,} episodes")
        print(f"live facts per source kind: {kinds}")
        print(
            f"share {counts['assistant_only_share']}; by basis {counts['assistant_only_by_basis']}"
        )
        print(f"share (gate, audit, grouped reads, rule): {share_ms:,.0f} ms")
        print(f"list (gate, audit, one row per fact, rule): {list_ms:,.0f} ms")
        print(f"list / share: {list_ms / share_ms:.1f}x")
        print(f"  live per source kind: {kinds_ms:,.0f} ms")
        print(f"  candidate groups: {groups_ms:,.0f} ms ({len(groups):,} rows)")
        print(f"  candidates: {candidates_ms:,.0f} ms ({len(rows):,} rows)")
        print(f"  episode openings: {openings_ms:,.0f} ms ({len(openings):,} episodes)")
        live = sorted(["active", "tentative", ""])
        print("\nplan, live per source kind:")
        print(client.explain(GROUP, aoq.LIVE_BY_SOURCE_KIND, {"live_statuses": live}))
        params = {"live_statuses": live, "set_aside": list(aoq.SET_ASIDE_KINDS)}
        print("plan, groups:\n" + client.explain(GROUP, aoq.CANDIDATE_GROUPS, params))
        params = {**params, "fact_chars": aoq.FACT_CHARS}
        print("plan, candidates:\n" + client.explain(GROUP, aoq.CANDIDATES, params))
        params = {"uuids": wanted[:1000], "head": aoq.HEAD_CHARS, "tail": aoq.TAIL_CHARS}
        print("plan, episode openings:\n" + client.explain(GROUP, aoq.EPISODE_OPENINGS, params))
        client.close()
    finally:
        evaluator.close()
        if args.data_dir is None:
            stop_server(settings)


if __name__ == "__main__":
    main()
