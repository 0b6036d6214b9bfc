"""Assistant-only facts, on a real FalkorDB graph written with graphiti-core's classes.

The share and each live fact's basis on a graph of known provenance, the episode speakers
(envelopes, role prefixes, a long envelope read from both ends at its top level only, nested
keys never), an unverifiable episode making a fact `unknown`, the order in UTC, the list created before a
moment with its preview token, a bad moment (typed, audited), the gate (a gated-off user
sends no graph query) and the fleet list (gated-off users skipped, each read audited).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from ldclient.integrations.test_data import TestData

from tests.fixtures.graph import make_client, memory_audit
from tests.memory.quality.assistant_only_graph import (
    DAY_2,
    EARLY,
    EXPECTED,
    NOT_LIVE,
    WORDS_USER,
    WordsGraph,
    plant_words,
)
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.errors import Forbidden, MemoryGatedOff, YuxiDashError
from yuxi_dash.flags import FlagEvaluator
from yuxi_dash.memory.graph.client import GraphClient
from yuxi_dash.memory.graph.server import ServerHandle
from yuxi_dash.memory.quality import assistant_only as ao
from yuxi_dash.memory.views.gate import open_view

VIEWER = Actor(id="viewer@example.com", role=Role.VIEWER)
OPERATOR = Actor(id="ops@example.com", role=Role.OPERATOR)
GATED = "words_gated"


@pytest.fixture
def words_graph(falkordb_server: ServerHandle, memory_settings) -> Iterator[WordsGraph]:
    client = make_client(falkordb_server, memory_settings)
    try:
        yield plant_words(client)
    finally:
        client.close()


def _evaluator(settings, *, off: tuple[str, ...] = ()) -> FlagEvaluator:
    data = TestData.data_source()
    memory = data.flag("graphiti-memory").variation_for_all(True)
    for user in off:
        memory = memory.variation_for_user(user, False)
    data.update(memory)
    data.update(data.flag("graphiti-communities-enabled").variation_for_all(False))
    return FlagEvaluator.from_test_data(settings, data)


@pytest.fixture
def evaluator(memory_settings) -> Iterator[FlagEvaluator]:
    ev = _evaluator(memory_settings, off=(GATED,))
    yield ev
    ev.close()


def _access(settings, evaluator, user: str = WORDS_USER):
    return open_view(user, ao.VIEW, actor=VIEWER, settings=settings, evaluator=evaluator)


def test_the_share_and_each_live_facts_basis_on_a_graph_of_known_provenance(
    words_graph: WordsGraph, memory_settings, evaluator, graph_client: GraphClient
) -> None:
    share = ao.assistant_only_share(_access(memory_settings, evaluator), client=graph_client)
    assistant_only = [n for n, basis in EXPECTED.items() if basis == "assistant_only"]
    assert share["live_facts"] == len(EXPECTED) == 13
    assert share["assistant_only_facts"] == len(assistant_only) == 5
    assert share["assistant_only_share"] == 5 / 13
    assert share["assistant_only_by_basis"] == {
        "user_asserted": 2,
        "user_episode": 2,
        "operator_corrected": 1,
        "assistant_only": 5,
        "unknown": 3,
    }
    data = ao.assistant_only_facts(_access(memory_settings, evaluator), client=graph_client)
    assert data["assistant_only_by_basis"] == share["assistant_only_by_basis"]  # both reads
    listed = [f["uuid"] for f in data["facts"]]
    assert sorted(listed) == sorted(words_graph.uuids(assistant_only))
    assert not set(listed) & set(words_graph.uuids(NOT_LIVE))
    assert listed[:3] == words_graph.uuids(EARLY)  # oldest first
    by_uuid = {f["uuid"]: f for f in data["facts"]}
    assert by_uuid[words_graph.facts[5]]["episode_speakers"] == "no episodes"
    assert by_uuid[words_graph.facts[10]]["episode_speakers"] == "assistant"  # the long one
    assert words_graph.facts[12] not in by_uuid  # tool_observed, but its episode is missing
    assert by_uuid[words_graph.facts[7]]["episode_speakers"] == "assistant, tool"
    assert data["preview_token"] is None and data["total"] == 5


def test_the_facts_created_before_a_moment_and_their_preview_token(
    words_graph: WordsGraph, memory_settings, evaluator, graph_client: GraphClient
) -> None:
    access = _access(memory_settings, evaluator)
    data = ao.assistant_only_facts(access, before=DAY_2.isoformat(), client=graph_client)
    assert [f["uuid"] for f in data["facts"]] == words_graph.uuids(EARLY)
    assert data["total"] == 3 and data["assistant_only_facts"] == 5
    assert data["preview_token"] == ao.preview_token(WORDS_USER, DAY_2, words_graph.uuids(EARLY))
    zulu = ao.assistant_only_facts(access, before="2026-03-02T09:00:00Z", client=graph_client)
    assert zulu["preview_token"] == data["preview_token"]
    assert ao.preview_token(WORDS_USER, DAY_2, words_graph.uuids((2, 3))) != data["preview_token"]


def test_a_bad_moment_is_one_typed_refusal_on_record(
    words_graph: WordsGraph, memory_settings, evaluator, graph_client: GraphClient
) -> None:
    access = _access(memory_settings, evaluator)
    before = graph_client.queries_run
    with pytest.raises(YuxiDashError) as refused:
        ao.assistant_only_facts(access, before="last tuesday", client=graph_client)
    assert refused.value.code == "invalid_moment" and refused.value.exit_code == 2
    assert graph_client.queries_run == before + 0
    rows = memory_audit(memory_settings, WORDS_USER)
    assert [(r.action, r.outcome, r.detail.get("code")) for r in rows][:1] == [
        ("memory.view", "refused", "invalid_moment")
    ]


def test_a_gated_off_user_sends_no_graph_query(
    memory_settings, evaluator, graph_client: GraphClient
) -> None:
    with pytest.raises(MemoryGatedOff):
        ao.assistant_only_share(_access(memory_settings, evaluator, GATED), client=graph_client)
    assert graph_client.queries_run == 0
    rows = memory_audit(memory_settings, GATED)
    assert [(r.action, r.outcome, r.detail["view"]) for r in rows] == [
        ("memory.view", "gated_off", "assistant_only")
    ]


def test_the_fleet_list_skips_gated_off_users_and_audits_each_read(
    words_graph: WordsGraph, falkordb_server, memory_settings, graph_client: GraphClient
) -> None:
    other = make_client(falkordb_server, memory_settings)
    try:
        plant_words(other, GATED)
    finally:
        other.close()
    ev = _evaluator(memory_settings, off=(GATED,))
    try:
        with pytest.raises(Forbidden):
            ao.assistant_only_fleet(
                actor=VIEWER, settings=memory_settings, evaluator=ev, client=graph_client
            )
        fleet = ao.assistant_only_fleet(
            actor=OPERATOR, settings=memory_settings, evaluator=ev, client=graph_client
        )
        cut = ao.assistant_only_fleet(
            actor=OPERATOR, limit=1, settings=memory_settings, evaluator=ev, client=graph_client
        )
    finally:
        ev.close()
        graph_client.delete_graph("user_" + GATED)
    rows = fleet["users"]
    assert (fleet["total"], fleet["truncated"]) == (len(rows), False) and len(rows) >= 2
    assert (len(cut["users"]), cut["total"], cut["truncated"]) == (1, fleet["total"], True)
    by_user = {r["user_id"]: r for r in rows}
    assert by_user[GATED]["gated_off"] is True and "assistant_only_share" not in by_user[GATED]
    assert by_user[WORDS_USER]["assistant_only_share"] == 5 / 13
    shares = [r["assistant_only_share"] for r in rows if r.get("assistant_only_share") is not None]
    assert shares == sorted(shares, reverse=True)
    looks = [(r.action, r.outcome) for r in memory_audit(memory_settings, WORDS_USER)]
    assert looks.count(("memory.view", "ok")) == len(looks) >= 1
    assert memory_audit(memory_settings, GATED) == []  # skipped, not read, not looked at


@pytest.mark.parametrize(
    ("source", "content", "speaker"),
    [
        ("json", json.dumps({"source_kind": "user_asserted", "content": "hi"}), "user"),
        ("json", json.dumps({"role": "assistant", "content": "hi"}), "assistant"),
        ("json", json.dumps({"source_kind": "operator_corrected"}), "operator"),
        ("message", "tool: 200 OK", "tool"),
        ("message", "Human: hello", "user"),
        ("text", "user: looks like a prefix, but it is a text episode", "unknown"),
        ("json", json.dumps({"memory_kind": "fact", "content": "no kind"}), "unknown"),
    ],
)
def test_episode_speakers(source: str, content: str, speaker: str) -> None:
    assert ao.episode_speaker(source, content) == speaker


def test_a_long_envelope_is_read_from_both_ends_but_never_inside_its_content() -> None:
    inner = json.dumps({"source_kind": "user_asserted"})  # quoted inside the content string
    body = json.dumps({"content": inner + "x" * 6000, "source_kind": "tool_observed"})
    head, tail = body[:4000], body[-1000:]
    assert ao.episode_speaker("json", head, tail, len(body)) == "tool"


LONG = "x" * 6000


@pytest.mark.parametrize(
    ("envelope", "speaker"),
    [
        # keys inside a nested object or list never count, long or short
        ({"messages": [{"role": "assistant", "content": LONG}, {"role": "user"}]}, "unknown"),
        ({"meta": {"source_kind": "assistant_derived"}, "content": LONG, "role": "user"}, "user"),
        ({"content": LONG, "meta": {"source_kind": "user_asserted"}, "role": "tool"}, "tool"),
        ({"source_kind": "tool_observed", "content": LONG, "items": [{"role": "user"}]}, "tool"),
        ({"content": LONG + '\\"role\\": \\"user\\"', "role": "assistant"}, "assistant"),
    ],
)
def test_a_long_or_short_envelope_is_read_at_its_top_level_only(
    envelope: dict[str, object], speaker: str
) -> None:
    body = json.dumps(envelope)
    assert ao.episode_speaker("json", body[:4000], body[-1000:], len(body)) == speaker
    short = json.dumps(envelope).replace(LONG, "x")
    assert ao.episode_speaker("json", short, short, len(short)) == speaker


@pytest.mark.parametrize(
    ("kind", "speakers", "basis"),
    [
        ("assistant_derived", [], "assistant_only"),
        ("tool_observed", ["assistant"], "assistant_only"),
        (None, ["assistant", "tool"], "assistant_only"),
        ("assistant_derived", ["missing"], "unknown"),
        ("tool_observed", ["assistant", "unknown"], "unknown"),
        ("assistant_derived", ["operator"], "unknown"),
        (None, [], "unknown"),
        ("assistant_derived", ["assistant", "user"], "user_episode"),
    ],
)
def test_only_verified_assistant_or_tool_text_makes_a_fact_assistant_only(
    kind: str | None, speakers: list[str], basis: str
) -> None:
    assert ao.classify(kind, speakers) == basis


def test_facts_are_ordered_by_their_moment_in_utc_not_their_text() -> None:
    facts = [
        {"uuid": "a", "created_at": "2026-03-01T10:00:00+02:00"},  # 08:00 UTC
        {"uuid": "b", "created_at": "2026-03-01T09:00:00+00:00"},
        {"uuid": "c", "created_at": "2026-03-01T07:30:00-01:00"},  # 08:30 UTC
    ]
    assert [f["uuid"] for f in sorted(facts, key=ao._order)] == ["a", "c", "b"]
