"""Memory views at scale: one user graph with 50,000 entities, 200,000 facts, 5,000 episodes.

Run: `.venv/bin/python bench/memory.py [--scale 1.0] [--data-dir DIR] [--skip-baseline]
[--skip-restart] [--only-distributions] [--only-history] [--alternatives] [--shared-redis URL]`.

Seeds the graph in graphiti-core's true schema (its classes, its indexes, its
UNWIND statements, batched) on a private embedded FalkorDB (or reuses it when
`--data-dir` already holds it: seeding takes minutes), then times every view's
query (median of 5 runs, after one warm-up), prints each plan (GRAPH.EXPLAIN),
times the distributions the old way (one statement after another, every view)
beside the new plan (`memory.cache.distributions`: cold, nothing kept anywhere =
the first view after a write; shared, a new process served from the shared
Redis store; warm, kept in this process under the graph's version, the change
watcher live) with ratios; then the view after a write to another graph on the
same server (`memory.cache.graph_changes`: with the watcher live the graph's own
version keeps the parts warm, with it closed the graph's own mark does too;
the two alternated, ms, closed/live ratio and parts served kept)
and the watcher's `version` cost; optionally (`--alternatives`) the cheaper
groupings that lost, each in turns with the kept statement; restarts the server from its RDB and checks index drift (the relationship index drifts after a restart),
and compares with graphiti-core's full load (`get_by_group_ids`) on a 10%
sample graph; memory as of a moment and the two-moment diff (`memory.history`, cold and
warm, with their plans, and the bundle's stream of every fact held then; `--only-history`
runs just those; the correction time line's own cost: bench/memory_history.py). Every memory page rendered on this graph: bench/memory_pages.py; each
with and without the caches: bench/memory_machinery.py.
Targets: counts < 5 ms, pages and hub facts < 50 ms, each distribution < 300 ms
cold and < 20 ms warm (a page's several parts together: < 1.5 s cold, the
memory page target), dashboard process < 500 MB. Prints numbers and ratios;
asserts nothing (speed is not a test).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")

import redis  # noqa: E402
from falkordb import FalkorDB  # noqa: E402
from graphiti_core.edges import CommunityEdge, EntityEdge, EpisodicEdge  # noqa: E402
from graphiti_core.nodes import CommunityNode, EntityNode, EpisodeType, EpisodicNode  # noqa: E402

from yuxi_dash.demo.graph_writer import create_indexes, deterministic_embedding, write_graph  # noqa: E402
from yuxi_dash.memory.cache import distributions, graph_changes
from yuxi_dash.memory.graph import queries as q  # noqa: E402
from yuxi_dash.memory.graph import server as graph_server  # noqa: E402
from yuxi_dash.memory.graph.client import GraphClient  # noqa: E402
from yuxi_dash.memory.graph.index_health import (  # noqa: E402
    check_index_health,
    rebuild_relationship_indexes,
)
from yuxi_dash.memory.graph.server import ensure_server, stop_server  # noqa: E402
from yuxi_dash.memory.history import as_of as history_as_of  # noqa: E402
from yuxi_dash.memory.history import diff as history_diff  # noqa: E402
from yuxi_dash.memory.history import queries as hq  # noqa: E402
from yuxi_dash.memory.history.timeline import Correction, Timeline, moment_text  # noqa: E402
from yuxi_dash.settings import Settings  # noqa: E402

GROUP = "user_bench_hub"
SAMPLE = "user_bench_sample"
OTHER = "user_bench_other"  # written between views to time a write to another graph
STATUSES = ("active", "active", "active", "tentative", "superseded", "contradicted", "retracted")
KINDS = ("user_asserted", "assistant_derived", "tool_observed")
LABELS = ("Person", "Organization", "Project", "Concept", "Preference", "Rule")
NAMES = tuple(f"REL_{i:02d}" for i in range(40))
HUB_EDGES = 2000
# "page": one page of rows; "memory page": a whole memory page (bench/memory_pages.py)
TARGETS_MS = {"count": 5.0, "page": 50.0, "distribution": 300.0, "memory page": 1500.0}


def rss_mb(pid: int | str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def hwm_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def build(group: str, entities: int, facts: int, episodes: int) -> dict[str, list[Any]]:
    """graphiti-core objects (model_construct: validated shape, no per-object validation cost)."""
    now = datetime(2026, 6, 1, tzinfo=UTC)
    emb = deterministic_embedding("bench")
    nodes = [
        EntityNode.model_construct(
            uuid=f"n{i}",
            name=f"entity {i}",
            group_id=group,
            labels=[LABELS[i % len(LABELS)]],
            created_at=now - timedelta(minutes=i),
            name_embedding=emb,
            summary=f"summary of entity {i}",
            attributes={},
        )
        for i in range(entities)
    ]
    edges = []
    for i in range(facts):
        # The first node (internal id 0) is the hub: HUB_EDGES outgoing facts.
        source = 0 if i < HUB_EDGES else (i * 7919) % entities
        target = (i * 104729 + 1) % entities or 1
        status = STATUSES[i % len(STATUSES)]
        created = now - timedelta(minutes=i % 90000)
        expired = created + timedelta(days=3) if status in ("superseded", "contradicted") else None
        edges.append(
            EntityEdge.model_construct(
                uuid=f"e{i}",
                source_node_uuid=f"n{source}",
                target_node_uuid=f"n{target}",
                name=NAMES[i % len(NAMES)],
                fact=f"fact {i} about entity {source} and entity {target}",
                group_id=group,
                episodes=[f"ep{i % episodes}"],
                created_at=created,
                valid_at=created,
                invalid_at=expired,
                expired_at=expired,
                reference_time=None,
                fact_embedding=emb,
                attributes={
                    "status": status,
                    "source_kind": KINDS[i % len(KINDS)],
                    "confidence": 0.8,
                    "scope": "user",
                    "provenance": f"ep{i % episodes}",
                },
            )
        )
    eps = [
        EpisodicNode.model_construct(
            uuid=f"ep{i}",
            name=f"episode {i}",
            group_id=group,
            labels=[],
            source=EpisodeType.json,
            source_description="bench",
            content='{"memory_kind": "fact", "source_kind": "user_asserted", "content": "x"}',
            created_at=now - timedelta(minutes=i),
            valid_at=now - timedelta(minutes=i),
            entity_edges=[],
            episode_metadata=None,
        )
        for i in range(episodes)
    ]
    mentions = [
        EpisodicEdge.model_construct(
            uuid=f"m{i}",
            source_node_uuid=f"ep{i % episodes}",
            target_node_uuid=f"n{(i * 31) % entities}",
            group_id=group,
            created_at=now,
        )
        for i in range(episodes * 3)
    ]
    communities = [
        CommunityNode.model_construct(
            uuid=f"c{i}",
            name=f"community {i}",
            group_id=group,
            labels=[],
            summary=f"community {i}",
            created_at=now - timedelta(days=1),
            name_embedding=emb,
        )
        for i in range(max(1, entities // 1000))
    ]
    members = [
        CommunityEdge.model_construct(
            uuid=f"hm{c}-{j}",
            source_node_uuid=f"c{c}",
            target_node_uuid=f"n{(c * 20 + j) % entities}",
            group_id=group,
            created_at=now - timedelta(days=1),
        )
        for c in range(len(communities))
        for j in range(20)
    ]
    return {
        "entities": nodes,
        "facts": edges,
        "episodes": eps,
        "mentions": mentions,
        "communities": communities,
        "members": members,
    }


def seed(client: GraphClient, group: str, entities: int, facts: int, episodes: int) -> float:
    client.delete_graph(group)
    started = time.perf_counter()
    records = build(group, entities, facts, episodes)
    built = time.perf_counter()
    create_indexes(client, group)
    write_graph(client, group, batch_size=5000, timeout_ms=0, **records)
    done = time.perf_counter()
    print(
        f"seeded {group}: {entities:,} entities, {facts:,} facts, {episodes:,} episodes "
        f"(build {built - started:.1f} s, write {done - built:.1f} s)"
    )
    return done - started


def seed_or_reuse(
    client: GraphClient, group: str, entities: int, facts: int, episodes: int
) -> None:
    """Seed the graph unless the server already holds it at this size (a kept --data-dir)."""
    if client.graph_exists(group):
        have = (
            q.counts_one(client, group, q.COUNT_ENTITIES),
            q.counts_one(client, group, q.COUNT_RELATES_TO),
            q.counts_one(client, group, q.COUNT_EPISODES),
        )
        if have == (entities, facts, episodes):
            print(f"reusing {group}: {entities:,} entities, {facts:,} facts, {episodes:,} episodes")
            return
    seed(client, group, entities, facts, episodes)
    client.db.connection.execute_command("SAVE")


def timed(call: Any, runs: int = 5) -> tuple[float, Any]:
    call()  # warm-up (plan cache)
    samples = []
    result = None
    for _ in range(runs):
        started = time.perf_counter()
        result = call()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples), result


def timed_in_turns(*calls: Any, runs: int = 5) -> tuple[tuple[float, Any], ...]:
    """Like `timed` for several calls, run in turns: (median ms, last result) of each."""
    for call in calls:
        call()  # warm-up
    samples: list[list[float]] = [[] for _ in calls]
    results: list[Any] = [None] * len(calls)
    for _ in range(runs):
        for i, call in enumerate(calls):
            started = time.perf_counter()
            results[i] = call()
            samples[i].append((time.perf_counter() - started) * 1000)
    return tuple((statistics.median(samples[i]), results[i]) for i in range(len(calls)))


def bench_views(client: GraphClient, *, show_plans: bool) -> list[tuple[str, str, float]]:
    g = GROUP
    hub = "n0"
    rows: list[tuple[str, str, float]] = []
    views: list[tuple[str, str, Any, str | None, dict[str, Any] | None]] = [
        ("count", "count entities", lambda: q.counts_one(client, g, q.COUNT_ENTITIES), q.COUNT_ENTITIES, None),
        ("count", "count episodes", lambda: q.counts_one(client, g, q.COUNT_EPISODES), q.COUNT_EPISODES, None),
        ("count", "count communities", lambda: q.counts_one(client, g, q.COUNT_COMMUNITIES), q.COUNT_COMMUNITIES, None),
        ("count", "count RELATES_TO (label-free, directed)", lambda: q.counts_one(client, g, q.COUNT_RELATES_TO), q.COUNT_RELATES_TO, None),
        ("count", "count MENTIONS (directed)", lambda: q.counts_one(client, g, q.COUNT_MENTIONS), q.COUNT_MENTIONS, None),
        ("page", "entities: first page (50, by name)", lambda: q.entity_page(client, g, limit=50), q.ENTITY_PAGE, {"search": "", "limit": 50, "offset": 0}),
        ("page", "entities: search 'entity 4999'", lambda: q.entity_page(client, g, search="entity 4999", limit=50), None, None),
        ("page", f"hub entity facts ({HUB_EDGES:,} edges, first 200)", lambda: q.entity_facts(client, g, hub, limit=200), q.ENTITY_FACTS, {"uuid": hub, "valid_from": "", "valid_to": "", "limit": 200, "offset": 0}),
        ("page", "ratification: tentative facts (first 200)", lambda: q.tentative_facts(client, g, limit=200), q.TENTATIVE_FACTS, {"limit": 200, "offset": 0}),
        ("page", "communities (first 50)", lambda: q.community_page(client, g, limit=50), q.COMMUNITY_PAGE, {"limit": 50, "offset": 0}),
        ("page", "episodes (20 newest) + mentions", lambda: q.episode_mentions(client, g, [r["uuid"] for r in q.episode_page(client, g, limit=20)]), q.EPISODE_PAGE, {"limit": 20, "offset": 0}),
        ("distribution", "status x source kind x live (one pass)", lambda: client.ro_rows(g, q.FACT_BREAKDOWN), q.FACT_BREAKDOWN, None),
        ("distribution", "relation name distribution (top 50)", lambda: q.fact_name_distribution(client, g, limit=50), q.FACT_NAME_DISTRIBUTION, {"limit": 50}),
        ("distribution", "duplicates: same triple", lambda: client.ro_rows(g, q.DUPLICATE_TRIPLES, {"limit": 50}), q.DUPLICATE_TRIPLES, {"limit": 50}),
        ("distribution", "duplicates: same fact text", lambda: client.ro_rows(g, q.DUPLICATE_FACT_TEXT, {"limit": 50}), q.DUPLICATE_FACT_TEXT, {"limit": 50}),
        ("distribution", "duplicates: mirrored pairs", lambda: client.ro_rows(g, q.MIRRORED_PAIRS, {"limit": 50}), q.MIRRORED_PAIRS, {"limit": 50}),
        ("info", "index path count (graphiti's shape; index health only)", lambda: q.relates_to_count_index_path(client, g), q.COUNT_RELATES_TO_INDEX_PATH, {"group_ids": [g]}),
    ]  # fmt: skip
    print(f"\n{'view':58} {'median ms':>10} {'target':>8} {'target/measured':>16}")
    for kind, label, call, statement, params in views:
        ms, _ = timed(call)
        target = TARGETS_MS.get(kind)
        ratio = f"{target / ms:,.1f}x" if target and ms > 0 else "-"
        flag = "" if not target or ms <= target else "  OVER TARGET"
        print(f"{label:58} {ms:10.2f} {target or '-':>8} {ratio:>16}{flag}")
        rows.append((kind, label, ms))
        if show_plans and statement:
            plan = client.explain(g, statement, params)
            print("    " + "\n    ".join(plan.splitlines()))
    return rows


# The measured alternative to separate passes: one label-free pass that groups by status x
# source kind x live, collects every text and (source id, target id, name) key, joins the
# lists, sorts them and reads the repeats off neighbours. It still leaves out reading the
# triples' end names and the final ordering, so it is a lower bound of that plan.
ONE_PASS = """
MATCH (a)-[e:RELATES_TO]->(b)
WITH coalesce(e.status, '') AS status, coalesce(e.source_kind, '') AS source_kind,
     (e.expired_at IS NULL AND e.forgotten_at IS NULL) AS unexpired,
     count(e) AS facts, collect(e.fact) AS texts,
     collect(toString(id(a)) + ' ' + toString(id(b)) + ' ' + e.name) AS triples
WITH collect([status, source_kind, unexpired, facts]) AS breakdown,
     collect(texts) AS text_lists, collect(triples) AS triple_lists
WITH breakdown, list.sort(reduce(acc = [], t IN text_lists | acc + t)) AS texts,
     list.sort(reduce(acc = [], t IN triple_lists | acc + t)) AS triples
RETURN breakdown,
       [i IN range(1, size(texts) - 1) WHERE texts[i] = texts[i - 1] | texts[i]][..1000] AS text_repeats,
       [i IN range(1, size(triples) - 1) WHERE triples[i] = triples[i - 1] | triples[i]][..1000] AS triple_repeats
"""


# Alternatives measured against the kept statements (they lost; kept here to show it).
TRIPLES_BY_IDS = """
MATCH (a)-[e:RELATES_TO]->(b)
WITH id(a) AS a, e.name AS name, id(b) AS b, count(e) AS copies
WHERE copies > 1
MATCH (s), (t) WHERE id(s) = a AND id(t) = b
RETURN s.name AS source, name, t.name AS target, copies
ORDER BY copies DESC, source, name
LIMIT $limit
"""
TRIPLES_PAIR_FIRST = """
MATCH (a)-[e:RELATES_TO]->(b)
WITH a, b, collect(e.name) AS names
WHERE size(names) > size(list.dedup(names))
UNWIND names AS name
WITH a, name, b, count(*) AS copies
WHERE copies > 1
RETURN a.name AS source, name, b.name AS target, copies
ORDER BY copies DESC, source, name
LIMIT $limit
"""
TEXT_SORT_ALL = """
MATCH ()-[e:RELATES_TO]->()
WITH list.sort(collect(e.fact)) AS texts
UNWIND [i IN range(1, size(texts) - 1) WHERE texts[i] = texts[i - 1] | texts[i]] AS fact
WITH fact, count(*) + 1 AS copies
RETURN left(fact, 300) AS fact, copies
ORDER BY copies DESC, fact
LIMIT $limit
"""


def bench_alternatives(client: GraphClient, settings: Settings) -> None:
    """Cheaper statements, each in turns with the kept one."""
    g = GROUP
    limit = {"limit": 50}

    def keys(rows: list[dict[str, Any]]) -> list[str]:
        return sorted(repr(sorted(r.items())) for r in rows)

    def tied_keys(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        # rows tied on every ORDER BY key may differ at the LIMIT boundary: compare those keys
        return sorted((r["copies"], r["source"], r["name"]) for r in rows)

    trials: list[tuple[str, Any, Any, Any]] = [
        ("same triple: grouped on end ids, names after", lambda: client.ro_rows(g, q.DUPLICATE_TRIPLES, limit), lambda: client.ro_rows(g, TRIPLES_BY_IDS, limit), tied_keys),
        ("same triple: end pair first, then names", lambda: client.ro_rows(g, q.DUPLICATE_TRIPLES, limit), lambda: client.ro_rows(g, TRIPLES_PAIR_FIRST, limit), tied_keys),
        ("same fact text: one sort of every text", lambda: client.ro_rows(g, q.DUPLICATE_FACT_TEXT, limit), lambda: client.ro_rows(g, TEXT_SORT_ALL, limit), keys),
    ]  # fmt: skip
    print(
        f"\n{'alternative (in turns with the kept statement)':58} {'kept ms':>8} {'alt ms':>8} {'kept/alt':>9}  same rows"
    )
    for label, kept, alternative, key in trials:
        (kept_ms, kept_rows), (alt_ms, alt_rows) = timed_in_turns(kept, alternative)
        print(
            f"{label:58} {kept_ms:8.1f} {alt_ms:8.1f} {kept_ms / alt_ms:8.2f}x  {key(kept_rows) == key(alt_rows)}"
        )


def bench_distributions(client: GraphClient, shared_url: str | None) -> None:
    """Old plan (each view runs its statements one after another) beside the new plan
    (`memory.cache.distributions`), median of 5 each, in turns, in one run:
    cold = nothing kept anywhere (the first view after any write to the server);
    shared = this process keeps nothing but the shared store (Redis) holds the parts under the
    current fingerprint (a new replica or a restarted dashboard, graph server unchanged);
    warm = kept in this process, fingerprint unchanged. Then `bench_other_write`."""
    g = GROUP
    graph_changes.get_watcher(client).wait_live(10)  # as a dashboard runs: the watcher live
    facts_page = ["names", "same_triple", "same_fact_text", "mirrored"]
    store = None
    if shared_url:
        prefix = f"bench:{uuid.uuid4().hex[:8]}"  # this run's own keys, deleted at the end
        store = distributions.SharedStore(
            redis.Redis.from_url(shared_url, socket_timeout=5, retry=None), prefix=prefix
        )

    def old(*statements: str, limit: bool = True) -> Any:
        params = {"limit": 50} if limit else None
        return [client.ro_rows(g, statement, params) for statement in statements]

    def new_cold(names: list[str], limit: int = 50) -> Any:
        return distributions.parts(
            client, g, names, limit=limit, cache=distributions.SummaryCache(), share=False
        )

    def new_shared(names: list[str], limit: int = 50) -> Any:
        return distributions.parts(
            client, g, names, limit=limit, cache=distributions.SummaryCache(), shared=store
        )

    kept = distributions.SummaryCache()

    def new_warm(names: list[str], limit: int = 50) -> Any:
        return distributions.parts(client, g, names, limit=limit, cache=kept, share=False)

    views: list[tuple[str, Any, list[str], int]] = [
        ("status x source kind x live (overview, ratification)", lambda: old(q.FACT_BREAKDOWN, limit=False), ["breakdown"], 50),
        ("duplicates: same triple", lambda: old(q.DUPLICATE_TRIPLES), ["same_triple"], 50),
        ("duplicates: same fact text", lambda: old(q.DUPLICATE_FACT_TEXT), ["same_fact_text"], 50),
        ("Facts page: names + triple + text + mirrored", lambda: old(q.FACT_NAME_DISTRIBUTION, q.DUPLICATE_TRIPLES, q.DUPLICATE_FACT_TEXT, q.MIRRORED_PAIRS), facts_page, 50),
        ("all five parts (overview + Facts page)", lambda: old(q.FACT_BREAKDOWN, q.FACT_NAME_DISTRIBUTION, q.DUPLICATE_TRIPLES, q.DUPLICATE_FACT_TEXT, q.MIRRORED_PAIRS), ["breakdown", *facts_page], 50),
        ("newest 300 facts (memory vs chat)", lambda: [client.ro_rows(g, q.FACTS_PAGE, {"limit": 300, "offset": 0})], ["newest_facts"], 300),
    ]  # fmt: skip
    print(
        f"\n{'distribution (old: one after another; new: memory.distributions)':58}"
        f" {'old ms':>8} {'new cold':>9} {'shared':>8} {'warm':>6} {'old/cold':>9}"
        f" {'old/shared':>10} {'old/warm':>9}  same rows"
    )

    def rows_of(parts: list[list[dict[str, Any]]]) -> list[list[str]]:
        return [sorted(map(repr, rows)) for rows in parts]  # ties may come in any order

    for label, run_old, names, limit in views:
        # old, new cold and new shared take turns, so a change in the machine's load hits all
        calls = [run_old, lambda names=names, limit=limit: new_cold(names, limit)]
        if store is not None:
            calls.append(lambda names=names, limit=limit: new_shared(names, limit))
        timings = timed_in_turns(*calls)
        (old_ms, old_rows), (cold_ms, cold_rows) = timings[:2]
        shared_ms, shared_rows = timings[2] if store is not None else (float("nan"), cold_rows)
        new_warm(names, limit)  # keep it
        warm_ms, warm_rows = timed(lambda names=names, limit=limit: new_warm(names, limit))
        same = (
            rows_of(old_rows)
            == rows_of([cold_rows[n] for n in names])
            == rows_of([shared_rows[n] for n in names])
            == rows_of([warm_rows[n] for n in names])
        )
        # one distribution: < 300 ms cold; several (a whole page's parts): the page's 1.5 s
        target = TARGETS_MS["distribution"] if len(names) == 1 else TARGETS_MS["memory page"]
        flag = (
            "" if cold_ms <= target and warm_ms <= 20 else f"  OVER TARGET (cold > {target:.0f} ms)"
        )
        print(
            f"{label:58} {old_ms:8.1f} {cold_ms:9.1f} {shared_ms:8.2f} {warm_ms:6.2f}"
            f" {old_ms / cold_ms:8.1f}x {old_ms / shared_ms:9.0f}x {old_ms / warm_ms:8.0f}x  {same}{flag}"
        )
    # Two views of the same parts arriving together after a write (two dashboard sessions):
    # the old plan runs the statements once per view; the new shares one run per part.
    pair = ThreadPoolExecutor(2)
    together = ["breakdown", "same_triple", "same_fact_text"]
    statements = (q.FACT_BREAKDOWN, q.DUPLICATE_TRIPLES, q.DUPLICATE_FACT_TEXT)

    def two_old() -> Any:
        return [f.result() for f in [pair.submit(old, *statements) for _ in range(2)]]

    def two_new() -> Any:
        cache = distributions.SummaryCache()  # the process's cache, empty after the write

        def view() -> Any:
            return distributions.parts(client, g, together, limit=50, cache=cache, share=False)

        return [f.result() for f in [pair.submit(view) for _ in range(2)]]

    (two_old_ms, olds), (two_new_ms, news) = timed_in_turns(two_old, two_new)
    same = all(
        rows_of(o) == rows_of([n[p] for p in together]) for o, n in zip(olds, news, strict=True)
    )
    print(
        f"{'2 views at once after a write (breakdown + triple + text)':58} {two_old_ms:8.1f}"
        f" {two_new_ms:9.1f}  (old/new {two_old_ms / two_new_ms:.2f}x; both views done)  {same}"
    )
    pair.shutdown()
    if store is not None:
        print(f"shared-store keys this run (deleted now): {store.forget(g)}")
    (one_pass, _), (separate, _) = timed_in_turns(
        lambda: client.ro_rows(g, ONE_PASS),
        lambda: old(q.FACT_BREAKDOWN, q.DUPLICATE_TRIPLES, q.DUPLICATE_FACT_TEXT),
    )
    print(
        f"one label-free pass for all three (lower bound, no end names): {one_pass:.1f} ms; "
        f"the three statements one after another: {separate:.1f} ms "
        f"(one pass / separate = {one_pass / separate:.2f}x)"
    )
    fp_ms, _ = timed(lambda: graph_changes.fingerprint(client, g))
    print(f"change fingerprint (INFO + two O(1) counts): {fp_ms:.2f} ms")
    bench_other_write(client, [(label, names, limit) for label, _, names, limit in views])
    print(f"load average now: {Path('/proc/loadavg').read_text().strip()}")


def bench_other_write(client: GraphClient, views: list[tuple[str, list[str], int]]) -> None:
    """A view after a write to another graph on the same server, median of 5, in one run:
    live = the change watcher live (the parts are kept under the graph's own version);
    closed = the watcher closed (kept under the graph's own mark: its counts, our
    corrections, its 60 s period; bench/memory_pages.py shows the server-wide fingerprint,
    the mark when the corrections database is unreadable). Each round of
    each mode warms a fresh cache under that mode, writes one node to OTHER, then times
    the view; the modes alternate. `from cache` counts the parts served kept."""
    g = GROUP
    other = client.db.select_graph(OTHER)
    client.delete_graph(OTHER)
    writes = 0

    def write_other() -> None:
        nonlocal writes
        writes += 1
        other.query("CREATE (:Probe {v: $v})", {"v": writes})

    def view(names: list[str], limit: int, cache: distributions.SummaryCache) -> Any:
        return distributions.parts(client, g, names, limit=limit, cache=cache, share=False)

    def after_write(names: list[str], limit: int) -> tuple[float, int, Any]:
        cache = distributions.SummaryCache()
        view(names, limit, cache)  # warm under this mode
        write_other()
        hits = cache.hits
        started = time.perf_counter()
        rows = view(names, limit, cache)
        return (time.perf_counter() - started) * 1000, cache.hits - hits, rows

    def rows_of(parts: dict[str, list[dict[str, Any]]]) -> list[list[str]]:
        return [sorted(map(repr, parts[n])) for n in sorted(parts)]

    print(
        f"\n{'after a write to another graph (watcher live vs closed)':58}"
        f" {'live ms':>8} {'closed ms':>9} {'closed/live':>11}  from cache live, closed  same rows"
    )
    not_live = 0
    for label, names, limit in views:
        live_ms: list[float] = []
        closed_ms: list[float] = []
        live_hits = closed_hits = 0
        same = True
        for _ in range(5):
            graph_changes.close_watchers()  # a new watcher: a new epoch, so nothing kept is warm
            not_live += not graph_changes.get_watcher(client).wait_live(10)
            ms, hits, live_rows = after_write(names, limit)
            live_ms.append(ms)
            live_hits += hits
            graph_changes.get_watcher(client).close()  # kept closed: version() is None
            ms, hits, closed_rows = after_write(names, limit)
            closed_ms.append(ms)
            closed_hits += hits
            same = same and rows_of(live_rows) == rows_of(closed_rows)
        live, closed = statistics.median(live_ms), statistics.median(closed_ms)
        parts_asked = 5 * len(set(names))
        cached = f"{live_hits}/{parts_asked}, {closed_hits}/{parts_asked}"
        print(f"{label:58} {live:8.2f} {closed:9.1f} {closed / live:10.0f}x  {cached:>23}  {same}")
    graph_changes.close_watchers()
    watcher = graph_changes.get_watcher(client)
    watcher.wait_live(10)
    version_ms, version = timed(lambda: watcher.version(g))
    print(
        f"watcher version({GROUP}) (a PING on each connection): {version_ms:.2f} ms"
        f"{'' if version is not None else ' (None: the watcher did not vouch)'}"
        f"; rounds with the watcher not live: {not_live}; writes to {OTHER}: {writes}"
    )
    graph_changes.close_watchers()
    client.delete_graph(OTHER)
    print(f"{OTHER} deleted: {not client.graph_exists(OTHER)}")


HISTORY_AS_OF = datetime(2026, 5, 1, tzinfo=UTC)  # the bench's facts span 2026-04 to 2026-06
HISTORY_TO = datetime(2026, 5, 8, tzinfo=UTC)
HISTORY_CORRECTIONS = 50


def history_timeline(facts: int) -> Timeline:
    """Synthetic corrections on spread-out facts, between the two moments, whose `before`
    is the edge as `build` wrote it (the bench does not write their `after` to the graph):
    the corrected-fact path (their edges now, found from their source entity) is timed."""
    now = datetime(2026, 6, 1, tzinfo=UTC)
    entities = max(1, facts // 4)
    rows = []
    for n in range(HISTORY_CORRECTIONS):
        i = HUB_EDGES + n * ((facts - HUB_EDGES) // HISTORY_CORRECTIONS)
        source, target = (i * 7919) % entities, (i * 104729 + 1) % entities or 1
        created = now - timedelta(minutes=i % 90000)
        status = STATUSES[i % len(STATUSES)]
        expired = created + timedelta(days=3) if status in ("superseded", "contradicted") else None
        snap = {
            "uuid": f"e{i}",
            "source_node_uuid": f"n{source}",
            "target_node_uuid": f"n{target}",
            "name": NAMES[i % len(NAMES)],
            "fact": f"fact {i} about entity {source} and entity {target}",
            "created_at": created.isoformat(),
            "valid_at": created.isoformat(),
            "invalid_at": expired.isoformat() if expired else None,
            "expired_at": expired.isoformat() if expired else None,
            "episodes": [],
            "attributes": {"status": status},
        }
        at = HISTORY_AS_OF + timedelta(hours=1 + n)
        after = {**snap, "expired_at": at.isoformat(), "invalid_at": at.isoformat()}
        rows.append(
            Correction(
                id=f"c{n}", audit_id=n + 1, at=at, actor="bench", action="retract",
                reason="bench", ticket=None, fact_uuid=f"e{i}",
                before={f"e{i}": snap}, after={f"e{i}": after},
            )
        )  # fmt: skip
    return Timeline(tuple(rows))


def bench_history(client: GraphClient, facts: int, *, show_plans: bool) -> None:
    """Memory as of a moment and the two-moment diff (memory.history): cold (the first call
    in this process, after a server start when the graph was reused), then the median and
    the fastest of 5; target 1.5 s cold (a memory page). The load average is printed beside
    each: the figures move with it."""
    g = GROUP
    timeline = history_timeline(facts)

    def facts_view() -> Any:
        past = history_as_of.then(client, g, HISTORY_AS_OF, timeline)
        return history_as_of.read_facts_as_of(client, g, past, limit=200, offset=0)

    def deep_page() -> Any:
        past = history_as_of.then(client, g, HISTORY_AS_OF, timeline)
        return history_as_of.read_facts_as_of(client, g, past, limit=200, offset=20_000)

    def diff_view() -> Any:
        return history_diff.read_diff(client, g, HISTORY_AS_OF, HISTORY_TO, timeline, limit=200)

    def bundle_stream() -> Any:  # `memory bundle --as-of`: every fact held then, streamed
        past = history_as_of.then(client, g, HISTORY_AS_OF, timeline)
        held = sum(1 for _ in history_as_of.iter_facts_as_of(client, g, past, page=5000))
        return {"total": held, "valid_then": -1, "retired_by_then": -1}

    target = TARGETS_MS["memory page"]
    print(f"\nmemory as of a moment ({HISTORY_CORRECTIONS} corrections on the time line):")
    print(
        f"{'view':58} {'cold ms':>9} {'median ms':>10} {'min ms':>8} {'target':>8} "
        f"{'target/cold':>12} {'load':>6}"
    )
    for label, call in (
        (f"facts as of {HISTORY_AS_OF:%Y-%m-%d} (first 200 + counts)", facts_view),
        ("facts as of, page at offset 20,000", deep_page),
        (f"diff {HISTORY_AS_OF:%m-%d} -> {HISTORY_TO:%m-%d} (counts, 200 a list, who)", diff_view),
        ("bundle --as-of: every fact held then (pages of 5,000)", bundle_stream),
    ):
        load = Path("/proc/loadavg").read_text().split()[0]
        started = time.perf_counter()
        result = call()
        cold = (time.perf_counter() - started) * 1000
        samples = []
        for _ in range(5):
            began = time.perf_counter()
            call()
            samples.append((time.perf_counter() - began) * 1000)
        ms, fastest = statistics.median(samples), min(samples)
        flag = "" if cold <= target else "  OVER TARGET"
        print(
            f"{label:58} {cold:9.1f} {ms:10.1f} {fastest:8.1f} {target:>8} "
            f"{target / cold:11.1f}x {load:>6}{flag}"
        )
        if "counts" in result and isinstance(result["counts"], dict):
            print(f"    counts: {result['counts']}")
        elif "total" in result:
            print(f"    held {result['total']:,}, valid then {result['valid_then']:,}, "
                  f"retired by then {result['retired_by_then']:,}")  # fmt: skip
    if show_plans:
        at = {"at": moment_text(HISTORY_AS_OF), "present": [], "absent": [], "corrected": []}
        ab = {"a": moment_text(HISTORY_AS_OF), "b": moment_text(HISTORY_TO), "corrected": []}
        at_page = {**at, "limit": 200, "offset": 0}
        for name, statement, params in (
            ("facts as of (page and counts, one pass)", hq.FACTS_AS_OF, at_page),
            ("fact counts as of (memory stats --as-of)", hq.FACT_COUNTS_AS_OF, at),
            ("diff (counts and lists, one pass)", hq.DIFF, {**ab, "limit": 200}),
            ("corrected facts now", hq.FACTS_BY_SOURCE_AND_UUID, {"pairs": [{"source": "n1", "uuid": "e1"}]}),
            ("one entity's facts as of", hq.ENTITY_FACTS_AS_OF, {**at_page, "uuid": "n0"}),
            ("warm context as of", hq.FACT_FULLTEXT_AS_OF, {"query": "fact", "group_ids": [g], "at": at["at"], "unborn": [], "limit": 10}),
        ):  # fmt: skip
            plan = client.explain(g, statement, params)
            print(f"  plan: {name}\n    " + "\n    ".join(plan.splitlines()))


def graphiti_baseline_child(socket_path: str, expected_edges: int) -> None:
    """Child process: graphiti-core's own full load of the sample graph; prints its cost."""
    from falkordb.asyncio import FalkorDB as AsyncFalkorDB
    from graphiti_core.driver.falkordb_driver import FalkorDriver

    async def load() -> None:
        db = AsyncFalkorDB(unix_socket_path=socket_path)
        driver = FalkorDriver(falkor_db=db, database=SAMPLE)
        started = time.perf_counter()
        nodes = await EntityNode.get_by_group_ids(driver, [SAMPLE])
        node_s = time.perf_counter() - started
        started = time.perf_counter()
        try:
            edges = await EntityEdge.get_by_group_ids(driver, [SAMPLE])
            edge_note = f"{len(edges):,} of {expected_edges:,} edges in {time.perf_counter() - started:.2f} s"
        except Exception as exc:  # noqa: BLE001 - the baseline may fail (index drift)
            edge_note = f"failed after {time.perf_counter() - started:.2f} s: {type(exc).__name__}"
        await db.aclose()
        peak = hwm_mb()  # VmHWM: ru_maxrss would carry the parent's peak across exec
        print(
            f"graphiti-core baseline, 10% sample ({SAMPLE}), own process: "
            f"EntityNode.get_by_group_ids loaded {len(nodes):,} entities in {node_s:.2f} s; "
            f"EntityEdge.get_by_group_ids: {edge_note}; peak RSS {peak:.0f} MB"
        )

    asyncio.run(load())


def graphiti_baseline(handle: Any, expected_edges: int) -> None:
    import subprocess

    print()
    subprocess.run(
        [
            sys.executable,
            __file__,
            "--baseline-child",
            str(handle.unix_socket),
            str(expected_edges),
        ],
        check=False,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument("--skip-restart", action="store_true")
    parser.add_argument("--plans", action="store_true", help="print GRAPH.EXPLAIN of each view")
    parser.add_argument(
        "--data-dir", type=Path, help="FalkorDB data dir to keep (reused if seeded)"
    )
    parser.add_argument(
        "--only-distributions", action="store_true", help="old vs new distribution plan only"
    )
    parser.add_argument(
        "--shared-redis",
        default="redis://127.0.0.1:6379/14",
        help="Redis for the shared-store column ('' to skip); this run's keys are deleted",
    )
    parser.add_argument(
        "--alternatives", action="store_true", help="also time the statement variants that lost"
    )
    parser.add_argument(
        "--only-history", action="store_true", help="memory as of a moment and the diff only"
    )
    parser.add_argument(
        "--baseline-child", nargs=2, metavar=("SOCKET", "EDGES"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.baseline_child:
        graphiti_baseline_child(args.baseline_child[0], int(args.baseline_child[1]))
        return
    entities, facts, episodes = (int(n * args.scale) for n in (50_000, 200_000, 5_000))

    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="yfdb-bench-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    settings = Settings(falkordb_data_dir=data_dir, falkordb_query_timeout_ms=60_000)
    if args.data_dir:  # a kept 200,000-fact RDB took 17 s to load on a busy machine
        graph_server._START_TIMEOUT_SECONDS = 180.0
    handle = ensure_server(settings)
    try:
        client = GraphClient(FalkorDB(**handle.redis_kwargs()), settings, handle=handle)
        seed_or_reuse(client, GROUP, entities, facts, episodes)
        if not args.skip_baseline:
            seed_or_reuse(client, SAMPLE, entities // 10, facts // 10, episodes // 10)
        print(f"load average at the start: {Path('/proc/loadavg').read_text().strip()}")
        if args.only_history:
            bench_history(client, facts, show_plans=True)
            return
        if args.only_distributions:
            bench_distributions(client, args.shared_redis or None)
            if args.alternatives:
                bench_alternatives(client, settings)
            return
        rows = bench_views(client, show_plans=args.plans)
        bench_history(client, facts, show_plans=args.plans)
        bench_distributions(client, args.shared_redis or None)
        if args.alternatives:
            bench_alternatives(client, settings)

        if not args.skip_restart:
            print("\nSAVE, stop, start from the RDB (the index drifts):")
            client.db.connection.execute_command("SAVE")
            client.close()
            stop_server(settings)
            handle = ensure_server(settings)
            client = GraphClient(FalkorDB(**handle.redis_kwargs()), settings, handle=handle)
            ms, health = timed(lambda: check_index_health(client, GROUP), runs=1)
            print(
                f"index health after restart: index path {health.index_path_facts:,}, "
                f"label-free {health.label_free_facts:,}, drift {health.drift:,} ({ms:.0f} ms)"
            )
            started = time.perf_counter()
            rebuild_relationship_indexes(client, GROUP)
            repaired = check_index_health(client, GROUP)
            print(
                f"repair (drop + rebuild relationship indexes): {time.perf_counter() - started:.1f}"
                f" s; drift now {repaired.drift:,}"
            )
            post = timed(lambda: q.counts_one(client, GROUP, q.COUNT_RELATES_TO))[0]
            print(f"label-free RELATES_TO count after restart: {post:.2f} ms")

        view_rss = rss_mb()
        server_rss = rss_mb(handle.pid) if handle.pid else float("nan")
        if not args.skip_baseline:
            graphiti_baseline(handle, facts // 10)
        over = [label for kind, label, ms in rows if kind in TARGETS_MS and ms > TARGETS_MS[kind]]
        print(
            f"\ndashboard (this process, after every view) RSS: {view_rss:.0f} MB (target < 500 MB: "
            f"{500 / view_rss:.1f}x headroom); peak "
            f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB (includes seeding); "
            f"FalkorDB server RSS {server_rss:.0f} MB"
        )
        print(f"views over target: {over or 'none'}")
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"load average at the end (1, 5, 15 min; {os.cpu_count()} cores): {load}")
        client.close()
    finally:
        stop_server(settings)


if __name__ == "__main__":
    main()
