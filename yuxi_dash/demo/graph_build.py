"""One demo user's Graphiti graph, built in memory from that user's own demo chat messages.

Owns `build_demo_graph` and the `DemoGraph` it returns. Each message of the first
turn of each of the user's threads (`yuxi_dash.demo.plan.first_exchanges`, word
for word) is an episode naming its thread, so a fact's provenance finds it:
`user_asserted` facts come from the user's message (plus a planted one the user never
said, `planted_facts`), `assistant_derived` facts from the answer's points,
`tool_observed` facts from its last point. Each episode is dated when its message was
written, so no fact predates its message; a tentative fact older than every recorded
message comes from an earlier session the record no longer holds (a stand-in user's
episodes: the last 100 days). Every fact's text names its source and target. It holds
the variety the memory pages need: every ratification status, duplicates, mirrored
edges, communities, one episode over 64 KB when asked. No time lies after `now`.
Deterministic per user id.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from graphiti_core.edges import CommunityEdge, EntityEdge, EpisodicEdge
from graphiti_core.nodes import CommunityNode, EntityNode, EpisodeType, EpisodicNode

from yuxi_dash.demo.clock import story_clock
from yuxi_dash.demo.graph_writer import deterministic_embedding
from yuxi_dash.demo.plan import FirstExchange, first_exchanges, planted_facts
from yuxi_dash.memory.graph.groups import derive_group_id
from yuxi_dash.sim.story import Statement, told_fact, user_statements

LARGE_EPISODE_CHARS = 70 * 1024
_COMMUNITY_LABELS = ("Person", "Project", "Concept", "Preference")  # every user has these
ASSISTANT_NAME = "Yuxi assistant"
# (days old, Redis hits) of the tentative facts the ratification pass decides on:
# recent, old with hits, old without
_TENTATIVE_AGES = ((2, 3), (5, 0), (40, 0), (45, 2), (60, 0), (90, 1), (35, 0), (12, 0))
# the statuses the other assistant_derived and tool_observed facts take in turn ("" = unset)
_STATUS_CYCLE = ("active", "superseded", "active", "contradicted", "retracted", "active", "")
# the exchanges' episodes span these many days ago (oldest, newest)
_EXCHANGE_SPAN = (100.0, 3.0)


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


def _unique(items: tuple[str, ...]) -> list[str]:
    return list(dict.fromkeys(items))


@dataclass
class _Said:
    """One message as an episode, and when it was said."""

    episode: EpisodicNode
    exchange: FirstExchange
    at: datetime


class _GraphBuilder:
    """Builds one user's graph, part by part, from one seeded generator (same id, same graph)."""

    def __init__(self, user_id: str, now: datetime) -> None:
        self.user_id = user_id
        self.now = now
        self.rng = random.Random(f"yuxi-demo:{user_id}")
        self.group_id = derive_group_id(user_id)
        self.user_name = _display_name(user_id)
        self.graph = DemoGraph(user_id=user_id, group_id=self.group_id)
        self.exchanges = first_exchanges(user_id)
        self.statements = user_statements(user_id)
        self.entities: dict[tuple[str, str], EntityNode] = {}
        self.user_node = self._add_user()
        self.asked: list[_Said] = []  # the user's messages, one per exchange
        self.answered: list[_Said] = []  # the assistant's answers, one per exchange
        self.fact_index = 0
        self.mentioned: set[tuple[str, str]] = set()

    # --- entities ---------------------------------------------------------------
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

    def entity(self, name: str, label: str, at: datetime, *, twin: bool = False) -> EntityNode:
        """The entity of this name and label (created once; `twin` makes a second node)."""
        key = (name, label)
        if key in self.entities and not twin:
            return self.entities[key]
        node = EntityNode(
            uuid=_uuid(self.rng),
            name=name,
            group_id=self.group_id,
            labels=[label],
            summary=f"{name} ({label.lower()}), from {self.user_name}'s chats.",
            created_at=at,
            name_embedding=deterministic_embedding(f"{self.user_id}:{name}:{twin}"),
        )
        self.graph.entities.append(node)
        self.entities.setdefault(key, node)
        return node

    # --- episodes ---------------------------------------------------------------
    def _episode(
        self, exchange: FirstExchange, role: str, text: str, at: datetime, **envelope: str
    ) -> EpisodicNode:
        """The message as an episode: a JSON envelope, or (every third) a "role: text" message."""
        number = len(self.graph.episodes) + 1
        if envelope and number % 3:
            source, content = EpisodeType.json, json.dumps({**envelope, "content": text})
        else:
            source, content = EpisodeType.message, f"{role}: {text}"
        episode = EpisodicNode(
            uuid=_uuid(self.rng),
            name=f"episode {number}",
            group_id=self.group_id,
            source=source,
            source_description=f"chat thread {exchange.thread_id}",
            content=content,
            created_at=at,
            valid_at=at,
        )
        self.graph.episodes.append(episode)
        return episode

    def _asked_at(self, exchange: FirstExchange, index: int) -> datetime:
        """When the exchange's user message was written: its demo thread's first turn (a fact
        never predates its message), or, for a stand-in thread, a day in the span."""
        if exchange.in_record:
            return story_clock(exchange.plan, self.now).now
        oldest, newest = _EXCHANGE_SPAN
        step = (oldest - newest) / max(len(self.exchanges) - 1, 1)
        days = oldest - index * step if len(self.exchanges) > 1 else newest
        return self.now - timedelta(days=days, minutes=self.rng.randint(0, 600))

    def add_episodes(self, *, large_episode: bool) -> None:
        """Each exchange's two messages, oldest first; then a long tool log when asked."""
        timed = sorted(
            (self._asked_at(ex, index), index) for index, ex in enumerate(self.exchanges)
        )
        for at, index in timed:
            exchange = self.exchanges[index]
            statement = self._statement_in(exchange)
            kind = statement.memory_kind if statement else "fact"
            asked = self._episode(
                exchange, "user", exchange.asked, at, memory_kind=kind, source_kind="user_asserted"
            )
            # after the answer's model calls (seconds each): the answer is written before it
            answered_at = at + timedelta(minutes=self.rng.randint(5, 10))
            self.asked.append(_Said(asked, exchange, at))
            self.answered.append(self._answer(exchange, answered_at))
        if large_episode and self.exchanges:
            self._add_large_episode(self.exchanges[-1])

    def _add_large_episode(self, exchange: FirstExchange) -> None:
        """A tool's long output (over 64 KB), kept as an episode no fact cites."""
        lines = [point for ex in self.exchanges for point in ex.points] or [exchange.answer]
        body = "\n".join(lines)
        text = "\n".join([body] * (LARGE_EPISODE_CHARS // len(body) + 1))
        at = self.now - timedelta(days=2, minutes=self.rng.randint(0, 600))
        log = self._episode(
            exchange, "tool", text, at, memory_kind="event", source_kind="tool_observed"
        )
        self.mention(log, self.user_node, self.entity(exchange.topic_title, "Project", at))

    def _statement_in(self, exchange: FirstExchange) -> Statement | None:
        said = exchange.asked.lower()
        return next((s for s in self.statements if s.said.lower() in said), None)

    def mention(self, episode: EpisodicNode, *nodes: EntityNode) -> None:
        for node in nodes:
            if (episode.uuid, node.uuid) in self.mentioned:
                continue
            self.mentioned.add((episode.uuid, node.uuid))
            self.graph.mentions.append(
                EpisodicEdge(
                    uuid=_uuid(self.rng),
                    source_node_uuid=episode.uuid,
                    target_node_uuid=node.uuid,
                    group_id=self.group_id,
                    created_at=episode.created_at,
                )
            )

    # --- facts ------------------------------------------------------------------
    def _past(self, moment: datetime) -> datetime:
        return min(moment, self.now - timedelta(minutes=5))

    def fact(
        self,
        source: EntityNode,
        name: str,
        target: EntityNode,
        text: str,
        said: _Said,
        *,
        source_kind: str,
        status: str,
        created: datetime | None = None,
    ) -> EntityEdge:
        """One RELATES_TO fact from the episode of `said`; every time in it is before `now`."""
        rng = self.rng
        index = self.fact_index
        self.fact_index += 1
        created = self._past(created or said.at + timedelta(minutes=rng.randint(2, 30)))
        attributes: dict[str, Any] = {
            "confidence": round(rng.uniform(0.4, 0.99), 2),
            "source_kind": source_kind,
            "scope": "user" if index % 4 else "thread",
            "provenance": said.episode.uuid,
            "recall_count": rng.randint(0, 12),
        }
        if status:  # a few facts predate ratification and carry no status
            attributes["status"] = status
        valid_at: datetime | None = said.at
        invalid_at = expired_at = None
        if status == "active":
            attributes["ratified_at"] = self._past(created + timedelta(days=1)).isoformat()
            recalled = created + (self.now - created) * rng.random()
            attributes["last_recalled_at"] = self._past(recalled).isoformat()
        if status in ("superseded", "contradicted"):
            invalid_at = self._past(created + timedelta(days=rng.uniform(1, 5)))
            expired_at = invalid_at
        if status == "retracted":
            attributes["forgotten_at"] = self._past(created + timedelta(days=2)).isoformat()
        if index % 13 == 5:
            valid_at = None  # unknown validity start
        edge = EntityEdge(
            uuid=_uuid(rng),
            source_node_uuid=source.uuid,
            target_node_uuid=target.uuid,
            name=name,
            fact=text,
            group_id=self.group_id,
            episodes=[said.episode.uuid],
            created_at=created,
            valid_at=valid_at,
            invalid_at=invalid_at,
            expired_at=expired_at,
            fact_embedding=deterministic_embedding(f"{self.user_id}:{text}:{index}"),
            attributes=attributes,
        )
        self.graph.facts.append(edge)
        self.mention(said.episode, source, target)
        return edge

    def add_user_facts(self) -> None:
        """Each statement from the message that says it (a statement said twice: two facts)."""
        for said in self.asked:
            statement = self._statement_in(said.exchange)
            if statement is None:
                continue
            target = self.entity(statement.target, statement.label, said.at)
            self.fact(
                self.user_node,
                statement.relation,
                target,
                statement.fact_for(self.user_name),
                said,
                source_kind="user_asserted",
                status="active",
            )

    def add_planted_fact(self) -> None:
        """The user_asserted fact the user never said, on their latest message (which does not say it).

        Stored a minute after that message, before the statement it does carry, so the
        Facts page opens on the statement (`yuxi_dash.ui.memory_facts.headline_fact`).
        """
        if not self.asked:
            return
        suspect = planted_facts(self.user_id)[0]
        said = self.asked[-1]
        target = self.entity(suspect.target, suspect.label, said.at)
        self.fact(
            self.user_node,
            suspect.relation,
            target,
            suspect.fact_for(self.user_name),
            said,
            source_kind="user_asserted",
            status="active",
            created=said.at + timedelta(minutes=1),
        )

    def add_assistant_facts(self) -> None:
        """Each point of each answer; the first is active, then the tentative ones of known ages."""
        tentative = sorted(_TENTATIVE_AGES, reverse=True)  # the oldest ages to the oldest answers
        cycle = 0
        for number, said in enumerate(self.answered):
            exchange = said.exchange
            topic = self.entity(exchange.topic_title, "Project", said.at)
            self.mention(said.episode, self.user_node, topic)  # even if its facts are earlier
            points = _unique(exchange.points)
            for offset, point in enumerate(points):
                tool = offset == len(points) - 1 and len(points) > 1
                planted = told_fact(exchange.topic_title, point)
                kind = "tool_observed" if tool else "assistant_derived"
                relation, text = planted.relation, planted.fact_for(self.user_name)
                if tool:
                    relation = "WAS_SHOWN"
                    text = text.replace(" was told about ", " was shown by a tool, about ", 1)
                created, hits, source = None, 0, said
                if number == 0 and offset == 0:
                    status = "active"
                elif tentative and not tool:
                    status = "tentative"
                    days_old, hits = tentative.pop(0)
                    created = self.now - timedelta(days=days_old)
                    if created < said.at:  # older than the record's messages
                        source = self._earlier(said, created - timedelta(minutes=30))
                else:
                    status = _STATUS_CYCLE[cycle % len(_STATUS_CYCLE)]
                    cycle += 1
                edge = self.fact(
                    self.user_node,
                    relation,
                    topic,
                    text,
                    source,
                    source_kind=kind,
                    status=status,
                    created=created,
                )
                if status == "tentative" and hits:
                    self.graph.hits[edge.uuid] = hits

    def _earlier(self, said: _Said, at: datetime) -> _Said:
        """The same answer told in an earlier session of the thread, one the chat record no
        longer holds: where a tentative fact older than every recorded message comes from."""
        earlier = f"{said.exchange.thread_id}-earlier"
        return self._answer(replace(said.exchange, thread_id=earlier, in_record=False), at)

    def _answer(self, exchange: FirstExchange, at: datetime) -> _Said:
        """The exchange's answer as an episode written at ``at``."""
        kinds = {"memory_kind": "finding", "source_kind": "assistant_derived"}
        episode = self._episode(exchange, "assistant", exchange.answer, at, **kinds)
        return _Said(episode, exchange, at)

    def add_random_hits(self) -> None:
        """Random hits on some tentative facts that have none yet."""
        for edge in self.graph.facts:
            if edge.attributes.get("status") == "tentative" and edge.uuid not in self.graph.hits:
                if self.rng.random() < 0.3:
                    self.graph.hits[edge.uuid] = self.rng.randint(1, 4)

    def add_duplicates(self) -> None:
        """Memory stored the first statement twice: the same triple again, and on a twin node."""
        first = next((s for s in self.asked if self._statement_in(s.exchange) is not None), None)
        if first is None:
            return
        statement = self._statement_in(first.exchange)
        assert statement is not None
        target = self.entity(statement.target, statement.label, first.at)
        twin = self.entity(statement.target, statement.label, first.at, twin=True)
        for node in (target, twin):
            self.fact(
                self.user_node,
                statement.relation,
                node,
                statement.fact_for(self.user_name),
                first,
                source_kind="user_asserted",
                status="active",
            )

    def add_mirrored_facts(self) -> None:
        """A WORKS_WITH B and B WORKS_WITH A, both from the message naming B.

        B is the user's manager or team when they said who it is, else the
        assistant (A TALKS_WITH B, from the user's message and the answer).
        """
        if not self.asked:
            return
        for said in self.asked:
            statement = self._statement_in(said.exchange)
            if statement is not None and statement.label in ("Person", "Organization"):
                other = self.entity(statement.target, statement.label, said.at)
                for source, target in ((self.user_node, other), (other, self.user_node)):
                    text = f"{source.name} works with {target.name}"
                    self.fact(
                        source,
                        "WORKS_WITH",
                        target,
                        text,
                        said,
                        source_kind="user_asserted",
                        status="active",
                    )
                return
        asked, answered = self.asked[0], self.answered[0]
        assistant = self.entity(ASSISTANT_NAME, "Organization", asked.at)
        pairs = (
            (self.user_node, assistant, asked, "user_asserted"),
            (assistant, self.user_node, answered, "assistant_derived"),
        )
        for source, target, said, kind in pairs:
            text = f"{source.name} talks with {target.name}"
            self.fact(source, "TALKS_WITH", target, text, said, source_kind=kind, status="active")

    def add_communities(self, state: str) -> None:
        """Communities by label, built at a time that makes the rebuild decision vary by user.

        `state`: none (no communities), fresh (after the last episode), few_new
        (a few episodes since) or stale (half of the episodes since).
        """
        episodes = sorted(self.graph.episodes, key=lambda e: e.created_at)
        if state == "none" or len(episodes) < 3:
            return
        if state == "fresh":
            community_at = max(e.created_at for e in episodes) + timedelta(minutes=5)
        elif state == "few_new":
            community_at = episodes[-3].created_at - timedelta(minutes=5)
        else:
            community_at = episodes[len(episodes) // 2].created_at
        community_at = self._past(community_at)
        for label in _COMMUNITY_LABELS:
            members = [n for n in self.graph.entities if n.labels == [label]]
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


def build_demo_graph(
    user_id: str,
    *,
    now: datetime,
    large_episode: bool = False,
    community_state: str = "stale",
) -> DemoGraph:
    """Build one user's graph deterministically (same user id and `now` -> same graph)."""
    builder = _GraphBuilder(user_id, now)
    builder.add_episodes(large_episode=large_episode)
    builder.add_user_facts()
    builder.add_assistant_facts()
    builder.add_duplicates()
    builder.add_mirrored_facts()
    builder.add_planted_fact()
    builder.add_random_hits()
    builder.add_communities(community_state)
    return builder.graph
