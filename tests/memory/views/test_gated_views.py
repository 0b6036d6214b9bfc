"""The gated, audited entry points: gates from LaunchDarkly TestData, audit rows, roles."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from ldclient.integrations.test_data import TestData

from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.errors import Forbidden, InvalidInput, MemoryGatedOff, UserNotFound
from yuxi_dash.flags import FlagEvaluator
from yuxi_dash.memory.graph.client import GraphClient
from yuxi_dash.memory.views import gated_views
from yuxi_dash.memory.views.gate import gate_message, open_view
from yuxi_dash.memory.views.index_views import repair_indexes
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.queries import list_audit

VIEWER = Actor(id="viewer@example.com", role=Role.VIEWER)
ADMIN = Actor(id="admin@example.com", role=Role.ADMIN)


@pytest.fixture
def td() -> TestData:
    data = TestData.data_source()
    data.update(
        data.flag("graphiti-memory")
        .variation_for_all(True)
        .variation_for_user("bruno_silva", False)
    )
    data.update(data.flag("graphiti-communities-enabled").variation_for_all(False))
    return data


@pytest.fixture
def evaluator(td: TestData, memory_settings) -> Iterator[FlagEvaluator]:
    ev = FlagEvaluator.from_test_data(memory_settings, td)
    yield ev
    ev.close()


def audit_rows(settings, target: str) -> list:
    with session_scope(settings) as session:
        return list_audit(session, target=target)


def test_gated_off_runs_no_graph_query_and_is_audited(
    demo_graphs, graph_client: GraphClient, evaluator, memory_settings
) -> None:
    with pytest.raises(MemoryGatedOff) as caught:
        access = open_view(
            "bruno_silva", "stats", actor=VIEWER, settings=memory_settings, evaluator=evaluator
        )
        gated_views.stats(access, client=graph_client)
    assert "graphiti-memory is off (the user is targeted individually)" in caught.value.message
    assert caught.value.exit_code == 6
    assert graph_client.queries_run == 0
    rows = audit_rows(memory_settings, "memory:bruno_silva")
    assert [(r.action, r.outcome, r.actor) for r in rows] == [
        ("memory.view", "gated_off", VIEWER.id)
    ]


LD_HINT = "set LAUNCHDARKLY_SDK_KEY or YUXI_DASH_LD_FLAGS_FILE (the demo's flag file is "


def test_gate_message_says_how_to_configure_launchdarkly_when_it_is_not(db_url: str) -> None:
    from yuxi_dash.demo.flags import DEMO_FLAGS_FILE
    from yuxi_dash.settings import get_settings

    settings = get_settings()
    unconfigured = FlagEvaluator(settings, None, "not_configured")
    gates = unconfigured.gates("alice_chen")
    message = gate_message(gates)
    assert message == (
        "memory is gated off for alice_chen: graphiti-memory is off "
        f"(LaunchDarkly is not configured); {LD_HINT}{DEMO_FLAGS_FILE})"
    )
    assert gate_message(gates, communities=True) == message  # memory is the gate off
    # what the pages and the CLI both show: the access layer's MemoryGatedOff carries it
    with pytest.raises(MemoryGatedOff) as caught:
        open_view("alice_chen", "stats", actor=VIEWER, evaluator=unconfigured)
    assert caught.value.message == message
    (row,) = audit_rows(settings, "memory:alice_chen")  # the audit row is as before
    assert (row.outcome, row.detail["reason"]) == ("gated_off", "not configured")
    # a gate that LaunchDarkly turned off is not a configuration problem: no hint
    td = TestData.data_source()
    td.update(td.flag("graphiti-memory").variation_for_all(False))
    configured = FlagEvaluator.from_test_data(settings, td)
    try:
        off = gate_message(configured.gates("alice_chen"))
    finally:
        configured.close()
    assert off.startswith("memory is gated off for alice_chen: graphiti-memory is off (")
    assert "LAUNCHDARKLY_SDK_KEY" not in off and "not configured" not in off


def test_communities_off_runs_no_community_query(
    demo_graphs, graph_client: GraphClient, evaluator, td, memory_settings
) -> None:
    access = open_view(
        "alice_chen", "overview", actor=VIEWER, settings=memory_settings, evaluator=evaluator
    )
    gated_views.stats(access, client=graph_client)
    with pytest.raises(MemoryGatedOff):
        open_view(
            "alice_chen", "communities", actor=VIEWER, settings=memory_settings, evaluator=evaluator
        )
    with pytest.raises(MemoryGatedOff):
        gated_views.communities(access, client=graph_client)  # access for another view: refused too
    community_statements = [s for s in graph_client.stats.statements if "Community" in s]
    # the overview's label count is the only statement that names Community
    assert community_statements == ["MATCH (n:Community) RETURN count(n) AS c"]
    td.update(td.flag("graphiti-communities-enabled").variation_for_all(True))
    access = open_view(
        "alice_chen", "communities", actor=VIEWER, settings=memory_settings, evaluator=evaluator
    )
    data = gated_views.communities(access, client=graph_client)
    assert data["communities"] and data["rebuild"]["reason"] == "enough_new"
    outcomes = [r.outcome for r in audit_rows(memory_settings, "memory:alice_chen")]
    assert sorted(outcomes) == ["gated_off", "ok", "ok"]


def test_every_view_is_audited_without_query_text(
    demo_graphs, graph_client: GraphClient, evaluator, memory_settings
) -> None:
    access = open_view(
        "alice_chen", "entities", actor=VIEWER, settings=memory_settings, evaluator=evaluator
    )
    gated_views.entities(access, search="secret search text", client=graph_client)
    access = open_view(
        "alice_chen", "warm_context", actor=VIEWER, settings=memory_settings, evaluator=evaluator
    )
    result = gated_views.warm_context(access, "dark mode secret", client=graph_client)
    assert result["block"].startswith("<temporal_context>")
    rows = audit_rows(memory_settings, "memory:alice_chen")
    assert sorted(r.detail["view"] for r in rows) == ["entities", "warm_context"]
    assert all("secret" not in str(r.detail) for r in rows)


def test_bad_ids_and_missing_graphs(
    demo_graphs, graph_client: GraphClient, evaluator, memory_settings
) -> None:
    with pytest.raises(InvalidInput):
        open_view(
            "alice') DETACH DELETE n", "stats", actor=VIEWER, settings=memory_settings,
            evaluator=evaluator,
        )  # fmt: skip
    assert graph_client.queries_run == 0
    access = open_view(
        "nobody_here", "stats", actor=VIEWER, settings=memory_settings, evaluator=evaluator
    )
    with pytest.raises(UserNotFound):
        gated_views.stats(access, client=graph_client)


def test_stats_shape(demo_graphs, graph_client, evaluator, memory_settings) -> None:
    access = open_view(
        "alice_chen", "stats", actor=VIEWER, settings=memory_settings, evaluator=evaluator
    )
    data = gated_views.stats(access, client=graph_client)
    for key in ("user_id", "group_id", "entities", "episodes", "communities",
                "relates_to_edges", "mentions_edges"):  # fmt: skip
        assert key in data
    assert data["group_id"] == "user_alice_chen"


def test_repair_is_admin_only_and_audited(
    demo_graphs, graph_client, evaluator, memory_settings
) -> None:
    with pytest.raises(Forbidden):
        repair_indexes(
            "alice_chen", actor=VIEWER, settings=memory_settings, evaluator=evaluator,
            client=graph_client,
        )  # fmt: skip
    assert graph_client.queries_run == 0
    result = repair_indexes(
        "alice_chen", actor=ADMIN, settings=memory_settings, evaluator=evaluator,
        client=graph_client,
    )  # fmt: skip
    assert result["after"]["drift"] == 0 and result["statements"]
    with session_scope(memory_settings) as session:
        repairs = list_audit(session, action="memory.repair_indexes")
    assert sorted((r.actor, r.outcome) for r in repairs) == [
        (ADMIN.id, "ok"),
        (VIEWER.id, "forbidden"),
    ]


def test_ratification_episodes_and_relations(demo_graphs, graph_client, evaluator, memory_settings):
    def open_(view: str):
        return open_view(
            "alice_chen", view, actor=VIEWER, settings=memory_settings, evaluator=evaluator
        )

    rat = gated_views.ratification(open_("ratification"), client=graph_client)
    assert set(rat["next_pass"]) == {"promote", "supersede", "leave"}
    assert all(v > 0 for v in rat["next_pass"].values()), rat["next_pass"]
    assert sum(rat["next_pass"].values()) == rat["by_status"]["tentative"]
    assert rat["tentative_total"] == rat["by_status"]["tentative"] == len(rat["tentative"])
    eps = gated_views.episodes(open_("episodes"), limit=100, client=graph_client)["episodes"]
    assert any(e["oversized"] for e in eps) and not all(e["oversized"] for e in eps)
    assert {e["source_kind"] for e in eps if e["enveloped"]} == {
        "user_asserted", "assistant_derived", "tool_observed"
    }  # fmt: skip
    assert any(not e["enveloped"] for e in eps)
    assert all(e["mentions"] for e in eps)
    rel = gated_views.relations(open_("relations"), client=graph_client)
    assert rel["names"] and rel["duplicates"]["mirrored"]
