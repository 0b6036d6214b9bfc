"""A memory graph with known provenance, for assistant-only facts.

`plant_words(client)` writes, with graphiti-core's classes (`demo.graph_writer.write_graph`),
user `words_user`: episodes of every kind a speaker is told by (JSON envelopes with a
`source_kind` or a `role`, "role: " messages, plain text, a long envelope whose
`source_kind` comes after 6,000 characters of content) and facts over them, live and not.
`EXPECTED` is each live fact's basis under the rule of `memory.quality.assistant_only`;
the facts not live are listed in `NOT_LIVE`. Assistant-only facts 2, 3 and 5 were created
on day 1, the others on day 3 (`DAY_2` splits them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from graphiti_core.edges import EntityEdge
from graphiti_core.nodes import EntityNode, EpisodeType, EpisodicNode

from yuxi_dash.demo.graph_writer import create_indexes, deterministic_embedding, write_graph
from yuxi_dash.memory.graph.client import GraphClient
from yuxi_dash.memory.graph.groups import derive_group_id

WORDS_USER = "words_user"
START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
DAY_2 = START + timedelta(days=1)

# fact number -> its basis (live facts only)
EXPECTED = {
    1: "user_asserted",
    2: "assistant_only",
    3: "assistant_only",
    4: "user_episode",
    5: "assistant_only",
    6: "unknown",
    7: "assistant_only",
    8: "unknown",
    9: "operator_corrected",
    10: "assistant_only",
    11: "user_episode",
    12: "unknown",  # tool_observed, but its episode is missing
    13: "user_asserted",
}
NOT_LIVE = (14, 15, 16, 17)
EARLY = (2, 3, 5)  # the assistant-only facts created before DAY_2


def uid(n: int) -> str:
    return f"00000000-0000-4000-9000-{n:012d}"


@dataclass
class WordsGraph:
    user_id: str
    group_id: str
    facts: dict[int, str] = field(default_factory=dict)  # number -> uuid

    def uuids(self, numbers: tuple[int, ...] | list[int]) -> list[str]:
        return [self.facts[n] for n in numbers]


def _envelope(**fields: Any) -> str:
    return json.dumps(fields)


def _episode(n: int, group: str, content: str, source: EpisodeType) -> EpisodicNode:
    return EpisodicNode(
        uuid=uid(100 + n),
        name=f"episode {n}",
        group_id=group,
        source=source,
        source_description="chat thread words-t1",
        content=content,
        created_at=START,
        valid_at=START,
    )


def plant_words(client: GraphClient, user_id: str = WORDS_USER) -> WordsGraph:
    group = derive_group_id(user_id)
    client.delete_graph(group)
    user = EntityNode(
        uuid=uid(1),
        name="Words User",
        group_id=group,
        labels=["Person"],
        summary="Words User.",
        created_at=START,
        name_embedding=deterministic_embedding("Words User"),
        attributes={"is_user": True},
    )
    thing = EntityNode(
        uuid=uid(2),
        name="Lisbon",
        group_id=group,
        labels=["Place"],
        summary="Lisbon.",
        created_at=START,
        name_embedding=deterministic_embedding("Lisbon"),
    )
    js, msg, text = EpisodeType.json, EpisodeType.message, EpisodeType.text
    episodes = {
        "user": _episode(1, group, _envelope(source_kind="user_asserted", content="I moved"), js),
        "assistant": _episode(
            2, group, _envelope(source_kind="assistant_derived", content="You moved"), js
        ),
        "tool": _episode(3, group, _envelope(source_kind="tool_observed", content="ip: PT"), js),
        "said_assistant": _episode(4, group, "assistant: Lisbon is lovely.", msg),
        "said_user": _episode(5, group, "user: I live in Lisbon now.", msg),
        "plain": _episode(6, group, "A note about Lisbon.", text),
        "long": _episode(
            7, group, _envelope(content="x" * 6000, source_kind="assistant_derived"), js
        ),
        "role_user": _episode(8, group, _envelope(role="user", content="Lisbon it is."), js),
    }
    ep = {name: e.uuid for name, e in episodes.items()}
    missing = uid(199)
    day1, day3 = START + timedelta(hours=2), START + timedelta(days=2)
    # number: (source kind, episodes, created, attributes); 14 and 16 get invalid_at, 14 expired_at
    plan: dict[int, tuple[str | None, list[str], datetime, dict[str, Any]]] = {
        1: ("user_asserted", [ep["user"]], day1, {"status": "active"}),
        2: ("assistant_derived", [ep["assistant"]], day1, {"status": "active"}),
        3: ("tool_observed", [ep["tool"]], day1 + timedelta(minutes=1), {"status": "tentative"}),
        4: ("assistant_derived", [ep["said_user"]], day1, {"status": "active"}),
        5: ("assistant_derived", [], day1 + timedelta(minutes=2), {}),
        6: (None, [], day3, {"status": "active"}),
        7: (None, [ep["said_assistant"], ep["tool"]], day3, {"status": "active"}),
        8: (None, [ep["said_assistant"], ep["plain"]], day3, {"status": "active"}),
        9: ("operator_corrected", [], day3, {"status": "active"}),
        10: (None, [ep["long"]], day3 + timedelta(minutes=1), {"status": "active"}),
        11: ("assistant_derived", [ep["role_user"]], day3, {"status": "active"}),
        12: ("tool_observed", [missing], day3 + timedelta(minutes=2), {"status": "active"}),
        13: ("user_asserted", [ep["assistant"]], day3, {"status": "active"}),
        14: ("assistant_derived", [ep["assistant"]], day1, {"status": "superseded"}),
        15: (
            "assistant_derived",
            [ep["assistant"]],
            day1,
            {"status": "retracted", "forgotten_at": day3.isoformat()},
        ),
        16: ("assistant_derived", [ep["assistant"]], day1, {"status": "active"}),
        17: ("assistant_derived", [ep["assistant"]], day1, {"status": "rejected"}),
    }
    facts = []
    for n, (kind, eps, created, extra) in plan.items():
        attributes = dict(extra)
        if kind is not None:
            attributes["source_kind"] = kind
        text = f"Words User fact {n} about Lisbon"
        facts.append(
            EntityEdge(
                uuid=uid(200 + n),
                source_node_uuid=user.uuid,
                target_node_uuid=thing.uuid,
                name="ABOUT",
                fact=text,
                group_id=group,
                episodes=eps,
                created_at=created,
                valid_at=created,
                invalid_at=day3 if n in (14, 16) else None,
                expired_at=day3 if n == 14 else None,
                fact_embedding=deterministic_embedding(text),
                attributes=attributes,
            )
        )
    create_indexes(client, group)
    write_graph(
        client, group, entities=[user, thing], episodes=list(episodes.values()), facts=facts
    )
    return WordsGraph(user_id, group, {n: uid(200 + n) for n in plan})
