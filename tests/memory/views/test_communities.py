"""Community rebuild decision: would run, or skipped and why."""

from __future__ import annotations

from yuxi_dash.memory.graph import queries
from yuxi_dash.memory.views.communities import rebuild_decision


def test_decision_rules() -> None:
    d = rebuild_decision(episodes=0, new_episodes=0, last_built_at=None, threshold=5)
    assert (d.would_run, d.reason) == (False, "no_episodes")
    d = rebuild_decision(episodes=7, new_episodes=7, last_built_at=None, threshold=5)
    assert (d.would_run, d.reason) == (True, "first_build")
    d = rebuild_decision(episodes=7, new_episodes=0, last_built_at="2026", threshold=5)
    assert (d.would_run, d.reason) == (False, "no_new_episodes")
    d = rebuild_decision(episodes=7, new_episodes=4, last_built_at="2026", threshold=5)
    assert (d.would_run, d.reason) == (False, "below_threshold")
    d = rebuild_decision(episodes=9, new_episodes=5, last_built_at="2026", threshold=5)
    assert (d.would_run, d.reason) == (True, "enough_new")


def test_rebuild_inputs_match_cypher(demo_graphs, graph_client) -> None:
    # alice: stale (many new), bruno: few new, chloe: fresh (none new)
    expected = {"user_alice_chen": "enough_new", "user_bruno_silva": "below_threshold",
                "user_chloe_martin": "no_new_episodes", "user_dmitri_ivanov": "first_build"}  # fmt: skip
    for group, reason in expected.items():
        episodes, latest, new = queries.community_rebuild_inputs(graph_client, group)
        if latest is not None:
            assert new == graph_client.ro_value(
                group, "MATCH (e:Episodic) WHERE e.created_at > $t RETURN count(e)", {"t": latest}
            )
        d = rebuild_decision(episodes=episodes, new_episodes=new, last_built_at=latest, threshold=5)
        assert d.reason == reason, group
