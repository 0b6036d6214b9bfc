"""The two-moment diff on the desk graph (graphiti-core's classes, a real FalkorDB): what was
added, retired, came and went, and who did it (the episode, or our correction's audit row)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.fixtures.desk import DeskGraph, message_at
from tests.memory.history.conftest import AFTER, BEFORE, BETWEEN, OPERATOR, REASON, utc_now
from yuxi_dash.errors import YuxiDashError
from yuxi_dash.memory.history.diff import memory_diff, who
from yuxi_dash.memory.support import corrections


def uuids(diff: dict, change: str) -> set[str]:
    return {entry["uuid"] for entry in diff[change]}


def test_added_then_retired_by_a_later_episode(desk_graph: DeskGraph, door) -> None:
    f, ep = desk_graph.facts, desk_graph.episodes
    first = memory_diff(door("diff"), BEFORE.isoformat(), BETWEEN.isoformat())
    assert uuids(first, "added") == {f["contractor"], f["laptop"], f["full_time"]}
    assert first["counts"] == {"added": 3, "retired": 0, "changed": 0, "came_and_went": 0}
    by = {e["uuid"]: e["by"] for e in first["added"]}
    assert by[f["contractor"]]["uuid"] == ep["old"] and by[f["full_time"]]["uuid"] == ep["new"]
    assert by[f["contractor"]]["inferred"] is False
    second = memory_diff(door("diff"), BETWEEN.isoformat(), AFTER.isoformat())
    assert uuids(second, "retired") == {f["contractor"], f["laptop"]} and second["added"] == []
    for entry in second["retired"]:  # the episode graphiti-core was ingesting at 09:06
        assert entry["by"]["uuid"] == ep["new"] and entry["by"]["inferred"] is True
        assert entry["retired_at"] == desk_graph.retired_at.isoformat()
    across = memory_diff(door("diff"), BEFORE.isoformat(), AFTER.isoformat())
    assert uuids(across, "added") == {f["full_time"]} and across["retired"] == []
    assert uuids(across, "came_and_went") == {f["contractor"], f["laptop"]}
    went = {e["uuid"]: e["by"] for e in across["came_and_went"]}[f["contractor"]]
    assert went["added_by"]["uuid"] == ep["old"] and went["retired_by"]["uuid"] == ep["new"]


def test_our_retract_and_its_undo_are_changes_with_their_audit_rows(
    desk_graph: DeskGraph, door, evaluator, memory_settings
) -> None:
    dark = desk_graph.facts["dark"]
    kw = {"actor": OPERATOR, "settings": memory_settings, "evaluator": evaluator}
    start = utc_now()
    done = corrections.retract(desk_graph.user_id, dark, reason=REASON, ticket="SUP-7", **kw)
    middle = utc_now()
    undone = corrections.undo_correction(done["audit_id"], **kw)
    end = utc_now()
    retired = memory_diff(door("diff"), start.isoformat(), middle.isoformat())
    assert uuids(retired, "retired") == {dark} and retired["counts"]["retired"] == 1
    by = retired["retired"][0]["by"]
    assert (by["kind"], by["audit_id"], by["action"], by["actor"]) == (
        "correction",
        done["audit_id"],
        "retract",
        OPERATOR.id,
    )
    assert by["reason"] == REASON and by["ticket"] == "SUP-7"
    back = memory_diff(door("diff"), middle.isoformat(), end.isoformat())
    assert (
        uuids(back, "added") == {dark} and back["added"][0]["by"]["audit_id"] == undone["audit_id"]
    )
    whole = memory_diff(door("diff"), start.isoformat(), end.isoformat())
    assert whole["counts"] == {"added": 0, "retired": 0, "changed": 0, "came_and_went": 0}
    assert [c["audit_id"] for c in whole["corrections_between"]] == [
        done["audit_id"],
        undone["audit_id"],
    ]
    # the desk graph's own history is still there, before our corrections
    assert uuids(memory_diff(door("diff"), BEFORE.isoformat(), AFTER.isoformat()), "added") == {
        desk_graph.facts["full_time"]
    }


def test_a_supersede_adds_the_new_fact_and_retires_the_old(
    desk_graph: DeskGraph, door, evaluator, memory_settings
) -> None:
    dark = desk_graph.facts["dark"]
    start = utc_now()
    done = corrections.supersede(
        desk_graph.user_id,
        dark,
        text="Desk User prefers light mode",
        actor=OPERATOR,
        reason=REASON,
        settings=memory_settings,
        evaluator=evaluator,
    )
    diff = memory_diff(door("diff"), start.isoformat(), utc_now().isoformat())
    assert uuids(diff, "retired") == {dark}
    assert uuids(diff, "added") == {done["new_fact_uuid"]}
    assert diff["added"][0]["fact"] == "Desk User prefers light mode"
    assert diff["added"][0]["by"]["audit_id"] == done["audit_id"]


def test_from_must_be_before_to(desk_graph: DeskGraph, door) -> None:
    with pytest.raises(YuxiDashError) as refused:
        memory_diff(door("diff"), AFTER.isoformat(), BEFORE.isoformat())
    assert refused.value.code == "invalid_input"


def test_boundaries_an_expiry_belongs_to_the_window_that_ends_at_it(
    desk_graph: DeskGraph, door
) -> None:
    f, retired = desk_graph.facts, desk_graph.retired_at  # 09:06
    minute = timedelta(minutes=1)
    ending = memory_diff(door("diff"), (retired - minute).isoformat(), retired.isoformat())
    assert uuids(ending, "retired") == {f["contractor"], f["laptop"]}
    after = memory_diff(door("diff"), retired.isoformat(), (retired + minute).isoformat())
    assert after["counts"]["retired"] == 0 and after["retired"] == []
    created = message_at(5)  # full-time: created at exactly 09:05
    assert f["full_time"] in uuids(
        memory_diff(door("diff"), (created - minute).isoformat(), created.isoformat()), "added"
    )
    assert f["full_time"] not in uuids(
        memory_diff(door("diff"), created.isoformat(), (created + minute).isoformat()), "added"
    )


def test_a_forgetting_retires_and_a_ratification_changes(
    desk_graph: DeskGraph, door, platform_set
) -> None:
    f, ep = desk_graph.facts, desk_graph.episodes
    platform_set("caching", forgotten_at=message_at(5).isoformat())
    platform_set("tentative", status="active", ratified_at=message_at(5).isoformat())
    diff = memory_diff(door("diff"), BEFORE.isoformat(), AFTER.isoformat())
    assert uuids(diff, "retired") == {f["caching"]}
    (caching,) = diff["retired"]
    assert caching["retired_at"] == message_at(5).isoformat()
    assert caching["by"]["uuid"] == ep["new"] and caching["by"]["inferred"] is True
    assert uuids(diff, "changed") == {f["tentative"]} and diff["counts"]["changed"] == 1
    (ratified,) = diff["changed"]
    assert ratified["fields"] == {"status_then": {"from": "tentative", "to": "active"}}
    assert ratified["by"] == {"kind": "ratification"}
    assert "ratification" in who(ratified["by"])
    before = memory_diff(door("diff"), BEFORE.isoformat(), message_at(4).isoformat())
    assert before["changed"] == [] and f["caching"] not in uuids(before, "retired")


def test_a_restore_of_a_status_without_expiry_is_a_change(
    desk_graph: DeskGraph, door, evaluator, memory_settings, platform_set
) -> None:
    """Our restore of a fact the platform marked superseded in place (no expiry): held at both
    moments, with another status: `changed`, by our correction."""
    platform_set("caching", status="superseded")
    start = utc_now()
    done = corrections.restore(
        desk_graph.user_id,
        desk_graph.facts["caching"],
        actor=OPERATOR,
        reason=REASON,
        settings=memory_settings,
        evaluator=evaluator,
    )
    diff = memory_diff(door("diff"), start.isoformat(), utc_now().isoformat())
    (changed,) = diff["changed"]
    assert changed["uuid"] == desk_graph.facts["caching"]
    assert changed["fields"]["status_then"] == {"from": "superseded", "to": "active"}
    assert changed["by"]["audit_id"] == done["audit_id"]


def test_retired_in_the_window_and_restored_after_it(
    desk_graph: DeskGraph, door, evaluator, memory_settings
) -> None:
    """graphiti-core retired the fact in the window; our restore came after its end: the
    retirement is the episode's (inferred), not "not recorded"."""
    corrections.restore(
        desk_graph.user_id,
        desk_graph.facts["contractor"],
        actor=OPERATOR,
        reason=REASON,
        settings=memory_settings,
        evaluator=evaluator,
    )
    diff = memory_diff(door("diff"), BETWEEN.isoformat(), AFTER.isoformat())
    by = {e["uuid"]: e for e in diff["retired"]}
    contractor, laptop = by[desk_graph.facts["contractor"]], by[desk_graph.facts["laptop"]]
    assert contractor["by"] == laptop["by"] and contractor["by"]["inferred"] is True
    assert contractor["retired_at"] == desk_graph.retired_at.isoformat()


def test_our_retract_in_the_window_has_its_time(
    desk_graph: DeskGraph, door, evaluator, memory_settings
) -> None:
    start = utc_now()
    done = corrections.retract(
        desk_graph.user_id,
        desk_graph.facts["dark"],
        actor=OPERATOR,
        reason=REASON,
        settings=memory_settings,
        evaluator=evaluator,
    )
    diff = memory_diff(door("diff"), start.isoformat(), utc_now().isoformat())
    (entry,) = diff["retired"]
    stamp = done["after"][desk_graph.facts["dark"]]["expired_at"]
    assert entry["retired_at"] == stamp and entry["by"]["at"] == stamp  # row time = edge stamp
