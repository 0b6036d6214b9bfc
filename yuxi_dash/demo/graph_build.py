"""One demo user's Graphiti graph, built in memory from graphiti-core's classes.

Owns `build_demo_graph` and the `DemoGraph` it returns: a few hundred entities
and facts with precomputed, deterministic embeddings (no LLM), all ratification
statuses and source kinds, planted duplicates (same triple, same fact text) and
mirrored edges, communities, episodes with JSON envelopes (memory_kind,
source_kind; one over 64 KB when asked), and the Redis hit counts of tentative
facts. Deterministic per user id.

The graph tells the same story as the user's demo chats (`yuxi_dash.demo.story`):
its `user_asserted` facts are the user's own statements (each with the episode
that carries the statement as its provenance), so the "Memory vs chat" page
finds them supported, plus one planted `user_asserted` fact the user never said
and one `assistant_derived` fact restating what the assistant told them
(`yuxi_dash.demo.plan.planted_facts`). The other facts are `assistant_derived`
or `tool_observed`.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from graphiti_core.edges import CommunityEdge, EntityEdge, EpisodicEdge
from graphiti_core.nodes import CommunityNode, EntityNode, EpisodeType, EpisodicNode

from yuxi_dash.demo.plan import planted_facts
from yuxi_dash.demo.story import PlantedFact, Statement, user_statements
from yuxi_dash.memory.groups import derive_group_id
from yuxi_dash.memory.schema import deterministic_embedding

STATUSES = ("active", "tentative", "superseded", "contradicted", "retracted")
SOURCE_KINDS = ("user_asserted", "assistant_derived", "tool_observed")
# the filler facts: user_asserted ones come from what the user said (yuxi_dash.demo.story)
_FILLER_SOURCE_KINDS = ("assistant_derived", "tool_observed")
MEMORY_KINDS = ("fact", "preference", "rule", "finding", "plan", "event", "procedure")
ENTITY_LABELS = ("Person", "Organization", "Project", "Concept", "Preference", "Rule")
LARGE_EPISODE_CHARS = 70 * 1024
# (days old, Redis hits) of the tentative facts the ratification pass decides on:
# recent, old with hits, old without
_TENTATIVE_AGES = ((2, 3), (5, 0), (40, 0), (45, 2), (60, 0), (90, 1), (35, 0), (12, 0))

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


class _GraphBuilder:
    """Builds one user's graph, part by part, from one seeded generator.

    The parts run in a fixed order and draw from the generator in that order,
    so the same user id gives the same graph. The story's parts draw from a
    generator of their own.
    """

    def __init__(self, user_id: str, now: datetime) -> None:
        self.user_id = user_id
        self.now = now
        self.rng = random.Random(f"yuxi-demo:{user_id}")
        self.story_rng = random.Random(f"yuxi-demo-story:{user_id}")
        self.group_id = derive_group_id(user_id)
        self.user_name = _display_name(user_id)
        self.graph = DemoGraph(user_id=user_id, group_id=self.group_id)
        self.statements: tuple[Statement, ...] = user_statements(user_id)
        self.planted: tuple[PlantedFact, ...] = planted_facts(user_id)
        self.by_label: dict[str, list[EntityNode]] = {label: [] for label in ENTITY_LABELS}
        self.story_targets: list[EntityNode] = []
        self.said_at: list[int] = []  # the index of the episode that carries each statement
        self.user_node = self._add_user()

    def _at(self, days_ago_max: float, days_ago_min: float = 0.0) -> datetime:
        return self.now - timedelta(days=self.rng.uniform(days_ago_min, days_ago_max))

    def _entity(self, uuid: str, name: str, label: str, created_at: datetime) -> EntityNode:
        return EntityNode(
            uuid=uuid,
            name=name,
            group_id=self.group_id,
            labels=[label],
            summary=f"{name} ({label.lower()}) as mentioned by {self.user_name}.",
            created_at=created_at,
            name_embedding=deterministic_embedding(f"{self.user_id}:{name}"),
        )

    def _add_user(self) -> EntityNode:
        """The user, written first: FalkorDB gives it internal node id 0, and it is the hub.

        After a restart a relationship-index scan loses exactly the outgoing edges
        of node 0, so the demo's user is where the index-drift check has work to do.
        """
        node = EntityNode(
            uuid=_uuid(self.rng),
            name=self.user_name,
            group_id=self.group_id,
            labels=["Person"],
            summary=f"{self.user_name} is the user of this assistant.",
            created_at=self.now - timedelta(days=120),
            name_embedding=deterministic_embedding(self.user_name),
            attributes={"is_user": True},
        )
        self.graph.entities.append(node)
        return node

    def add_filler_entities(self, total: int) -> None:
        """Entities cycling through the labels and their vocabulary, up to `total` with the story's."""
        for index in range(total - 1 - len(self.statements) - len(self.planted)):
            label = ENTITY_LABELS[index % len(ENTITY_LABELS)]
            base = _VOCAB[label][(index // len(ENTITY_LABELS)) % len(_VOCAB[label])]
            round_no = index // (len(ENTITY_LABELS) * len(_VOCAB[label]))
            name = base if round_no == 0 else f"{base} {round_no + 1}"
            uuid = _uuid(self.rng)
            node = self._entity(uuid, name, label, self._at(118, 1))
            self.graph.entities.append(node)
            self.by_label[label].append(node)

    def add_story_entities(self) -> None:
        """The targets of what the user said, then of what they never said and were told."""
        targets = [(st.label, st.target) for st in self.statements]
        targets += [(p.label, p.target) for p in self.planted]
        for label, name in targets:
            uuid = _uuid(self.story_rng)
            created = self.now - timedelta(days=self.story_rng.uniform(2, 30))
            node = self._entity(uuid, name, label, created)
            self.graph.entities.append(node)
            self.story_targets.append(node)

    def add_episodes(self, count: int, *, large_episode: bool) -> None:
        """JSON envelopes carrying memory_kind and source_kind (every 9th a plain message).

        The latest user_asserted envelopes carry the statements (never the large one).
        """
        large_at = count - 3 if large_episode else None
        self.said_at = [
            i
            for i in range(count)
            if SOURCE_KINDS[i % len(SOURCE_KINDS)] == "user_asserted"
            and i % 9 != 8
            and i != large_at
        ][-len(self.statements) :]
        said = dict(zip(self.said_at, self.statements, strict=False))
        said_target = dict(zip(self.said_at, self.story_targets, strict=False))
        entities = self.graph.entities
        for index in range(count):
            created = self.now - timedelta(
                days=(count - index) * 2.5, minutes=self.rng.randint(0, 600)
            )
            topic = entities[1 + (index * 7) % (len(entities) - 1)]
            memory_kind = MEMORY_KINDS[index % len(MEMORY_KINDS)]
            text = f"{self.user_name} talked about {topic.name}."
            if index in said:
                memory_kind, text = said[index].memory_kind, said[index].said
            episode = self._episode(index, created, memory_kind, text, large=index == large_at)
            self.graph.episodes.append(episode)
            mentioned = {self.user_node.uuid: self.user_node, topic.uuid: topic}
            if index in said_target:
                mentioned[said_target[index].uuid] = said_target[index]
            self._add_mentions(episode, mentioned)

    def _episode(
        self, index: int, created: datetime, memory_kind: str, text: str, *, large: bool
    ) -> EpisodicNode:
        if index % 9 == 8:
            source, content = EpisodeType.message, f"user: {text}"
        else:
            kind = SOURCE_KINDS[index % len(SOURCE_KINDS)]
            envelope = {"memory_kind": memory_kind, "source_kind": kind, "content": text}
            if large:
                envelope["content"] = (text + " ") * (LARGE_EPISODE_CHARS // len(text) + 1)
            source, content = EpisodeType.json, json.dumps(envelope)
        return EpisodicNode(
            uuid=_uuid(self.rng),
            name=f"episode {index + 1}",
            group_id=self.group_id,
            source=source,
            source_description=f"chat thread {self.user_id}-t{index % 3 + 1}",
            content=content,
            created_at=created,
            valid_at=created,
        )

    def _add_mentions(self, episode: EpisodicNode, mentioned: dict[str, EntityNode]) -> None:
        """The episode mentions `mentioned` and one to four entities picked at random."""
        for _ in range(self.rng.randint(1, 4)):
            other = self.rng.choice(self.graph.entities)
            mentioned[other.uuid] = other
        for node in mentioned.values():
            self.graph.mentions.append(
                EpisodicEdge(
                    uuid=_uuid(self.rng),
                    source_node_uuid=episode.uuid,
                    target_node_uuid=node.uuid,
                    group_id=self.group_id,
                    created_at=episode.created_at,
                )
            )

    def fact(
        self,
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
        """One RELATES_TO fact; status, source kind, time and episode follow `index` unless given."""
        rng = self.rng
        template = _RELATIONS.get(name, ("", "{s} relates to {t}"))[1]
        text = fact or template.format(s=source.name, t=target.name)
        status = status if status is not None else _status_for(index)
        created = created or self._at(110, 0.5)
        episode = episode or self.graph.episodes[index % len(self.graph.episodes)]
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
            attributes["last_recalled_at"] = self._at(10).isoformat()
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
            group_id=self.group_id,
            episodes=[episode.uuid],
            created_at=created,
            valid_at=valid_at,
            invalid_at=invalid_at,
            expired_at=expired_at,
            fact_embedding=deterministic_embedding(f"{self.user_id}:{text}:{index}"),
            attributes=attributes,
        )

    def add_filler_facts(self, count: int) -> None:
        """Half the facts hang off the user (the hub), the rest between other entities."""
        by_label = self.by_label
        relation_names = list(_RELATIONS)
        for index in range(count):
            name = relation_names[index % len(relation_names)]
            target = self.rng.choice(by_label[_RELATIONS[name][0]])
            if index % 2 == 0:
                source = self.user_node
            else:
                sources = by_label["Person"] + by_label["Organization"] + by_label["Project"]
                source = self.rng.choice(sources)
                if source.uuid == target.uuid:
                    source = self.user_node
            self.graph.facts.append(self.fact(source, name, target, index=index))

    def add_tentative_facts(self, first_index: int) -> None:
        """Tentative facts of known ages and hits, then random hits on other tentative facts."""
        concepts = self.by_label["Concept"]
        for offset, (days_old, hits) in enumerate(_TENTATIVE_AGES):
            edge = self.fact(
                self.user_node,
                "INTERESTED_IN",
                concepts[offset % len(concepts)],
                index=first_index + offset,
                status="tentative",
                source_kind="assistant_derived",
                created=self.now - timedelta(days=days_old),
            )
            self.graph.facts.append(edge)
            if hits:
                self.graph.hits[edge.uuid] = hits
        for edge in self.graph.facts:
            if edge.attributes.get("status") == "tentative" and edge.uuid not in self.graph.hits:
                if self.rng.random() < 0.3:
                    self.graph.hits[edge.uuid] = self.rng.randint(1, 4)

    def add_duplicates(self, first_index: int) -> None:
        """The same triple twice, and the same fact text on other nodes."""
        facts, by_label = self.graph.facts, self.by_label
        nodes = {node.uuid: node for node in self.graph.entities}
        for offset in range(4):
            original = facts[2 * offset]
            source, target = nodes[original.source_node_uuid], nodes[original.target_node_uuid]
            index = first_index + offset
            facts.append(self.fact(source, original.name, target, index=index, fact=original.fact))
        for offset in range(3):
            original = facts[2 * offset + 1]
            other, target = by_label["Person"][offset + 1], by_label["Concept"][offset]
            index = first_index + 10 + offset
            facts.append(self.fact(other, "USES", target, index=index, fact=original.fact))

    def add_mirrored_facts(self, first_index: int) -> None:
        """A KNOWS B and B KNOWS A, three times."""
        people = self.by_label["Person"]
        for offset in range(3):
            a, b = people[offset], people[offset + 4]
            index = first_index + 2 * offset
            self.graph.facts.append(self.fact(a, "KNOWS", b, index=index, status="active"))
            self.graph.facts.append(self.fact(b, "KNOWS", a, index=index + 1, status="active"))

    def add_communities(self, state: str) -> None:
        """Communities by label, built at a time that makes the rebuild decision vary by user.

        `state`: none (no communities), fresh (after the last episode), few_new
        (a few episodes since) or stale (well over the rebuild threshold since).
        """
        if state == "none":
            return
        episodes = self.graph.episodes
        if state == "fresh":
            community_at = episodes[-1].created_at + timedelta(minutes=5)
        elif state == "few_new":
            community_at = episodes[-3].created_at - timedelta(minutes=5)
        else:
            community_at = episodes[len(episodes) // 2].created_at
        for label in ("Person", "Project", "Concept", "Preference"):
            members = self.by_label[label][: self.rng.randint(5, 14)]
            community = CommunityNode(
                uuid=_uuid(self.rng),
                name=f"{label} cluster of {self.user_name}",
                group_id=self.group_id,
                summary=f"{label} entities around {self.user_name}: "
                + ", ".join(m.name for m in members[:5]),
                created_at=community_at,
                name_embedding=deterministic_embedding(f"{self.user_id}:community:{label}"),
            )
            self.graph.communities.append(community)
            for member in members:
                self.graph.members.append(
                    CommunityEdge(
                        uuid=_uuid(self.rng),
                        source_node_uuid=community.uuid,
                        target_node_uuid=member.uuid,
                        group_id=self.group_id,
                        created_at=community_at,
                    )
                )

    def add_story_facts(self, first_index: int) -> None:
        """Each statement, from the episode that says it; then the planted facts."""
        episodes = self.graph.episodes
        statements, targets = self.statements, self.story_targets
        for offset, (statement, target) in enumerate(zip(statements, targets, strict=False)):
            episode = episodes[self.said_at[offset]] if offset < len(self.said_at) else None
            said = episode.created_at if episode else self.now - timedelta(days=6)
            self.graph.facts.append(
                self.fact(
                    self.user_node,
                    statement.relation,
                    target,
                    index=first_index + offset,
                    fact=statement.fact_for(self.user_name),
                    status="active",
                    source_kind="user_asserted",
                    created=said + timedelta(minutes=self.story_rng.randint(1, 30)),
                    episode=episode,
                )
            )
        derived = [e for i, e in enumerate(episodes) if i % len(SOURCE_KINDS) == 1]
        planted_targets = targets[len(statements) :]
        for offset, (fact, target) in enumerate(zip(self.planted, planted_targets, strict=True)):
            minutes = self.story_rng.randint(0, 600)
            self.graph.facts.append(
                self.fact(
                    self.user_node,
                    fact.relation,
                    target,
                    index=first_index + len(statements) + offset,
                    fact=fact.fact_for(self.user_name),
                    status="active",
                    source_kind=fact.source_kind,
                    created=self.now - timedelta(days=2 + offset, minutes=minutes),
                    episode=derived[-1 - offset] if derived else None,
                )
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
    builder = _GraphBuilder(user_id, now)
    builder.add_filler_entities(entities)
    builder.add_story_entities()
    builder.add_episodes(episodes, large_episode=large_episode)
    builder.add_filler_facts(facts)
    builder.add_tentative_facts(facts)
    extra = facts + len(_TENTATIVE_AGES)
    builder.add_duplicates(extra)
    builder.add_mirrored_facts(extra + 20)
    builder.add_communities(community_state)
    builder.add_story_facts(extra + 40)
    return builder.graph
