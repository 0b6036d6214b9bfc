"""Memory as of a moment on a real graph written with graphiti-core's classes (the desk graph):
the facts held before, between and after a retirement, a real retract at its own time,
the episodes, counts, entities and the warm context then; gated and audited."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.fixtures.desk import DeskGraph, message_at
from tests.fixtures.graph import memory_audit
from tests.memory.history.conftest import AFTER, BEFORE, BETWEEN, OPERATOR, REASON, utc_now
from yuxi_dash.errors import YuxiDashError
from yuxi_dash.memory.history import as_of
from yuxi_dash.memory.support import corrections


def held(result: dict) -> dict[str, bool]:
    """uuid -> valid in the world then."""
    return {f["uuid"]: f["valid_then"] for f in result["facts"]}


def test_facts_before_between_and_after_a_retirement(desk_graph: DeskGraph, door) -> None:
    f = desk_graph.facts
    before = as_of.facts_as_of(door(), BEFORE.isoformat())
    assert held(before) == {f["dark"]: True, f["caching"]: True, f["tentative"]: True}
    assert before["total"] == 3 and before["valid_then"] == 3 and before["retired_by_then"] == 0
    between = as_of.facts_as_of(door(), BETWEEN.isoformat())
    # contractor and laptop were held, but (as known today) no longer true from 09:04
    assert held(between) == {
        f["dark"]: True,
        f["caching"]: True,
        f["tentative"]: True,
        f["contractor"]: False,
        f["laptop"]: False,
        f["full_time"]: True,
    }
    assert (between["total"], between["valid_then"]) == (6, 4)
    contractor = next(x for x in between["facts"] if x["uuid"] == f["contractor"])
    assert contractor["retired_at"] == desk_graph.retired_at.isoformat()
    assert contractor["status_then"] is None and contractor["status_now"] == "superseded"
    after = as_of.facts_as_of(door(), AFTER.isoformat())
    assert set(held(after)) == {f["dark"], f["caching"], f["tentative"], f["full_time"]}
    assert after["retired_by_then"] == 2
    assert [x["created_at"] for x in after["facts"]] == sorted(
        (x["created_at"] for x in after["facts"]), reverse=True
    )  # newest first
    page = as_of.facts_as_of(door(), AFTER.isoformat(), limit=2, offset=2)
    assert [x["uuid"] for x in page["facts"]] == [x["uuid"] for x in after["facts"]][2:4]


def test_a_retract_appears_at_its_own_time(
    desk_graph: DeskGraph, door, evaluator, memory_settings
) -> None:
    dark = desk_graph.facts["dark"]
    before_retract = utc_now()
    done = corrections.retract(
        desk_graph.user_id,
        dark,
        actor=OPERATOR,
        reason=REASON,
        settings=memory_settings,
        evaluator=evaluator,
    )
    after_retract = utc_now()
    then = as_of.facts_as_of(door(), before_retract.isoformat())
    row = next(x for x in then["facts"] if x["uuid"] == dark)  # the graph says retracted now
    assert row["valid_then"] is True and row["status_then"] == "active"
    assert row["status_now"] == "retracted" and row["corrected_since"] is True
    assert [c["audit_id"] for c in row["later"]] == [done["audit_id"]]
    assert then["corrections_after"] == 1
    now = as_of.facts_as_of(door(), after_retract.isoformat())
    assert dark not in held(now) and now["total"] == then["total"] - 1
    # long before: the same as before the retract
    early = as_of.facts_as_of(door(), AFTER.isoformat())
    assert dark in held(early) and early["total"] == 4
    stats_then = as_of.stats_as_of(door(), before_retract.isoformat())
    stats_now = as_of.stats_as_of(door(), after_retract.isoformat())
    assert (stats_then["held_facts"], stats_now["held_facts"]) == (4, 3)
    assert (stats_then["retired_facts"], stats_now["retired_facts"]) == (2, 3)
    assert (stats_then["corrections_by_then"], stats_now["corrections_by_then"]) == (0, 1)


def test_a_restore_after_a_retirement_keeps_the_retirement_in_the_past(
    desk_graph: DeskGraph, door, evaluator, memory_settings
) -> None:
    contractor = desk_graph.facts["contractor"]  # retired by graphiti-core at 09:06
    corrections.restore(
        desk_graph.user_id,
        contractor,
        actor=OPERATOR,
        reason=REASON,
        settings=memory_settings,
        evaluator=evaluator,
    )
    assert contractor not in held(
        as_of.facts_as_of(door(), AFTER.isoformat())
    )  # still retired then
    assert contractor in held(as_of.facts_as_of(door(), BETWEEN.isoformat()))
    now = as_of.facts_as_of(door(), utc_now().isoformat())
    assert contractor in held(now)  # restored: held again (the graph cleared its expiry)


def test_episodes_entities_and_warm_context_then(desk_graph: DeskGraph, door) -> None:
    episodes = as_of.episodes_as_of(door(), BEFORE.isoformat())
    assert [e["uuid"] for e in episodes["episodes"]] == [
        desk_graph.episodes["old"],
        desk_graph.episodes["assistant"],
        desk_graph.episodes["user"],
    ]
    assert episodes["total"] == 3
    entity = desk_graph.entities["user"]
    facts = as_of.entity_facts_as_of(door(), BETWEEN.isoformat(), entity)
    assert facts["total"] == 6
    assert as_of.entity_facts_as_of(door(), BEFORE.isoformat(), entity)["total"] == 3
    entities = as_of.entities_as_of(door(), BEFORE.isoformat())
    assert entities["total"] == 5  # all written a month before
    warm = as_of.warm_context_as_of(door(), "Acme contractor", BETWEEN.isoformat())
    found = {x["uuid"]: x for x in warm["facts"]}
    assert desk_graph.facts["contractor"] in found
    assert found[desk_graph.facts["contractor"]]["invalid_at"] is None  # not known yet then
    assert "reranker" in warm["note"]
    assert warm["block"].count("\n- [") == 4  # the four episodes written by then
    early = as_of.warm_context_as_of(door(), "Acme contractor", BEFORE.isoformat())
    assert early["facts"] == []  # no Acme fact was written yet
    assert early["block"].count("\n- [") == 3


def test_bad_moments_are_refused_and_audited(desk_graph: DeskGraph, door, memory_settings) -> None:
    for bad in ("yesterday", "2999-01-01", "x" * 100):
        with pytest.raises(YuxiDashError) as refused:
            as_of.facts_as_of(door(), bad)
        assert refused.value.code == "invalid_input"
    rows = memory_audit(memory_settings, desk_graph.user_id)
    refusals = [r for r in rows if r.outcome == "refused" and r.detail.get("view") == "as_of"]
    assert len(refusals) == 3
    assert any(r.outcome == "ok" and r.detail.get("view") == "as_of" for r in rows)


def test_boundaries_held_from_its_creation_not_at_its_expiry(desk_graph: DeskGraph, door) -> None:
    f = desk_graph.facts
    created = message_at(2)  # dark mode: created at exactly 09:02
    assert f["dark"] in held(as_of.facts_as_of(door(), created.isoformat()))
    before = as_of.facts_as_of(door(), (created - timedelta(seconds=1)).isoformat())
    assert f["dark"] not in held(before)
    retired = desk_graph.retired_at  # 09:06: contractor and laptop expired
    just_before = as_of.facts_as_of(door(), (retired - timedelta(seconds=1)).isoformat())
    assert {f["contractor"], f["laptop"]} <= set(held(just_before))
    at_expiry = as_of.facts_as_of(door(), retired.isoformat())
    assert not {f["contractor"], f["laptop"]} & set(held(at_expiry))
    assert at_expiry["retired_by_then"] == 2


def test_the_platforms_forgetting_and_ratification_in_place(
    desk_graph: DeskGraph, door, platform_set
) -> None:
    """`forgotten_at` ends a fact as an expiry does; `ratified_at` after the moment means it
    was still tentative then (the platform changes both in place)."""
    f = desk_graph.facts
    forgotten, ratified = message_at(5), message_at(6)  # 09:05, 09:06
    platform_set("caching", forgotten_at=forgotten.isoformat())
    platform_set("tentative", status="active", ratified_at=ratified.isoformat())
    before = as_of.facts_as_of(door(), (forgotten - timedelta(seconds=1)).isoformat())
    assert f["caching"] in held(before)
    caching = next(x for x in before["facts"] if x["uuid"] == f["caching"])
    assert caching["retired_at"] == forgotten.isoformat()
    assert next(x for x in before["facts"] if x["uuid"] == f["tentative"])["status_then"] == (
        "tentative"
    )
    after = as_of.facts_as_of(door(), ratified.isoformat())
    assert f["caching"] not in held(after)
    assert next(x for x in after["facts"] if x["uuid"] == f["tentative"])["status_then"] == "active"
    now = as_of.stats_as_of(door(), utc_now().isoformat())
    assert now["held_facts"] == after["total"] == 3  # dark, tentative, full-time
    assert now["retired_facts"] == 3  # contractor and laptop expired, caching forgotten
    warm = as_of.warm_context_as_of(door(), "caching onboarding", after["as_of"])
    assert [x["not_live"] for x in warm["facts"]] == ["forgotten"]


def test_held_then_counts_a_fact_deleted_since_everywhere(
    desk_graph: DeskGraph, door, evaluator, memory_settings
) -> None:
    """A supersede then its undo: the new fact was held in between and is gone now."""
    kw = {"actor": OPERATOR, "settings": memory_settings, "evaluator": evaluator}
    done = corrections.supersede(
        desk_graph.user_id,
        desk_graph.facts["dark"],
        text="Desk User prefers light",
        reason=REASON,
        **kw,
    )
    between = utc_now()
    corrections.undo_correction(done["audit_id"], **kw)
    then = as_of.facts_as_of(door(), between.isoformat())
    assert [x["uuid"] for x in then["deleted_since"]] == [done["new_fact_uuid"]]
    stats = as_of.stats_as_of(door(), between.isoformat())
    assert then["total"] == stats["held_facts"] == 4  # caching, tentative, full-time, the new
    assert then["listed"] == len(then["facts"]) == 3
    assert then["valid_then"] == stats["valid_facts"] == 4


def test_a_corrections_row_time_is_its_edges_stamp(
    desk_graph: DeskGraph, evaluator, memory_settings
) -> None:
    from yuxi_dash.memory.history.timeline import load_timeline

    done = corrections.retract(
        desk_graph.user_id,
        desk_graph.facts["dark"],
        actor=OPERATOR,
        reason=REASON,
        settings=memory_settings,
        evaluator=evaluator,
    )
    (row,) = load_timeline(memory_settings, desk_graph.user_id).corrections
    assert row.audit_id == done["audit_id"]
    assert row.after[desk_graph.facts["dark"]]["expired_at"] == row.at.isoformat()
    assert "fact_embedding" not in row.before[desk_graph.facts["dark"]]
