"""A memory graph with known retirements, written with graphiti-core's classes.

`plant_retirements(client)` writes user `retire_user` as graphiti leaves a graph after
four episodes: each later episode's pass writes new facts (created seconds after the
episode) and expires older ones (expired_at a few seconds later, invalid_at = the new
fact's valid_at), exactly as graphiti-core's `resolve_edge_contradictions` does.
- episode "moved": "Retire User lives in Berlin" retires "Retire User lives in Paris"
  (shares the user entity): not suspicious;
- episode "tea": "Bob likes tea" retires "Rust compiles to wasm" (shares nothing):
  suspicious; "Bob liked tea in 2020" arrived already ended in that same pass;
- episode "coffee": "Bob prefers coffee" retires "Alice prefers jazz" (shares only the
  relation name PREFERS): not suspicious;
- "Retire User prefers dark mode" is live, for a test to retract with our correction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from graphiti_core.edges import EntityEdge, EpisodicEdge
from graphiti_core.nodes import EntityNode, EpisodeType, EpisodicNode

from yuxi_dash.demo.graph_writer import create_indexes, deterministic_embedding, write_graph
from yuxi_dash.memory.graph.groups import derive_group_id

RETIRE_USER = "retire_user"
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@dataclass
class RetireGraph:
    user_id: str
    group_id: str
    facts: dict[str, str] = field(default_factory=dict)
    episodes: dict[str, str] = field(default_factory=dict)


def _uid(n: int) -> str:
    return f"00000000-0000-4000-9000-{n:012d}"


def plant_retirements(client: Any, user_id: str = RETIRE_USER) -> RetireGraph:
    group = derive_group_id(user_id)
    client.delete_graph(group)
    names = ["Retire User", "Paris", "Berlin", "Rust", "wasm", "Bob", "tea", "Alice", "jazz"]
    names += ["coffee", "dark mode"]
    nodes = {
        name: EntityNode(
            uuid=_uid(i + 1),
            name=name,
            group_id=group,
            labels=["Person" if name in ("Retire User", "Bob", "Alice") else "Concept"],
            summary=f"{name}.",
            created_at=START - timedelta(days=1),
            name_embedding=deterministic_embedding(name),
        )
        for i, name in enumerate(names)
    }
    episodes: dict[str, EpisodicNode] = {}
    for i, (label, hours, text) in enumerate(
        [
            ("first", 0, "I live in Paris, I like jazz, Rust compiles to wasm."),
            ("moved", 1, "I moved to Berlin."),
            ("tea", 2, "Bob likes tea."),
            ("coffee", 3, "Bob prefers coffee."),
        ]
    ):
        at = START + timedelta(hours=hours)
        episodes[label] = EpisodicNode(
            uuid=_uid(100 + i),
            name=f"episode {label}",
            group_id=group,
            source=EpisodeType.message,
            source_description="chat thread retire-t1",
            content=text,
            created_at=at,
            valid_at=at,
        )

    def fact(
        n: int, src: str, rel: str, dst: str, text: str, episode: str, **kw: Any
    ) -> EntityEdge:
        ep = episodes[episode]
        return EntityEdge(
            uuid=_uid(n),
            source_node_uuid=nodes[src].uuid,
            target_node_uuid=nodes[dst].uuid,
            name=rel,
            fact=text,
            group_id=group,
            episodes=[ep.uuid],
            created_at=kw.pop("created_at", ep.created_at + timedelta(seconds=10)),
            valid_at=kw.pop("valid_at", ep.valid_at),
            fact_embedding=deterministic_embedding(text),
            attributes={"status": "active", "source_kind": "user_asserted"},
            **kw,
        )

    def retired_by(episode: str) -> dict[str, Any]:
        ep = episodes[episode]
        return {"invalid_at": ep.valid_at, "expired_at": ep.created_at + timedelta(seconds=30)}

    facts = [
        fact(
            201,
            "Retire User",
            "LIVES_IN",
            "Paris",
            "Retire User lives in Paris",
            "first",
            **retired_by("moved"),
        ),
        fact(
            202,
            "Rust",
            "COMPILES_TO",
            "wasm",
            "Rust compiles to wasm",
            "first",
            **retired_by("tea"),
        ),
        fact(
            203, "Alice", "PREFERS", "jazz", "Alice prefers jazz", "first", **retired_by("coffee")
        ),
        fact(204, "Retire User", "PREFERS", "dark mode", "Retire User prefers dark mode", "first"),
        fact(211, "Retire User", "LIVES_IN", "Berlin", "Retire User lives in Berlin", "moved"),
        fact(212, "Bob", "LIKES", "tea", "Bob likes tea", "tea"),
        fact(
            213,
            "Bob",
            "LIKED",
            "tea",
            "Bob liked tea in 2020",
            "tea",
            valid_at=START - timedelta(days=900),
            invalid_at=START - timedelta(days=600),
            expired_at=episodes["tea"].created_at + timedelta(seconds=20),
        ),
        fact(214, "Bob", "PREFERS", "coffee", "Bob prefers coffee", "coffee"),
    ]
    mentions = [
        EpisodicEdge(
            uuid=_uid(300 + i),
            source_node_uuid=ep.uuid,
            target_node_uuid=nodes["Retire User"].uuid,
            group_id=group,
            created_at=ep.created_at,
        )
        for i, ep in enumerate(episodes.values())
    ]
    create_indexes(client, group)
    write_graph(
        client,
        group,
        entities=list(nodes.values()),
        episodes=list(episodes.values()),
        mentions=mentions,
        facts=facts,
    )
    return RetireGraph(
        user_id=user_id,
        group_id=group,
        facts={
            "paris": _uid(201),
            "rust": _uid(202),
            "jazz": _uid(203),
            "dark": _uid(204),
            "berlin": _uid(211),
            "tea": _uid(212),
            "liked_tea": _uid(213),
            "coffee": _uid(214),
        },
        episodes={label: ep.uuid for label, ep in episodes.items()},
    )
