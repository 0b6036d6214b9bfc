"""`memory bundle --as-of`: the bundle's `memory.as_of` section on the desk graph (graphiti-core's
classes, real FalkorDB), valid against the schema, in JSON and Markdown; a bad moment refused."""

from __future__ import annotations

import io
import json

import jsonschema
import pytest

from tests.fixtures.desk import DESK_USER, DeskGraph
from tests.fixtures.graph import memory_audit
from tests.memory.history.conftest import BETWEEN
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.errors import InvalidInput
from yuxi_dash.memory.support.bundle import BUNDLE_ACTION, BundleProgress, write_bundle
from yuxi_dash.memory.support.bundle_schema import BUNDLE_SCHEMA
from yuxi_dash.settings import get_settings

VIEWER = Actor(id="support@example.com", role=Role.VIEWER)


@pytest.fixture
def env(
    desk_graph: DeskGraph, memory_settings, demo_flags_file, demo_graphs, monkeypatch
) -> DeskGraph:
    monkeypatch.setenv("YUXI_DASH_LD_FLAGS_FILE", str(demo_flags_file))
    get_settings.cache_clear()
    return desk_graph


def test_the_bundle_holds_the_memory_as_it_was(env: DeskGraph) -> None:
    out = io.StringIO()
    write_bundle(DESK_USER, out, actor=VIEWER, as_of=BETWEEN.isoformat())
    bundle = json.loads(out.getvalue())
    jsonschema.validate(bundle, BUNDLE_SCHEMA)
    then = bundle["memory"]["as_of"]
    assert then["moment"] == BETWEEN.isoformat()
    assert then["counts"] == {"held": 6, "valid": 4, "retired": 0, "deleted_since": 0}
    assert {f["uuid"] for f in bundle["as_of_facts"] if not f["valid_then"]} == {
        env.facts["contractor"],
        env.facts["laptop"],
    }
    assert bundle["as_of_fact_count"] == len(bundle["as_of_facts"]) == 6
    assert [f["uuid"] for f in bundle["as_of_facts"]] == sorted(env.facts.values())
    assert len(then["episodes"]) == 4 and bundle["fact_count"] == 6
    rows = [r for r in memory_audit(get_settings(), DESK_USER) if r.action == BUNDLE_ACTION]
    assert rows[0].detail["as_of"] == BETWEEN.isoformat()
    text = io.StringIO()
    write_bundle(DESK_USER, text, actor=VIEWER, fmt="md", as_of=BETWEEN.isoformat())
    assert "## Memory as of" in text.getvalue()
    assert "6 fact(s) held then (0 of them deleted since), 4 valid in the world then" in (
        text.getvalue()
    )
    assert "## Facts held as of" in text.getvalue() and "are undone here" not in text.getvalue()
    assert "6 fact(s) held then.\n" in text.getvalue()
    plain = io.StringIO()
    write_bundle(DESK_USER, plain, actor=VIEWER)
    assert "as_of" not in json.loads(plain.getvalue())["memory"]
    assert "as_of_facts" not in json.loads(plain.getvalue())


def test_the_bundle_streams_every_fact_held_then_a_page_at_a_time(env: DeskGraph) -> None:
    """Pages of 2 facts (as of 09:05:30: six held) give every fact once, in uuid order."""
    out = io.StringIO()
    steps: list[BundleProgress] = []
    write_bundle(
        DESK_USER,
        out,
        actor=VIEWER,
        as_of=BETWEEN.isoformat(),
        fact_page=2,
        progress=steps.append,
    )
    bundle = json.loads(out.getvalue())
    jsonschema.validate(bundle, BUNDLE_SCHEMA)
    assert [f["uuid"] for f in bundle["as_of_facts"]] == sorted(env.facts.values())
    # progress counts today's facts and those held then against one total, and only grows
    total = bundle["fact_count"] + bundle["as_of_fact_count"]
    assert [s.facts for s in steps if s.section == "as_of_facts"] == [6, 8, 10, 12]
    assert all(s.facts_total == total for s in steps) and steps[-1].fraction == 1.0
    assert [s.fraction for s in steps] == sorted(s.fraction for s in steps)


def test_a_bad_moment_writes_nothing_and_is_audited(env: DeskGraph) -> None:
    out = io.StringIO()
    with pytest.raises(InvalidInput):
        write_bundle(DESK_USER, out, actor=VIEWER, as_of="when it went wrong")
    assert out.getvalue() == ""
    with pytest.raises(InvalidInput):
        write_bundle(DESK_USER, out, actor=VIEWER, as_of="")  # empty: refused, not ignored
    assert out.getvalue() == ""
    rows = [r for r in memory_audit(get_settings(), DESK_USER) if r.action == BUNDLE_ACTION]
    assert [(r.outcome, r.detail["code"]) for r in rows] == [("refused", "invalid_input")] * 2
