"""Every memory page rendered (Streamlit AppTest) on a 50,000-entity, 200,000-fact user graph.

Run: `.venv/bin/python bench/memory_pages.py [--data-dir DIR] [--runs 5] [--page P]`.

Seeds the graph of bench/memory.py into an embedded FalkorDB under DIR, or reuses it
(keep DIR: seeding takes minutes), then renders each memory page `--runs` times, the
columns in turns: "cold 1by1" clears the distribution cache (`memory.cache.distributions`)
and reads the parts one statement at a time (PARALLEL_PARTS=1), "cold" clears it and reads
them two at a time (PARALLEL_PARTS=2, the default), "warm" keeps it; the Streamlit caches
are cleared before every render. Then the Facts page after a write to another user's graph
with the change watcher unable to vouch: the corrections database unreadable (the
server-wide fingerprint is the mark) or readable (the graph's own mark).
Target: each page <= 1.5 s, the Facts page cold <= 1.0 s. Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")

from falkordb import FalkorDB  # noqa: E402
from memory import GROUP, seed  # noqa: E402  (bench/memory.py: the same graph)
from streamlit.logger import set_log_level  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from yuxi_dash.demo.flags import demo_flags  # noqa: E402
from yuxi_dash.memory.cache import distributions, graph_changes  # noqa: E402
from yuxi_dash.memory.cache.distributions import get_cache  # noqa: E402
from yuxi_dash.memory.graph.client import GraphClient  # noqa: E402
from yuxi_dash.memory.graph.server import ensure_server, stop_server  # noqa: E402
from yuxi_dash.settings import Settings, get_settings  # noqa: E402
from yuxi_dash.ui.memory import clear_memory_caches  # noqa: E402

PAGES = (
    "memory_overview.py",
    "memory_entities.py",
    "memory_facts.py",
    "memory_ratification.py",
    "memory_communities.py",
    "memory_episodes.py",
    "memory_chat.py",
    "memory_warm_context.py",
)
TARGET_S = 1.5
OTHER = "user_bench_other"  # another user's graph, written between two Facts views
PAGES_DIR = Path(__file__).resolve().parents[1] / "app_pages"


def ensure_graph(settings: Settings, scale: float) -> None:
    """Seed the bench graph unless the data dir already holds it at this scale."""
    handle = ensure_server(settings)
    client = GraphClient(FalkorDB(**handle.redis_kwargs()), settings, handle=handle)
    entities, facts, episodes = (int(n * scale) for n in (50_000, 200_000, 5_000))
    try:
        have = (
            client.ro_value(GROUP, "MATCH (n:Entity) RETURN count(n)")
            if client.graph_exists(GROUP)
            else 0
        )
        edges = client.ro_value(GROUP, "MATCH ()-[e:RELATES_TO]->() RETURN count(e)") if have else 0
        if (have, edges) == (entities, facts):
            print(
                f"reusing {GROUP}: {entities:,} entities, {facts:,} facts ({settings.falkordb_data_dir})"
            )
        else:
            seed(client, GROUP, entities, facts, episodes)
            client.db.connection.execute_command("SAVE")
    finally:
        client.close()


def render(page: str, user: str) -> tuple[float, str]:
    at = AppTest.from_file(str(PAGES_DIR / page), default_timeout=120)
    at.session_state["memory_user"] = user
    if page == "memory_warm_context.py":
        at.session_state["warm_query"] = "fact entity 42"
    started = time.perf_counter()
    at.run()
    seconds = time.perf_counter() - started
    problem = f"EXCEPTION {at.exception[0].value}" if at.exception else ""
    return seconds, problem


def timed_in_turns(
    page: str, user: str, runs: int, befores: list[Callable[[], None]]
) -> list[tuple[float, float, str]]:
    """(median, slowest, problem) per `before`, the renders taken in turns."""
    samples: list[list[float]] = [[] for _ in befores]
    problems = [""] * len(befores)
    for _ in range(runs):
        for i, before in enumerate(befores):
            before()
            seconds, problem = render(page, user)
            samples[i].append(seconds)
            problems[i] = problems[i] or problem
    return [
        (statistics.median(xs), max(xs), problem)
        for xs, problem in zip(samples, problems, strict=True)
    ]


def one_by_one(on: bool) -> None:
    """On: one part's statement at a time (PARALLEL_PARTS=1); off: the default, 2."""
    distributions.PARALLEL_PARTS = 1 if on else 2


def other_graph_write(settings: Settings, user: str, runs: int) -> None:
    """The Facts page right after a write to another graph, the watcher unable to vouch."""
    handle = ensure_server(settings)
    client = GraphClient(FalkorDB(**handle.redis_kwargs()), settings, handle=handle)
    real_version, real_ours = graph_changes.GraphChangeWatcher.version, graph_changes.our_writes
    graph_changes.GraphChangeWatcher.version = lambda self, graph: None  # type: ignore[method-assign]

    def after_write(server_wide: bool) -> Callable[[], None]:
        def before() -> None:
            graph_changes.our_writes = (  # type: ignore[assignment]
                (lambda c, g: None) if server_wide else real_ours
            )
            clear_memory_caches()
            render("memory_facts.py", user)  # the view is kept
            client.db.select_graph(OTHER).query("CREATE (:Probe {v: 1})")
            clear_memory_caches()

        return before

    try:
        (old, new) = timed_in_turns(
            "memory_facts.py", user, runs, [after_write(True), after_write(False)]
        )
        print(
            f"\nFacts page after a write to {OTHER}, watcher unable to vouch (median, max):"
            f"\n  database unreadable: server-wide fingerprint {old[0]:6.3f} {old[1]:6.2f}"
            f"\n  database readable: the graph's own mark      {new[0]:6.3f} {new[1]:6.2f}"
            f"  {old[0] / new[0]:5.1f}x{'  ' + (old[2] or new[2]) if old[2] or new[2] else ''}"
        )
    finally:
        graph_changes.GraphChangeWatcher.version = real_version  # type: ignore[method-assign]
        graph_changes.our_writes = real_ours
        client.delete_graph(OTHER)
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data-dir", type=Path, help="FalkorDB data dir to keep (reused if seeded)"
    )
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--stop", action="store_true", help="stop the FalkorDB server at the end")
    parser.add_argument(
        "--page", action="append", choices=PAGES, help="only this page (repeatable; default all)"
    )
    args = parser.parse_args()
    settings, user = prepare(args.data_dir, args.scale)

    def cold() -> None:
        one_by_one(False)
        clear_memory_caches()
        get_cache().clear()

    def cold_one_by_one() -> None:
        cold()
        one_by_one(True)

    def warm() -> None:
        one_by_one(False)
        clear_memory_caches()

    print(
        f"\n{'page (AppTest, median of ' + str(args.runs) + ')':30} {'cold 1by1':>9} {'max':>5}"
        f" {'cold s':>7} {'max':>5} {'warm s':>7} {'max':>5} {'1by1/cold':>9}"
        f"  target <= {TARGET_S} s"
    )
    over = []
    try:
        for page in args.page or PAGES:
            (seq, par, hot) = timed_in_turns(page, user, args.runs, [cold_one_by_one, cold, warm])
            one_by_one(False)
            flag = "  OVER" if max(par[0], hot[0]) > TARGET_S else ""
            if flag:
                over.append(page)
            note = seq[2] or par[2] or hot[2]
            print(
                f"{page:30} {seq[0]:9.3f} {seq[1]:5.2f} {par[0]:7.3f} {par[1]:5.2f}"
                f" {hot[0]:7.3f} {hot[1]:5.2f} {seq[0] / par[0]:8.2f}x"
                f"{flag}{'  ' + note if note else ''}"
            )
        print(f"pages over {TARGET_S} s: {over or 'none'}")
        if not args.page or "memory_facts.py" in args.page:
            other_graph_write(settings, user, args.runs)
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"load average at the end (1, 5, 15 min; {os.cpu_count()} cores): {load}")
    finally:
        if args.stop:
            stop_server(settings)


def prepare(data_dir: Path | None, scale: float) -> tuple[Settings, str]:
    """Seed (or reuse) the graph under `data_dir` and point this process's pages at it:
    (the settings the server runs under, the bench user's id)."""
    data_dir = data_dir or Path(tempfile.mkdtemp(prefix="yfdb-pages-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    settings = Settings(falkordb_data_dir=data_dir, falkordb_query_timeout_ms=60_000)
    ensure_graph(settings, scale)

    user = GROUP.removeprefix("user_")
    flags_file = data_dir / "bench-flags.json"
    flags_file.write_text(json.dumps(demo_flags([user])))  # memory and communities on
    os.environ.update(
        {
            "YUXI_DASH_FALKORDB_DIR": str(data_dir),
            "YUXI_DASH_LD_FLAGS_FILE": str(flags_file),
            "YUXI_DASH_DATABASE_URL": f"sqlite:///{data_dir / 'bench.db'}",
            "YUXI_DASH_FALKORDB_QUERY_TIMEOUT_MS": "30000",
        }
    )
    get_settings.cache_clear()
    set_log_level("error")  # AppTest's bare-mode warnings
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").setLevel(
        logging.ERROR
    )
    render(PAGES[0], user)  # first import of Streamlit, pages and the SQLite migrations
    return settings, user


if __name__ == "__main__":
    main()
