"""Demo memory for `yuxi-dash demo`: one Graphiti graph per demo user, plus hits and flags.

Every graph is built from graphiti-core's classes with precomputed,
deterministic embeddings (no LLM) and written in its true schema
(`yuxi_dash.memory.schema`). Each user gets a few hundred entities and facts:
all ratification statuses and source kinds, planted duplicates (same triple,
same fact text) and mirrored edges, communities, episodes with JSON envelopes
(memory_kind, source_kind; one over 64 KB for some users), Redis hit counters
at `mem:hits:{user_id}:{edge_uuid}`, and a LaunchDarkly flag file (Files data
source format) that gates some users off and turns communities on for some.
Deterministic per user id; `reset=True` drops the graphs first.

The graph tells the same story as the user's demo chats (`yuxi_dash.demo_story`):
its `user_asserted` facts are the user's own statements (each with the episode
that carries the statement as its provenance), so the "Memory vs chat" page
finds them supported, plus one planted `user_asserted` fact the user never said
and one `assistant_derived` fact restating what the assistant told them. The
other facts are `assistant_derived` or `tool_observed`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from graphiti_core.edges import CommunityEdge, EntityEdge, EpisodicEdge
from graphiti_core.nodes import CommunityNode, EntityNode, EpisodeType, EpisodicNode

from yuxi_dash.demo_story import planted_facts, user_statements
from yuxi_dash.memory.client import GraphClient, get_client, hits_connection
from yuxi_dash.memory.groups import derive_group_id
from yuxi_dash.memory.ratification import HITS_TTL_SECONDS, hits_key
from yuxi_dash.memory.schema import create_indexes, deterministic_embedding, write_graph
from yuxi_dash.settings import Settings

DEMO_FLAGS_FILE = Path(__file__).resolve().parent.parent / "demo_data" / "flags.json"
STATUSES = ("active", "tentative", "superseded", "contradicted", "retracted")
SOURCE_KINDS = ("user_asserted", "assistant_derived", "tool_observed")
# the filler facts: user_asserted ones come from what the user said (yuxi_dash.demo_story)
_FILLER_SOURCE_KINDS = ("assistant_derived", "tool_observed")
MEMORY_KINDS = ("fact", "preference", "rule", "finding", "plan", "event", "procedure")
ENTITY_LABELS = ("Person", "Organization", "Project", "Concept", "Preference", "Rule")
LARGE_EPISODE_CHARS = 70 * 1024

_VOCAB: dict[str, tuple[str, ...]] = {
    "Person": ("Maya", "Tom", "Sofia", "Ravi", "Ines", "Kenji", "Lucia", "Omar", "Petra", "Yann"),
    "Organization": ("Acme Corp", "Northwind", "Globex", "Initech", "Umbrella Labs", "Hooli"),
    "Project": ("Apollo migration", "billing revamp", "mobile app", "data lake", "onboarding flow"),
    "Concept": ("vector search", "rate limiting", "observability", "caching", "type hints"),
    "Preference": ("dark mode", "concise answers", "metric units", "Python examples", "tea"),
    "Rule": ("no meetings on Friday", "always cite sources", "never share keys", "UTC dates"),
}
_RELATIONS: dict[str, tuple[str, str]] = {
    # name: (target label, fact template)
    "WORKS_AT": ("Organization", "{s} works at {t}"),
    "WORKS_ON": ("Project", "{s} works on {t}"),
    "KNOWS": ("Person", "{s} knows {t}"),
    "INTERESTED_IN": ("Concept", "{s} is interested in {t}"),
    "PREFERS": ("Preference", "{s} prefers {t}"),
    "FOLLOWS_RULE": ("Rule", "{s} follows the rule: {t}"),
    "USES": ("Concept", "{s} uses {t}"),
}


@dataclass
class DemoGraph:
    """One user's demo records (graphiti-core objects) and the hit counters to set."""

    user_id: str
    group_id: str
    entities: list[EntityNode] = field(default_factory=list)
    episodes: list[EpisodicNode] = field(default_factory=list)
    mentions: list[EpisodicEdge] = field(default_factory=list)
    facts: list[EntityEdge] = field(default_factory=list)
    communities: list[CommunityNode] = field(default_factory=list)
    members: list[CommunityEdge] = field(default_factory=list)
    hits: dict[str, int] = field(default_factory=dict)


def _display_name(user_id: str) -> str:
    return " ".join(part.capitalize() for part in user_id.replace("-", "_").split("_") if part)


def _uuid(rng: random.Random) -> str:
    return "%08x-%04x-4%03x-8%03x-%012x" % (  # noqa: UP031 - a uuid4-shaped, seeded id
        rng.getrandbits(32),
        rng.getrandbits(16),
        rng.getrandbits(12),
        rng.getrandbits(12),
        rng.getrandbits(48),
    )


def build_demo_graph(
    user_id: str,
    *,
    now: datetime,
    entities: int = 180,
    facts: int = 300,
    episodes: int = 40,
    large_episode: bool = False,
    community_state: str = "stale",
) -> DemoGraph:
    """Build one user's graph deterministically (same user id -> same graph)."""
    rng = random.Random(f"yuxi-demo:{user_id}")
    group_id = derive_group_id(user_id)
    graph = DemoGraph(user_id=user_id, group_id=group_id)
    start = now - timedelta(days=120)

    def at(days_ago_max: float, days_ago_min: float = 0.0) -> datetime:
        return now - timedelta(days=rng.uniform(days_ago_min, days_ago_max))

    # The user first: internal node id 0, the hub (HAZARDS 1).
    user_name = _display_name(user_id)
    user_node = EntityNode(
        uuid=_uuid(rng),
        name=user_name,
        group_id=group_id,
        labels=["Person"],
        summary=f"{user_name} is the user of this assistant.",
        created_at=start,
        name_embedding=deterministic_embedding(user_name),
        attributes={"is_user": True},
    )
    graph.entities.append(user_node)
    statements = user_statements(user_id)
    planted = planted_facts(user_id)
    by_label: dict[str, list[EntityNode]] = {label: [] for label in ENTITY_LABELS}
    for index in range(entities - 1 - len(statements) - len(planted)):
        label = ENTITY_LABELS[index % len(ENTITY_LABELS)]
        base = _VOCAB[label][(index // len(ENTITY_LABELS)) % len(_VOCAB[label])]
        round_no = index // (len(ENTITY_LABELS) * len(_VOCAB[label]))
        name = base if round_no == 0 else f"{base} {round_no + 1}"
        node = EntityNode(
            uuid=_uuid(rng),
            name=name,
            group_id=group_id,
            labels=[label],
            summary=f"{name} ({label.lower()}) as mentioned by {user_name}.",
            created_at=at(118, 1),
            name_embedding=deterministic_embedding(f"{user_id}:{name}"),
        )
        graph.entities.append(node)
        by_label[label].append(node)

    # The story (yuxi_dash.demo_story): what the user said, and what they never said.
    story_rng = random.Random(f"yuxi-demo-story:{user_id}")
    story_targets: list[EntityNode] = []
    for label, name in [(st.label, st.target) for st in statements] + [
        (p.label, p.target) for p in planted
    ]:
        node = EntityNode(
            uuid=_uuid(story_rng),
            name=name,
            group_id=group_id,
            labels=[label],
            summary=f"{name} ({label.lower()}) as mentioned by {user_name}.",
            created_at=now - timedelta(days=story_rng.uniform(2, 30)),
            name_embedding=deterministic_embedding(f"{user_id}:{name}"),
        )
        graph.entities.append(node)
        story_targets.append(node)
    # the latest user_asserted envelopes carry the statements (never the large episode)
    said_at = [
        i
        for i in range(episodes)
        if SOURCE_KINDS[i % len(SOURCE_KINDS)] == "user_asserted"
        and i % 9 != 8
        and not (large_episode and i == episodes - 3)
    ][-len(statements) :]
    said = dict(zip(said_at, statements, strict=False))
    said_target = dict(zip(said_at, story_targets, strict=False))

    # Episodes: JSON envelopes carrying memory_kind and source_kind (a few plain messages).
    for index in range(episodes):
        created = now - timedelta(days=(episodes - index) * 2.5, minutes=rng.randint(0, 600))
        kind = SOURCE_KINDS[index % len(SOURCE_KINDS)]
        memory_kind = MEMORY_KINDS[index % len(MEMORY_KINDS)]
        topic = graph.entities[1 + (index * 7) % (len(graph.entities) - 1)]
        text = f"{user_name} talked about {topic.name}."
        if index in said:
            memory_kind, text = said[index].memory_kind, said[index].said
        if index % 9 == 8:
            source, content = EpisodeType.message, f"user: {text}"
        else:
            envelope = {"memory_kind": memory_kind, "source_kind": kind, "content": text}
            if large_episode and index == episodes - 3:
                envelope["content"] = (text + " ") * (LARGE_EPISODE_CHARS // len(text) + 1)
            source, content = EpisodeType.json, json.dumps(envelope)
        episode = EpisodicNode(
            uuid=_uuid(rng),
            name=f"episode {index + 1}",
            group_id=group_id,
            source=source,
            source_description=f"chat thread {user_id}-t{index % 3 + 1}",
            content=content,
            created_at=created,
            valid_at=created,
        )
        graph.episodes.append(episode)
        mentioned = {user_node.uuid: user_node, topic.uuid: topic}
        if index in said_target:
            mentioned[said_target[index].uuid] = said_target[index]
        for _ in range(rng.randint(1, 4)):
            other = rng.choice(graph.entities)
            mentioned[other.uuid] = other
        for node in mentioned.values():
            graph.mentions.append(
                EpisodicEdge(
                    uuid=_uuid(rng),
                    source_node_uuid=episode.uuid,
                    target_node_uuid=node.uuid,
                    group_id=group_id,
                    created_at=created,
                )
            )

    def make_fact(
        source: EntityNode,
        name: str,
        target: EntityNode,
        *,
        index: int,
        fact: str | None = None,
        status: str | None = None,
        source_kind: str | None = None,
        created: datetime | None = None,
        episode: EpisodicNode | None = None,
    ) -> EntityEdge:
        template = _RELATIONS.get(name, ("", "{s} relates to {t}"))[1]
        text = fact or template.format(s=source.name, t=target.name)
        status = status if status is not None else _status_for(index)
        created = created or at(110, 0.5)
        episode = episode or graph.episodes[index % len(graph.episodes)]
        attributes: dict[str, Any] = {
            "confidence": round(rng.uniform(0.4, 0.99), 2),
            "source_kind": source_kind
            or _FILLER_SOURCE_KINDS[(index // 2) % len(_FILLER_SOURCE_KINDS)],
            "scope": "user" if index % 4 else "thread",
            "provenance": episode.uuid,
            "recall_count": rng.randint(0, 12),
        }
        if status:  # a few facts predate ratification and carry no status
            attributes["status"] = status
        valid_at: datetime | None = created - timedelta(days=rng.uniform(0, 5))
        invalid_at = expired_at = None
        if status == "active":
            attributes["ratified_at"] = (created + timedelta(days=1)).isoformat()
            attributes["last_recalled_at"] = at(10).isoformat()
        if status in ("superseded", "contradicted"):
            invalid_at = created + timedelta(days=rng.uniform(1, 20))
            expired_at = invalid_at
        if status == "retracted":
            attributes["forgotten_at"] = (created + timedelta(days=2)).isoformat()
        if index % 13 == 0:
            valid_at = None  # unknown validity start
        return EntityEdge(
            uuid=_uuid(rng),
            source_node_uuid=source.uuid,
            target_node_uuid=target.uuid,
            name=name,
            fact=text,
            group_id=group_id,
            episodes=[episode.uuid],
            created_at=created,
            valid_at=valid_at,
            invalid_at=invalid_at,
            expired_at=expired_at,
            fact_embedding=deterministic_embedding(f"{user_id}:{text}:{index}"),
            attributes=attributes,
        )

    relation_names = list(_RELATIONS)
    for index in range(facts):
        name = relation_names[index % len(relation_names)]
        target_label = _RELATIONS[name][0]
        target = rng.choice(by_label[target_label])
        # Half the facts hang off the user (the hub), the rest between other entities.
        if index % 2 == 0:
            source = user_node
        else:
            source = rng.choice(by_label["Person"] + by_label["Organization"] + by_label["Project"])
            if source.uuid == target.uuid:
                source = user_node
        graph.facts.append(make_fact(source, name, target, index=index))

    # Tentative facts with known ages for the ratification pass: recent, old with hits, old without.
    tentative_specs = [(2, 3), (5, 0), (40, 0), (45, 2), (60, 0), (90, 1), (35, 0), (12, 0)]
    for offset, (days_old, hits) in enumerate(tentative_specs):
        target = by_label["Concept"][offset % len(by_label["Concept"])]
        edge = make_fact(
            user_node,
            "INTERESTED_IN",
            target,
            index=facts + offset,
            status="tentative",
            source_kind="assistant_derived",
            created=now - timedelta(days=days_old),
        )
        graph.facts.append(edge)
        if hits:
            graph.hits[edge.uuid] = hits
    for edge in graph.facts:
        if edge.attributes.get("status") == "tentative" and edge.uuid not in graph.hits:
            if rng.random() < 0.3:
                graph.hits[edge.uuid] = rng.randint(1, 4)

    # Planted duplicates: the same triple twice, and the same fact text on other nodes.
    extra = facts + len(tentative_specs)
    for offset in range(4):
        original = graph.facts[2 * offset]
        source = next(n for n in graph.entities if n.uuid == original.source_node_uuid)
        target = next(n for n in graph.entities if n.uuid == original.target_node_uuid)
        graph.facts.append(
            make_fact(source, original.name, target, index=extra + offset, fact=original.fact)
        )
    for offset in range(3):
        original = graph.facts[2 * offset + 1]
        other = by_label["Person"][offset + 1]
        target = by_label["Concept"][offset]
        graph.facts.append(
            make_fact(other, "USES", target, index=extra + 10 + offset, fact=original.fact)
        )
    # Mirrored edges: A KNOWS B and B KNOWS A.
    for offset in range(3):
        a = by_label["Person"][offset]
        b = by_label["Person"][offset + 4]
        graph.facts.append(make_fact(a, "KNOWS", b, index=extra + 20 + 2 * offset, status="active"))
        graph.facts.append(make_fact(b, "KNOWS", a, index=extra + 21 + 2 * offset, status="active"))

    # Communities: by label, created at a point that makes the rebuild decision vary by user.
    if community_state != "none":
        if community_state == "fresh":
            community_at = graph.episodes[-1].created_at + timedelta(minutes=5)
        elif community_state == "few_new":
            community_at = graph.episodes[-3].created_at - timedelta(minutes=5)
        else:  # stale: well over the threshold of new episodes since
            community_at = graph.episodes[len(graph.episodes) // 2].created_at
        for label in ("Person", "Project", "Concept", "Preference"):
            members = by_label[label][: rng.randint(5, 14)]
            community = CommunityNode(
                uuid=_uuid(rng),
                name=f"{label} cluster of {user_name}",
                group_id=group_id,
                summary=f"{label} entities around {user_name}: "
                + ", ".join(m.name for m in members[:5]),
                created_at=community_at,
                name_embedding=deterministic_embedding(f"{user_id}:community:{label}"),
            )
            graph.communities.append(community)
            for member in members:
                graph.members.append(
                    CommunityEdge(
                        uuid=_uuid(rng),
                        source_node_uuid=community.uuid,
                        target_node_uuid=member.uuid,
                        group_id=group_id,
                        created_at=community_at,
                    )
                )

    # The story's facts: each statement from the episode that says it, then the planted ones.
    story_index = extra + 40
    for offset, (statement, target) in enumerate(zip(statements, story_targets, strict=False)):
        episode = graph.episodes[said_at[offset]] if offset < len(said_at) else None
        graph.facts.append(
            make_fact(
                user_node,
                statement.relation,
                target,
                index=story_index + offset,
                fact=statement.fact_for(user_name),
                status="active",
                source_kind="user_asserted",
                created=(episode.created_at if episode else now - timedelta(days=6))
                + timedelta(minutes=story_rng.randint(1, 30)),
                episode=episode,
            )
        )
    derived = [e for i, e in enumerate(graph.episodes) if i % len(SOURCE_KINDS) == 1]
    for offset, (fact, target) in enumerate(
        zip(planted, story_targets[len(statements) :], strict=True)
    ):
        graph.facts.append(
            make_fact(
                user_node,
                fact.relation,
                target,
                index=story_index + len(statements) + offset,
                fact=fact.fact_for(user_name),
                status="active",
                source_kind=fact.source_kind,
                created=now - timedelta(days=2 + offset, minutes=story_rng.randint(0, 600)),
                episode=derived[-1 - offset] if derived else None,
            )
        )
    return graph


def _status_for(index: int) -> str:
    """active 54%, tentative 20%, superseded 10%, contradicted 8%, retracted 6%, unset 2%."""
    slot = index % 50
    for bound, status in (
        (27, "active"),
        (37, "tentative"),
        (42, "superseded"),
        (46, "contradicted"),
        (49, "retracted"),
    ):
        if slot < bound:
            return status
    return ""


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


def demo_flags(user_ids: Sequence[str]) -> dict[str, Any]:
    """A LaunchDarkly Files data source: memory on except every 7th user, communities for half."""
    gated_off = [u for i, u in enumerate(user_ids) if i % 7 == 3]
    communities_on = [u for i, u in enumerate(user_ids) if i % 2 == 0]

    def flag(key: str, targets_true: list[str], targets_false: list[str], default: bool) -> dict:
        targets = []
        if targets_true:
            targets.append({"values": targets_true, "variation": 0})
        if targets_false:
            targets.append({"values": targets_false, "variation": 1})
        return {
            "key": key,
            "on": True,
            "variations": [True, False],
            "targets": targets,
            "contextTargets": [],
            "rules": [],
            "prerequisites": [],
            "fallthrough": {"variation": 0 if default else 1},
            "offVariation": 1,
            "salt": f"yuxi-demo-{key}",
            "version": 1,
            "trackEvents": False,
            "clientSide": False,
        }

    return {
        "flags": {
            "graphiti-memory": flag("graphiti-memory", [], gated_off, True),
            "graphiti-communities-enabled": flag(
                "graphiti-communities-enabled", communities_on, [], False
            ),
        },
        "segments": {},
    }


def write_demo_flags(user_ids: Sequence[str], path: Path) -> Path:
    """Write the demo flag file for `user_ids` to `path` (the shipped one is DEMO_FLAGS_FILE)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(demo_flags(list(user_ids)), indent=2) + "\n")
    return path


def seed_demo_graphs(
    settings: Settings,
    user_ids: Sequence[str],
    *,
    reset: bool = False,
    client: GraphClient | None = None,
    flags_path: Path | None = None,
) -> dict[str, Any]:
    """Seed every user's graph and the hit counters; idempotent.

    The flag file is written only when `flags_path` is given: the demo's own
    file ships with the package (DEMO_FLAGS_FILE) and is never rewritten here.
    """
    client = client or get_client(settings)
    hits = hits_connection(settings)
    now = datetime.now(UTC).replace(microsecond=0)
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
                entities=150 + (index * 17) % 120,
                facts=220 + (index * 29) % 200,
                episodes=30 + index % 20,
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
