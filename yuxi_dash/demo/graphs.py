"""The demo's graph seeder: one Graphiti graph per demo user, plus Redis hit counters.

Owns `seed_demo_graphs`: for each user without a graph (every user with
`reset=True`, after dropping theirs) it builds the graph (`yuxi_dash.demo.graph_build`),
writes it in graphiti-core's true schema (`yuxi_dash.demo.graph_writer`) with its
indexes, and sets the hit counters of its tentative facts at
`mem:hits:{user_id}:{edge_uuid}`. Each graph is built from the user's own demo
chat messages (no database read: the builder replays them), so it can be seeded
before or after the threads; the large episode and the state of the
communities vary by user, so the pages have varied cases to show.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from yuxi_dash.demo.flags import DEMO_FLAGS_FILE, write_demo_flags
from yuxi_dash.demo.graph_build import DemoGraph, build_demo_graph
from yuxi_dash.demo.graph_writer import create_indexes, write_graph
from yuxi_dash.memory.graph.client import GraphClient, get_client, hits_connection
from yuxi_dash.memory.graph.groups import derive_group_id
from yuxi_dash.memory.views.ratification import HITS_TTL_SECONDS, hits_key
from yuxi_dash.settings import Settings


def write_demo_graph(client: GraphClient, graph: DemoGraph) -> dict[str, int]:
    create_indexes(client, graph.group_id)
    return write_graph(
        client,
        graph.group_id,
        episodes=graph.episodes,
        entities=graph.entities,
        mentions=graph.mentions,
        facts=graph.facts,
        communities=graph.communities,
        members=graph.members,
    )


def seed_demo_graphs(
    settings: Settings,
    user_ids: Sequence[str],
    *,
    reset: bool = False,
    client: GraphClient | None = None,
    flags_path: Path | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Seed every user's graph and the hit counters; idempotent.

    ``now`` is the story's present (the demo threads' anchor); unset, the clock's.
    The flag file is written only when `flags_path` is given: the demo's own
    file ships with the package (DEMO_FLAGS_FILE) and is never rewritten here.
    """
    client = client or get_client(settings)
    hits = hits_connection(settings)
    now = (now or datetime.now(UTC)).replace(microsecond=0)
    states = ("stale", "few_new", "fresh", "none")
    seeded: list[str] = []
    skipped: list[str] = []
    totals = {"entities": 0, "facts": 0, "episodes": 0, "communities": 0}
    try:
        for index, user_id in enumerate(user_ids):
            group_id = derive_group_id(user_id)
            if client.graph_exists(group_id):
                if not reset:
                    skipped.append(user_id)
                    continue
                client.delete_graph(group_id)
            graph = build_demo_graph(
                user_id,
                now=now,
                large_episode=index % 5 == 0,
                community_state=states[index % len(states)],
            )
            written = write_demo_graph(client, graph)
            pipe = hits.pipeline(transaction=False)
            for edge_uuid, count in graph.hits.items():
                pipe.set(hits_key(user_id, edge_uuid), count, ex=HITS_TTL_SECONDS)
            pipe.execute()
            seeded.append(user_id)
            for key in totals:
                totals[key] += written[key]
    finally:
        hits.close()
    flags_file = write_demo_flags(user_ids, flags_path) if flags_path else DEMO_FLAGS_FILE
    return {
        "graphs": len(seeded),
        "skipped_existing": len(skipped),
        "flags_file": str(flags_file),
        **totals,
    }
