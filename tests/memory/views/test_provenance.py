"""One fact's provenance: back to the chat message and the words, on a real FalkorDB graph.

A match says only what holds, and a fact never links to a message written after it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from ldclient.integrations.test_data import TestData

from tests.fixtures.desk import (
    CHAT,
    DESK_USER,
    THREAD,
    DeskGraph,
    _entity,
    _episode,
    _fact,
    message_at,
)
from tests.fixtures.graph import memory_audit
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.demo.graph_writer import write_graph
from yuxi_dash.errors import InvalidInput, NotFound
from yuxi_dash.flags import FlagEvaluator
from yuxi_dash.memory.graph.client import GraphClient
from yuxi_dash.memory.graph.groups import derive_group_id
from yuxi_dash.memory.views import provenance
from yuxi_dash.memory.views.gate import open_view
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import ChatMessage

VIEWER = Actor(id="viewer@example.com", role=Role.VIEWER)


@pytest.fixture
def evaluator(memory_settings) -> Iterator[FlagEvaluator]:
    data = TestData.data_source()
    data.update(data.flag("graphiti-memory").variation_for_all(True))
    data.update(data.flag("graphiti-communities-enabled").variation_for_all(False))
    ev = FlagEvaluator.from_test_data(memory_settings, data)
    yield ev
    ev.close()


def look(desk_graph: DeskGraph, fact: str, evaluator, settings, client: GraphClient) -> dict:
    access = open_view(
        DESK_USER, "provenance", actor=VIEWER, settings=settings, evaluator=evaluator
    )
    return provenance.fact_provenance(access, fact, client=client)


def test_a_user_fact_traces_to_its_message_and_words(
    desk_graph: DeskGraph, evaluator, memory_settings, graph_client
) -> None:
    data = look(desk_graph, desk_graph.facts["dark"], evaluator, memory_settings, graph_client)
    assert data["fact"]["fact"] == "Desk User prefers dark mode"
    assert data["source"]["name"] == "Desk User" and data["target"]["name"] == "dark mode"
    assert data["fact"]["status"] == "active" and data["fact"]["source_kind"] == "user_asserted"
    assert data["hits"] == 2
    [episode] = data["episodes"]
    assert episode["uuid"] == desk_graph.episodes["user"]
    message = episode["message"]
    assert (message["thread_id"], message["sequence"], message["role"]) == (THREAD, 1, "user")
    assert message["content"] == CHAT[1][1]
    assert episode["said_by"] == "user" and episode["said_by_basis"] == "chat message role"
    text = message["content"]
    words = {s["term"]: text[s["start"] : s["end"]] for s in message["spans"]}
    assert words == {"dark": "dark", "mode": "mode"}
    assert text[message["span"]["start"] : message["span"]["end"]] == "dark mode"
    assert message["link"] == {
        "page": "app_pages/thread_detail.py",
        "query": {"thread": THREAD, "message": "1"},
    }
    assert data["invalidated_by"] is None and data["same_batch"] == []


def test_an_assistant_derived_fact_is_labelled_as_the_assistants(
    desk_graph: DeskGraph, evaluator, memory_settings, graph_client
) -> None:
    data = look(desk_graph, desk_graph.facts["caching"], evaluator, memory_settings, graph_client)
    assert data["fact"]["source_kind"] == "assistant_derived"
    [episode] = data["episodes"]
    assert episode["said_by"] == "assistant"
    assert (episode["message"]["sequence"], episode["message"]["role"]) == (2, "assistant")
    assert {s["term"] for s in episode["message"]["spans"]} >= {"caching", "onboarding", "flow"}


def test_an_invalidated_fact_shows_its_successor_and_batch(
    desk_graph: DeskGraph, evaluator, memory_settings, graph_client
) -> None:
    data = look(
        desk_graph, desk_graph.facts["contractor"], evaluator, memory_settings, graph_client
    )
    by = data["invalidated_by"]
    assert by["uuid"] == desk_graph.facts["full_time"]
    assert by["fact"] == "Desk User works at Acme full-time"
    assert by["episode"]["uuid"] == desk_graph.episodes["new"]
    assert [f["uuid"] for f in data["same_batch"]] == [desk_graph.facts["laptop"]]
    assert data["episodes"][0]["message"]["sequence"] == 3


def test_bad_and_foreign_uuids_are_refused_and_audited(
    desk_graph: DeskGraph, evaluator, memory_settings, graph_client
) -> None:
    with pytest.raises(InvalidInput) as bad:
        look(desk_graph, "x' OR 1=1 //", evaluator, memory_settings, graph_client)
    assert bad.value.code == "invalid_fact_uuid"
    with pytest.raises(NotFound) as foreign:
        look(desk_graph, desk_graph.other_fact, evaluator, memory_settings, graph_client)
    assert foreign.value.code == "fact_not_found"
    rows = memory_audit(memory_settings, DESK_USER)
    outcomes = [(r.outcome, r.detail.get("view"), r.detail.get("code")) for r in rows]
    assert ("refused", "provenance", "invalid_fact_uuid") in outcomes
    assert ("refused", "provenance", "fact_not_found") in outcomes
    assert sum(1 for o in outcomes if o[0] == "ok") == 2  # each look passed the door first


def test_spans_match_on_the_stem() -> None:
    text = "I prefer answers in Spanish."
    found = provenance.spans(text, ["prefers", "answers", "spanish"])
    assert [text[s["start"] : s["end"]] for s in found] == ["prefer", "answers", "Spanish"]


# --- what a match claims, and when a message may be linked at all (issue 37) ------------
def _plant(graph_client: GraphClient, memory_settings, *, later_by: timedelta) -> dict[str, str]:
    """Two facts the fixture lacks: one whose words are in one message only, written
    `later_by` after the fact was created; one claiming words its episode's message never says."""
    group = derive_group_id(DESK_USER)
    user = _entity(1, "Desk User", "Person", group, is_user=True)  # already in the graph
    tea = _entity(21, "green tea", "Preference", group)
    icelandic = _entity(22, "Icelandic", "Concept", group)
    said = message_at(1)  # the fixture's "dark mode" message and its episode
    ep_dark = _episode(101, group, CHAT[1][1], said, json_kind="user_asserted")
    tea_text = "Every morning I drink green tea before standup."
    tea_at = message_at(6)
    ep_tea = _episode(121, group, tea_text, tea_at, json_kind="user_asserted")
    facts = [
        _fact(221, user, "DRINKS", tea, "Desk User drinks green tea every morning",
              episode=ep_tea, status="active", kind="user_asserted", valid_at=tea_at),
        _fact(222, user, "SPEAKS", icelandic, "Desk User speaks fluent Icelandic",
              episode=ep_dark, status="active", kind="user_asserted", valid_at=said),
    ]  # fmt: skip
    write_graph(graph_client, group, entities=[tea, icelandic], episodes=[ep_tea], facts=facts)
    with session_scope(memory_settings) as session:  # the tea message: written after the fact
        session.add(
            ChatMessage(
                thread_id=THREAD, sequence=6, role="user", content=tea_text,
                created_at=facts[0].created_at + later_by,
            )
        )  # fmt: skip
    return {"tea": facts[0].uuid, "icelandic": facts[1].uuid}


def test_a_fact_never_links_to_a_message_written_after_it(
    desk_graph: DeskGraph, evaluator, memory_settings, graph_client
) -> None:
    planted = _plant(graph_client, memory_settings, later_by=timedelta(hours=2))
    data = look(desk_graph, planted["tea"], evaluator, memory_settings, graph_client)
    [episode] = data["episodes"]
    # the only message holding these words is two hours younger than the fact: no source
    assert episode["message"] is None and episode["match"] is None
    assert episode["not_after"] == data["fact"]["created_at"]  # the bound: the fact's creation


def test_the_same_message_written_before_the_fact_is_linked(
    desk_graph: DeskGraph, evaluator, memory_settings, graph_client
) -> None:
    """The control for the test above: only the message's time differs."""
    planted = _plant(graph_client, memory_settings, later_by=-timedelta(seconds=1))
    data = look(desk_graph, planted["tea"], evaluator, memory_settings, graph_client)
    [episode] = data["episodes"]
    assert episode["message"]["sequence"] == 6
    assert episode["match"] == "exact words" and episode["match_kind"] == "exact_words"
    assert episode["missing_words"] == []


def test_a_message_without_the_facts_words_is_not_called_exact_words(
    desk_graph: DeskGraph, evaluator, memory_settings, graph_client
) -> None:
    planted = _plant(graph_client, memory_settings, later_by=timedelta(hours=2))
    data = look(desk_graph, planted["icelandic"], evaluator, memory_settings, graph_client)
    [episode] = data["episodes"]
    # the episode really is the "dark mode" message, and it says nothing of Icelandic
    assert episode["message"]["content"] == CHAT[1][1]
    assert episode["match"] != "exact words" and episode["match_kind"] == "episode_text"
    assert episode["shared_words"] == [] and "icelandic" in episode["missing_words"]
    assert "none of the fact's key words" in episode["match"] and "icelandic" in episode["match"]
    assert episode["message"]["spans"] == []


def test_a_partial_match_names_the_words_it_shares_and_lacks(
    desk_graph: DeskGraph, evaluator, memory_settings, graph_client
) -> None:
    data = look(desk_graph, desk_graph.facts["dark"], evaluator, memory_settings, graph_client)
    [episode] = data["episodes"]
    assert episode["match_kind"] == "episode_text"
    assert (episode["shared_words"], episode["missing_words"]) == (["dark", "mode"], ["prefers"])
    assert (
        episode["match"] == "the episode's own text, which shares dark, mode but never says prefers"
    )
    contractor = look(
        desk_graph, desk_graph.facts["contractor"], evaluator, memory_settings, graph_client
    )
    assert contractor["episodes"][0]["match"] == "exact words"  # work(s), Acme, contractor


def test_describe_match_by_shared_words() -> None:
    text = "I switched my editor to dark mode last week."
    label, kind, shared, missing = provenance.describe_match(
        text, ["prefers", "dark", "mode"], episode_text=False
    )
    assert kind == "shared_words" and shared == ["dark", "mode"] and missing == ["prefers"]
    assert label.startswith("shares the words dark, mode") and label.endswith("never says prefers")


def test_a_fact_without_key_words_is_never_exact_words() -> None:
    label, kind, shared, missing = provenance.describe_match("Yes.", [], episode_text=True)
    assert (kind, shared, missing) == ("episode_text", [], [])
    assert label == "the episode's own text (the fact has no key words to look for)"
