"""One fact's provenance: back to the chat message and the words, on a real FalkorDB graph."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from ldclient.integrations.test_data import TestData

from tests.fixtures.desk import CHAT, DESK_USER, THREAD, DeskGraph
from tests.fixtures.graph import memory_audit
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.errors import InvalidInput, NotFound
from yuxi_dash.flags import FlagEvaluator
from yuxi_dash.memory.graph.client import GraphClient
from yuxi_dash.memory.views import provenance
from yuxi_dash.memory.views.gate import open_view

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
        "page": "pages/thread_detail.py",
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
