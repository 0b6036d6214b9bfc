"""Every memory page rendered (Streamlit AppTest) on a 50,000-entity, 200,000-fact user graph.

Run: `.venv/bin/python bench/memory_pages.py [--data-dir DIR] [--scale 1.0] [--runs 5]`.

Seeds the graph of bench/memory.py (graphiti-core's schema, its statements) into
an embedded FalkorDB under DIR, or reuses it when DIR already holds it (keep DIR
between runs: seeding takes minutes), then renders each memory page `--runs`
times and prints the median and the slowest run per page, in two columns run
side by side: "cold" clears the distribution cache (`memory.cache.distributions`)
before every render, "warm" keeps it; the Streamlit caches are cleared before
every render in both, so every render reads the graph through the service.
Target: each page <= 1.5 s. Prints numbers; asserts nothing.
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


def timed_page(
    page: str, user: str, runs: int, before: Callable[[], None]
) -> tuple[float, float, str]:
    samples = []
    problem = ""
    for _ in range(runs):
        before()
        seconds, problem = render(page, user)
        samples.append(seconds)
    return statistics.median(samples), max(samples), problem


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data-dir", type=Path, help="FalkorDB data dir to keep (reused if seeded)"
    )
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--stop", action="store_true", help="stop the FalkorDB server at the end")
    args = parser.parse_args()
    settings, user = prepare(args.data_dir, args.scale)

    def cold() -> None:
        clear_memory_caches()
        get_cache().clear()

    print(
        f"\n{'page (AppTest, median of ' + str(args.runs) + ')':34} {'cold s':>8} {'max':>6}"
        f" {'warm s':>8} {'max':>6} {'cold/warm':>10}  target <= {TARGET_S} s"
    )
    over = []
    try:
        for page in PAGES:
            cold_s, cold_max, problem = timed_page(page, user, args.runs, cold)
            warm_s, warm_max, warm_problem = timed_page(page, user, args.runs, clear_memory_caches)
            flag = "  OVER" if max(cold_s, warm_s) > TARGET_S else ""
            if flag:
                over.append(page)
            note = problem or warm_problem
            print(
                f"{page:34} {cold_s:8.3f} {cold_max:6.2f} {warm_s:8.3f} {warm_max:6.2f}"
                f" {cold_s / warm_s:9.1f}x{flag}{'  ' + note if note else ''}"
            )
        print(f"pages over {TARGET_S} s: {over or 'none'}")
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
