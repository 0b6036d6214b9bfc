"""Tests for yuxi_dash.demo.graph_build: each user's memory is made of their own demo chat messages.

Pure checks on the built graph (texts match triples, real names, nothing after
`now`, every episode is a message of the user's record), then the seeded demo
(threads in the database, graphs in FalkorDB): every fact's provenance finds its
message, and the Facts page's headline fact shows the user's words marked.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from ldclient.integrations.test_data import TestData

from tests.fixtures.graph import DEMO_TEST_USERS
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.demo.graph_build import DemoGraph, build_demo_graph
from yuxi_dash.demo.plan import first_exchanges, planted_facts
from yuxi_dash.flags import FlagEvaluator
from yuxi_dash.memory.views.gate import open_view
from yuxi_dash.memory.views.gated_views import facts
from yuxi_dash.memory.views.provenance import episode_words, fact_provenance
from yuxi_dash.settings import get_settings
from yuxi_dash.sim.story import DEMO_USERS
from yuxi_dash.ui.memory_facts import headline_fact

NOW = datetime(2026, 6, 1, tzinfo=UTC)
_KIND_ROLE = {"user_asserted": "user", "assistant_derived": "assistant"}


def _moment(value: Any) -> datetime:
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _names(graph: DemoGraph) -> dict[str, str]:
    return {node.uuid: node.name for node in graph.entities}


@pytest.mark.parametrize("user_id", [*DEMO_USERS[:8], "fg_not_in_the_cast"])
def test_every_fact_reads_as_its_triple_and_nothing_lies_in_the_future(user_id: str) -> None:
    graph = build_demo_graph(user_id, now=NOW, large_episode=True, community_state="fresh")
    names = _names(graph)
    for edge in graph.facts:
        source, target = names[edge.source_node_uuid], names[edge.target_node_uuid]
        assert source in edge.fact and target in edge.fact, (edge.fact, source, target)
        times = [edge.created_at, edge.valid_at, edge.invalid_at, edge.expired_at]
        times += [
            datetime.fromisoformat(edge.attributes[key])
            for key in ("ratified_at", "forgotten_at", "last_recalled_at")
            if key in edge.attributes
        ]
        assert all(t <= NOW for t in times if t is not None), edge.fact
    moments = [e.created_at for e in graph.episodes] + [c.created_at for c in graph.communities]
    assert moments and all(t <= NOW for t in moments)
    # real names: no "data lake 2" made by numbering a vocabulary
    assert not [n.name for n in graph.entities if re.search(r" \d+$", n.name)]


def test_every_episode_is_a_message_of_the_users_own_chat() -> None:
    graph = build_demo_graph("alice_chen", now=NOW, large_episode=True)
    exchanges = first_exchanges("alice_chen")
    said = {ex.asked: "user" for ex in exchanges} | {ex.answer: "assistant" for ex in exchanges}
    cited = {uuid for edge in graph.facts for uuid in edge.episodes}
    for episode in graph.episodes:
        body, role, kind = episode_words(episode.source.value, episode.content)
        assert episode.source_description.startswith("chat thread demo-")
        if len(episode.content.encode()) > 64 * 1024:  # the large tool log: no fact cites it
            assert episode.uuid not in cited
            continue
        assert body in said, body[:80]
        assert said[body] == (role or {"user_asserted": "user"}.get(kind or "", "assistant"))
    kinds = {
        json.loads(e.content)["source_kind"] for e in graph.episodes if e.source.value == "json"
    }
    assert kinds == {"user_asserted", "assistant_derived", "tool_observed"}


def test_statuses_duplicates_and_mirrors_are_kept() -> None:
    graph = build_demo_graph("alice_chen", now=NOW)
    statuses = {edge.attributes.get("status") for edge in graph.facts}
    assert statuses == {"active", "tentative", "superseded", "contradicted", "retracted", None}
    kinds = {edge.attributes["source_kind"] for edge in graph.facts}
    assert kinds == {"user_asserted", "assistant_derived", "tool_observed"}
    names = _names(graph)
    triples = [(names[e.source_node_uuid], e.name, names[e.target_node_uuid]) for e in graph.facts]
    assert len(set(triples)) < len(triples)  # the same triple twice
    pairs = {(e.source_node_uuid, e.name, e.target_node_uuid) for e in graph.facts}
    assert any((t, n, s) in pairs for s, n, t in pairs)  # a mirrored edge
    assert graph.communities and graph.hits


def _provenance_of_every_fact(
    user_id: str, settings: Any, evaluator: Any
) -> dict[str, dict[str, Any]]:
    actor = Actor(id="support@example.com", role=Role.VIEWER)
    access = open_view(user_id, "provenance", actor=actor, settings=settings, evaluator=evaluator)
    listed = open_view(user_id, "facts", actor=actor, settings=settings, evaluator=evaluator)
    rows = facts(listed, limit=500)["facts"]
    return {str(row["uuid"]): fact_provenance(access, str(row["uuid"])) for row in rows}


def test_every_demo_facts_provenance_finds_its_message(
    demo_env, demo_graphs, falkordb_dir, monkeypatch
) -> None:
    """Seeded threads and graphs: each fact's episode is found in the chat record, by its words."""
    monkeypatch.setenv("YUXI_DASH_FALKORDB_DIR", str(falkordb_dir))  # the seeded graphs
    get_settings.cache_clear()
    settings = get_settings()
    data = TestData.data_source()  # memory on for every test user (the demo gates one off)
    data.update(data.flag("graphiti-memory").variation_for_all(True))
    data.update(data.flag("graphiti-communities-enabled").variation_for_all(False))
    evaluator = FlagEvaluator.from_test_data(settings, data)
    try:
        _check_users(settings, evaluator)
    finally:
        evaluator.close()


def _check_users(settings: Any, evaluator: Any) -> None:
    for user_id in DEMO_TEST_USERS:
        name = " ".join(part.capitalize() for part in user_id.split("_"))
        suspect = planted_facts(user_id)[0].fact_for(name)
        looks = _provenance_of_every_fact(user_id, settings, evaluator)
        assert len(looks) > 20
        for data in looks.values():
            fact = data["fact"]
            [episode] = data["episodes"]
            message = episode["message"]
            if str(episode["source_description"]).endswith("-earlier"):
                assert message is None  # a session the chat record no longer holds
                continue
            assert message is not None, (user_id, fact["fact"])
            # the message is the episode's own text; "exact words" only where every key word
            # of the fact is in it (never for the planted claim the user never said)
            assert episode["match_kind"] in ("exact_words", "episode_text"), episode["match"]
            if fact["fact"] == suspect:
                assert episode["match_kind"] == "episode_text" and episode["missing_words"]
            assert _moment(message["created_at"]) <= _moment(fact["created_at"]), fact["fact"]
            assert message["content"].strip() == episode["body"].strip()
            expected = _KIND_ROLE.get(
                fact["source_kind"], "assistant"
            )  # a tool's finding: the answer
            assert (message["role"], episode["said_by"]) == (expected, expected), fact["fact"]
            if fact["fact"] != suspect:  # the planted claim's words are in no message
                assert message["spans"], (user_id, fact["fact"])
        # the Facts page opens on the newest fact the user asserted: their words, marked
        rows = sorted(
            (d["fact"] | {"uuid": u} for u, d in looks.items()),
            key=lambda f: (str(f["created_at"]), f["uuid"]),
            reverse=True,
        )
        headline = looks[str(headline_fact(rows))]
        [episode] = headline["episodes"]
        assert headline["fact"]["source_kind"] == "user_asserted"
        assert headline["fact"]["fact"] != suspect
        assert episode["said_by"] == "user" and len(episode["message"]["spans"]) >= 2
