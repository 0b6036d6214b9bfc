"""The memory desk at scale: one fact's provenance and a retract + audit on the 200,000-fact graph.

Run: `.venv/bin/python bench/memory_desk.py [--scale 1.0] [--data-dir DIR]`.

Reuses bench/memory.py's builder (50,000 entities, 200,000 facts, 5,000
episodes; the hub, internal node 0, has 2,000 outgoing facts) on a private
embedded FalkorDB (or the graph already in `--data-dir`), a SQLite store with
a chat record for the user, and the LaunchDarkly SDK's test data source. Times,
median of 5 after a warm-up, side by side in one run:

- provenance of a live hub fact and of an invalidated hub fact (the look
  through `open_view`, its audit row, the fact, episodes, the chat match, the
  Redis hits, and for the invalidated one its successor and batch), against
  graphiti-core's own `EntityEdge.get_by_uuid` of the same fact;
- retract + audit (checks, the edge read with graphiti-core's columns and
  parser and saved with its `save`, the audit and correction rows in one
  transaction, the hit counter) and its undo, against a bare graphiti-core
  `get_by_uuid` + `load_fact_embedding` + `save` (whose labeled MATCH scans
  every Entity: why `memory.graph.fact_writer` reads by an index-served MATCH).

Targets: provenance < 50 ms, retract + audit < 100 ms. Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")

from falkordb import FalkorDB  # noqa: E402
from falkordb.asyncio import FalkorDB as AsyncFalkorDB  # noqa: E402
from graphiti_core.driver.falkordb_driver import FalkorDriver  # noqa: E402
from graphiti_core.edges import EntityEdge  # noqa: E402
from ldclient.integrations.test_data import TestData  # noqa: E402

from bench.memory import GROUP, STATUSES, seed_or_reuse  # noqa: E402
from yuxi_dash.access.roles import Actor, Role  # noqa: E402
from yuxi_dash.flags import FlagEvaluator  # noqa: E402
from yuxi_dash.memory.graph.client import GraphClient  # noqa: E402
from yuxi_dash.memory.graph.server import ensure_server, stop_server  # noqa: E402
from yuxi_dash.memory.support import corrections  # noqa: E402
from yuxi_dash.memory.views.gate import open_view  # noqa: E402
from yuxi_dash.memory.views.provenance import fact_provenance  # noqa: E402
from yuxi_dash.settings import Settings  # noqa: E402
from yuxi_dash.store.db import session_scope  # noqa: E402
from yuxi_dash.store.models import ChatMessage, Conversation  # noqa: E402

USER = GROUP.removeprefix("user_")
OPERATOR = Actor(id="bench@example.com", role=Role.OPERATOR, via="cli")
REASON = "bench run: the user disputes this fact"
TARGETS_MS = {"provenance": 50.0, "retract": 100.0}


def timed(call: Callable[[], Any], runs: int = 5) -> float:
    call()
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def seed_chat(settings: Settings, messages: int = 2000) -> None:
    start = datetime(2026, 5, 1, tzinfo=UTC)
    with session_scope(settings) as session:
        session.add(Conversation(thread_id="bench-t1", user_id=USER, agent_slug="bench"))
        session.flush()
        for i in range(messages):
            session.add(
                ChatMessage(
                    thread_id="bench-t1",
                    sequence=i,
                    role="user" if i % 2 == 0 else "assistant",
                    content=f"message {i} about entity {i % 500} and what the user said",
                    created_at=start + timedelta(minutes=i),
                )
            )


def graphiti_edge_ops(handle: Any, uuid: str, *, save: bool) -> Callable[[], Any]:
    """graphiti-core alone: get_by_uuid (+ load_fact_embedding + save) on a fresh driver."""

    def call() -> None:
        db = AsyncFalkorDB(**handle.redis_kwargs())
        driver = FalkorDriver(falkor_db=db, database=GROUP)  # outside a loop: no index build

        async def go() -> None:
            try:
                edge = await EntityEdge.get_by_uuid(driver, uuid)
                if save:
                    await edge.load_fact_embedding(driver)
                    await edge.save(driver)
            finally:
                await db.aclose()

        asyncio.run(go())

    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--data-dir", type=Path, help="FalkorDB data dir to keep (reused)")
    args = parser.parse_args()
    entities, facts, episodes = (int(n * args.scale) for n in (50_000, 200_000, 5_000))
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="yfdb-desk-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    store = Path(tempfile.mkdtemp(prefix="ydesk-store-")) / "desk.db"
    settings = Settings(
        falkordb_data_dir=data_dir,
        falkordb_query_timeout_ms=60_000,
        database_url=f"sqlite:///{store}",
    )
    os.environ["YUXI_DASH_FALKORDB_DIR"] = str(data_dir)
    os.environ["YUXI_DASH_DATABASE_URL"] = settings.database_url
    handle = ensure_server(settings)
    data = TestData.data_source()
    data.update(data.flag("graphiti-memory").variation_for_all(True))
    evaluator = FlagEvaluator.from_test_data(settings, data)
    try:
        client = GraphClient(FalkorDB(**handle.redis_kwargs()), settings, handle=handle)
        seed_or_reuse(client, GROUP, entities, facts, episodes)
        seed_chat(settings)
        live = "e0"  # a hub fact (source: internal node 0), status active
        dead = next(f"e{i}" for i in range(50) if STATUSES[i % len(STATUSES)] == "superseded")

        def look(uuid: str) -> Callable[[], Any]:
            def call() -> Any:
                access = open_view(
                    USER, "provenance", actor=OPERATOR, settings=settings, evaluator=evaluator
                )
                return fact_provenance(access, uuid, client=client)

            return call

        prov_live = timed(look(live))
        prov_dead = timed(look(dead))
        bare_get = timed(graphiti_edge_ops(handle, live, save=False))
        print(f"\n{entities:,} entities / {facts:,} facts / {episodes:,} episodes")
        print(
            f"provenance, live hub fact {live}: {prov_live:.1f} ms "
            f"(target < {TARGETS_MS['provenance']:.0f} ms)"
        )
        print(f"provenance, invalidated hub fact {dead}: {prov_dead:.1f} ms")
        print(
            f"graphiti-core get_by_uuid alone: {bare_get:.1f} ms "
            f"(get_by_uuid / provenance: {bare_get / prov_live:.1f}x)"
        )

        active = [f"e{i}" for i in range(0, 2000) if STATUSES[i % len(STATUSES)] == "active"]
        pending = iter(active[:12])
        audits: list[int] = []

        def retract() -> None:
            result = corrections.retract(
                USER,
                next(pending),
                actor=OPERATOR,
                reason=REASON,
                settings=settings,
                evaluator=evaluator,
                client=client,
            )
            audits.append(result["audit_id"])

        retract_ms = timed(retract)
        pending_undo = iter(list(audits))

        def undo() -> None:
            corrections.undo_correction(
                next(pending_undo),
                actor=OPERATOR,
                settings=settings,
                evaluator=evaluator,
                client=client,
            )

        undo_ms = timed(undo)
        bare_save = timed(graphiti_edge_ops(handle, active[20], save=True))
        print(
            f"retract + audit (hub fact): {retract_ms:.1f} ms "
            f"(target < {TARGETS_MS['retract']:.0f} ms)"
        )
        print(f"undo + audit: {undo_ms:.1f} ms")
        print(
            f"graphiti-core get_by_uuid + load_fact_embedding + save alone: {bare_save:.1f} ms "
            f"(bare save / retract + audit: {bare_save / retract_ms:.1f}x)"
        )
        over = [
            k
            for k, ms in (("provenance", prov_live), ("retract", retract_ms))
            if ms > TARGETS_MS[k]
        ]
        print(f"over target: {over or 'none'}")
        client.close()
    finally:
        evaluator.close()
        stop_server(settings)


if __name__ == "__main__":
    main()
