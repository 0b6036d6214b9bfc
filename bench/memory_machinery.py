"""Whether the memory caches earn their place: each memory page with them and with the plain query.

Run: `.venv/bin/python bench/memory_machinery.py [--data-dir DIR] [--scale 1.0] [--runs 5]
[--redis-url redis://127.0.0.1:6379/0]`.

The graph, the data dir and the render are bench/memory_pages.py's (AppTest, a
50,000-entity, 200,000-fact user graph at scale 1). The pages that read a part of
`memory.cache.distributions` are rendered in turns, in one run, in each of these
modes (the Streamlit caches cleared before every render but the last mode):
- cold: nothing kept (this process's cache and the Redis copy emptied): the first
  view after a write.
- redis copy: this process's cache emptied, the Redis copy kept: a new replica.
- warm: kept in this process, the graph unchanged (change watcher live).
- warm, other written: kept, but another graph on the server was written just before
  (an agent writing its memory); the change watcher keeps the page warm.
- the same, no watcher: only the server-wide fingerprint, which that write moves.
- plain: no distribution cache: each view runs its statements (`memory.graph.queries`)
  directly, as the code would without the machinery.
- streamlit: nothing cleared: the page's own `st.cache_data` (30 s TTL) serves it.
Prints the median render per page and mode, then the ratios each piece buys, and
whether each view's rows are the same both ways. Prints numbers; asserts nothing.

Measured here and removed (issue 38): reading a part as 2 node-id ranges at once on the
server's threads (`memory.graph.split_scans`). Its page renders, cold, against the same
cold render with one statement per part (7 runs in turns, scale 1, 2 cores, load 3-6):
overview 1.07x, facts 0.67x, ratification 0.86x, chat 1.19x; under 2x on every page.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory_pages import prepare, render  # noqa: E402  (bench/memory_pages.py)

from yuxi_dash.access.roles import Actor, Role  # noqa: E402
from yuxi_dash.memory.cache import distributions, graph_changes  # noqa: E402
from yuxi_dash.memory.graph import queries  # noqa: E402
from yuxi_dash.memory.graph.client import GraphClient, get_client  # noqa: E402
from yuxi_dash.memory.views import gated_views  # noqa: E402
from yuxi_dash.memory.views.gate import open_view  # noqa: E402
from yuxi_dash.settings import get_settings  # noqa: E402
from yuxi_dash.ui.memory_facts import clear_desk_caches  # noqa: E402

# The pages that reach `memory.cache.distributions` (gated_views: stats, relations,
# ratification, chat_vs_memory); the other memory pages never call it.
PAGES = {
    "memory_overview.py": "stats",
    "memory_facts.py": "relations",
    "memory_ratification.py": "ratification",
    "memory_chat.py": "chat_vs_memory",
}
VIEW_NAMES = {  # the gated view function -> the view name open_view audits
    "stats": "stats",
    "relations": "relations",
    "ratification": "ratification",
    "chat_vs_memory": "chat",
}
MODES = (
    "cold",
    "redis copy",
    "warm",
    "other written",
    "no watcher",
    "plain",
    "streamlit",
)
OTHER = "user_bench_other"  # a graph on the same server, written before the watcher modes


# --- the plain path: what each view would run without the machinery ----------
def plain_counts(client: GraphClient, group_id: str, **_: Any) -> queries.MemoryCounts:
    return queries.counts(client, group_id)  # runs FACT_BREAKDOWN itself


def plain_relations(
    client: GraphClient, group_id: str, *, limit: int = 50, **_: Any
) -> dict[str, Any]:
    return {
        "names": queries.fact_name_distribution(client, group_id, limit=limit),
        "duplicates": queries.duplicates(client, group_id, limit=limit),
    }


def plain_parts(
    client: GraphClient, group_id: str, names: list[str], *, limit: int = 50, **_: Any
) -> dict[str, list[dict[str, Any]]]:
    assert list(names) == ["newest_facts"], names  # the only part a view asks for by name
    return {"newest_facts": queries.facts_page(client, group_id, limit=limit)}


@contextlib.contextmanager
def plain() -> Iterator[None]:
    """The views run their statements directly (gated_views' three entry points swapped)."""
    kept = (
        gated_views.distribution_counts,
        gated_views.distribution_relations,
        gated_views.distribution_parts,
    )
    gated_views.distribution_counts = plain_counts
    gated_views.distribution_relations = plain_relations
    gated_views.distribution_parts = plain_parts  # type: ignore[assignment]
    try:
        yield
    finally:
        (
            gated_views.distribution_counts,
            gated_views.distribution_relations,
            gated_views.distribution_parts,
        ) = kept


class _NoWatcher:
    def version(self, graph: str) -> None:
        return None  # never vouches: parts are kept under the server-wide fingerprint


@contextlib.contextmanager
def no_watcher() -> Iterator[None]:
    kept = graph_changes.get_watcher
    graph_changes.get_watcher = lambda client: _NoWatcher()  # type: ignore[assignment,return-value]
    try:
        yield
    finally:
        graph_changes.get_watcher = kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, help="FalkorDB data dir to keep (reused)")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    os.environ["YUXI_DASH_REDIS_URL"] = args.redis_url  # the Redis copy is on
    _settings, user = prepare(args.data_dir, args.scale)
    group = f"user_{user}"
    store = distributions.get_shared_store(get_settings().redis_url)
    assert store is not None

    def forget_kept() -> None:
        distributions.get_cache().clear()
        keys = store.keys(group)
        if keys:
            store.conn.delete(*keys)

    other = get_client().db.select_graph(OTHER)

    def mode_setup(mode: str) -> contextlib.AbstractContextManager[None]:
        if mode in ("other written", "no watcher"):
            other.query("CREATE (:Entity {uuid: 'written', name: 'x'})")
        if mode != "streamlit":
            clear_desk_caches()  # the desk's fact list and provenance too
        if mode in ("cold", "plain"):
            forget_kept()
        if mode == "redis copy":
            distributions.get_cache().clear()
        if mode == "plain":
            return plain()
        if mode == "no watcher":
            return no_watcher()
        return contextlib.nullcontext()

    samples: dict[tuple[str, str], list[float]] = {}
    problems: set[str] = set()
    for page in PAGES:  # one warm-up render per page (plan cache, imports)
        render(page, user)
    for _ in range(args.runs):
        for page in PAGES:
            for mode in MODES:
                with mode_setup(mode):
                    seconds, problem = render(page, user)
                samples.setdefault((page, mode), []).append(seconds)
                if problem:
                    problems.add(f"{page} {mode}: {problem}")

    med = {key: statistics.median(values) for key, values in samples.items()}
    print(
        f"\nmedian render s (AppTest, {args.runs} runs in turns, scale {args.scale}: "
        f"{int(50_000 * args.scale):,} entities, {int(200_000 * args.scale):,} facts)"
    )
    print(f"{'page':24}" + "".join(f"{mode:>14}" for mode in MODES))
    for page in PAGES:
        print(f"{page:24}" + "".join(f"{med[page, mode]:14.3f}" for mode in MODES))
    ratios: list[tuple[str, Callable[[str], float]]] = [
        ("cache warm: plain / warm", lambda p: med[p, "plain"] / med[p, "warm"]),
        ("cache cold: plain / cold", lambda p: med[p, "plain"] / med[p, "cold"]),
        ("redis copy: cold / copy", lambda p: med[p, "cold"] / med[p, "redis copy"]),
        ("redis copy: plain / copy", lambda p: med[p, "plain"] / med[p, "redis copy"]),
        ("watcher: no watcher / live", lambda p: med[p, "no watcher"] / med[p, "other written"]),
        ("streamlit: plain / streamlit", lambda p: med[p, "plain"] / med[p, "streamlit"]),
    ]
    print(f"\n{'what it buys (x, >= 2 keeps it)':32}" + "".join(f"{p[:-3]:>20}" for p in PAGES))
    for label, ratio in ratios:
        print(f"{label:32}" + "".join(f"{ratio(p):19.2f}x" for p in PAGES))
    for line in sorted(problems):
        print("PROBLEM", line)
    same_rows(user)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average at the end (1, 5, 15 min; {os.cpu_count()} cores): {load}")


def same_rows(user: str) -> None:
    """Each view's result with the machinery (cold) and plain: equal?"""
    actor = Actor(id="bench@example.com", role=Role.ADMIN)
    print("\nsame view result both ways (cold vs plain):")
    for page, view in PAGES.items():
        call = getattr(gated_views, view)
        access = open_view(user, VIEW_NAMES[view], actor=actor)
        distributions.get_cache().clear()
        kept = call(access)
        with plain():
            direct = call(access)
        if view == "ratification":
            kept.pop("tentative"), direct.pop("tentative")  # ages move with the clock
        print(f"  {page:24} {kept == direct}")


if __name__ == "__main__":
    main()
