"""AppTest: the Facts page's desk across facts, sessions and links (issue 37).

The form belongs to one fact; a fact's corrections are read from the store in any
session, with Undo; the user and the fact are in the URL, and a link wins over the
session's last choice. Real FalkorDB graph (`desk_graph`), real flags file, real store.
"""

from __future__ import annotations

from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from tests.fixtures.desk import DESK_OTHER, DESK_USER, DeskGraph
from tests.fixtures.graph import REPO, memory_audit
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.memory.support import corrections
from yuxi_dash.settings import get_settings
from yuxi_dash.ui.memory import clear_memory_caches
from yuxi_dash.ui.memory_facts import clear_desk_caches

REASON = "the user disputes this fact on the phone"
SECOND = "a reason meant for the dark mode fact"
LOCAL = Actor(id="operator@localhost", role=Role.ADMIN)  # who the page runs as (local mode)
FACTS_PAGE = str(REPO / "app_pages" / "memory_facts.py")


@pytest.fixture(autouse=True)
def _fresh_desk_reads() -> None:
    """The desk's kept reads outlive a test (the key is user, server, uuid) while each test
    plants its graph afresh: start every test without them."""
    clear_desk_caches()


def key(at: AppTest, name: str) -> str:
    """The key of a correction-form widget now (`<name>:<fact uuid>:<round>`)."""
    state = at.session_state
    return f"{name}:{state['desk_form_id']}" if "desk_form_id" in state else name


def _shown(at: AppTest) -> str:
    return " ".join(str(m.value) for m in [*at.markdown, *at.caption, *at.info])


def _successes(at: AppTest) -> str:
    return " ".join(str(s.value) for s in at.success)


def _apply(at: AppTest) -> AppTest:
    [submit] = [b for b in at.button if "Apply" in str(b.label)]
    return submit.click().run()


def _linked(memory_pages: Any, **params: str) -> AppTest:
    """The Facts page opened from a URL (a fresh session: a reload, or a link in a ticket)."""
    clear_memory_caches()
    clear_desk_caches()
    at = AppTest.from_file(FACTS_PAGE, default_timeout=60)
    for key, value in params.items():
        at.query_params[key] = value
    return at


# --- 1. the form belongs to one fact ------------------------------------------------
def test_choosing_another_fact_starts_the_form_afresh(memory_pages, desk_graph: DeskGraph) -> None:
    at = memory_pages("memory_facts.py", DESK_USER, desk_fact=desk_graph.facts["dark"])
    at.radio(key=key(at, "desk_action")).set_value("retract").run()
    at.text_input(key=key(at, "desk_reason")).input("the user never said this at all")
    at.checkbox(key=key(at, "desk_confirm")).check()
    at = _apply(at)
    assert "retract done — audit row" in _successes(at)
    # a second change begun on this fact (reason typed, box ticked), then another fact chosen
    at.text_input(key=key(at, "desk_reason")).input(SECOND)
    at.text_input(key=key(at, "desk_ticket")).input("SUP-1")
    at.checkbox(key=key(at, "desk_confirm")).check()
    at = at.selectbox(key="desk_fact_select").select(desk_graph.facts["caching"]).run()
    assert not at.exception
    assert "Desk User is interested in caching for the onboarding flow" in _shown(at)
    assert at.text_input(key=key(at, "desk_reason")).value == ""
    assert at.text_input(key=key(at, "desk_ticket")).value == ""
    assert at.checkbox(key=key(at, "desk_confirm")).value is False
    assert SECOND not in [w.value for w in at.text_input]  # under no key at all
    assert not any(box.value for box in at.checkbox)
    assert not at.success  # no "retract done" of the other fact
    assert at.radio(key=key(at, "desk_action")).value == "retract"  # this fact's own first choice
    at = _apply(at)  # one click changes nothing: the box is not ticked for this fact
    assert "Tick the confirmation box first." in [w.value for w in at.warning]
    assert "active" in [m.value for m in at.metric]


def test_supersede_opens_on_the_chosen_facts_text(memory_pages, desk_graph: DeskGraph) -> None:
    at = memory_pages("memory_facts.py", DESK_USER, desk_fact=desk_graph.facts["dark"])
    at.radio(key=key(at, "desk_action")).set_value("supersede").run()
    assert at.text_area(key=key(at, "desk_text")).value == "Desk User prefers dark mode"
    at = at.selectbox(key="desk_fact_select").select(desk_graph.facts["caching"]).run()
    at.radio(key=key(at, "desk_action")).set_value("supersede").run()
    assert at.text_area(key=key(at, "desk_text")).value == (
        "Desk User is interested in caching for the onboarding flow"
    )


# --- 7. a fact's corrections, in any session ---------------------------------------------
def test_a_correction_made_elsewhere_shows_with_undo(memory_pages, desk_graph: DeskGraph) -> None:
    fact = desk_graph.facts["dark"]
    done = corrections.correct(
        "retract", DESK_USER, fact, actor=LOCAL, reason=REASON, ticket="SUP-7"
    )
    clear_desk_caches()
    at = memory_pages("memory_facts.py", DESK_USER, desk_fact=fact)  # a new session
    assert not at.exception
    assert "retracted" in [m.value for m in at.metric]
    [row] = [m.value for m in at.markdown if "**retract** by" in str(m.value)]
    assert "operator@localhost" in row and f"audit row {done['audit_id']}" in row
    assert "SUP\\-7" in row or "SUP-7" in row
    assert "disputes this fact" in row
    at = at.button(key="desk_undo").click().run()
    assert not at.exception
    assert "undo done — audit row" in _successes(at)
    assert "active" in [m.value for m in at.metric]
    lines = [str(m.value) for m in at.markdown]
    assert any("**undo** by" in line for line in lines)
    assert any("*undone* by audit row" in line for line in lines)
    assert not [b for b in at.button if b.key == "desk_undo"]  # nothing left to take back


def test_a_viewer_sees_the_corrections_without_undo(
    memory_pages, desk_graph: DeskGraph, monkeypatch
) -> None:
    corrections.correct("retract", DESK_USER, desk_graph.facts["dark"], actor=LOCAL, reason=REASON)
    monkeypatch.setenv("YUXI_DASH_VIEWERS", "operator@localhost")
    get_settings.cache_clear()
    clear_desk_caches()
    at = memory_pages("memory_facts.py", DESK_USER, desk_fact=desk_graph.facts["dark"])
    assert any("**retract** by" in str(m.value) for m in at.markdown)
    assert not [b for b in at.button if b.key == "desk_undo"]
    assert "Corrections need the operator role." in [c.value for c in at.caption]


def test_a_fact_without_corrections_says_so(memory_pages, desk_graph: DeskGraph) -> None:
    at = memory_pages("memory_facts.py", DESK_USER, desk_fact=desk_graph.facts["caching"])
    assert "Corrections of this fact" in [s.value for s in at.subheader]
    assert "No corrections of this fact yet." in [c.value for c in at.caption]


# --- 12. the user and the fact in the URL ---------------------------------------------
def test_a_link_opens_its_user_and_fact_over_the_sessions_last_choice(
    memory_pages, desk_graph: DeskGraph
) -> None:
    at = _linked(memory_pages, user=DESK_USER, fact=desk_graph.facts["caching"])
    at.session_state["memory_user"] = "alice_chen"  # this session last looked at someone else
    at.run()
    assert not at.exception
    assert at.selectbox[0].value == DESK_USER
    assert at.selectbox(key="desk_fact_select").value == desk_graph.facts["caching"]
    assert "Desk User is interested in caching for the onboarding flow" in _shown(at)
    assert at.query_params["user"] == [DESK_USER] or at.query_params["user"] == DESK_USER
    views = [r.detail.get("view") for r in memory_audit(get_settings(), DESK_USER)]
    assert "facts" in views and "provenance" in views  # audited like any view
    # another user chosen: the last user's fact leaves the URL
    at = at.selectbox[0].select(DESK_OTHER).run()
    assert not at.exception and not at.error
    assert "Desk Other prefers tea" in _shown(at)
    assert str(at.query_params["fact"]) != desk_graph.facts["caching"]


def test_a_chosen_fact_survives_a_reload(memory_pages, desk_graph: DeskGraph) -> None:
    at = _linked(memory_pages, user=DESK_USER).run()
    at = at.selectbox(key="desk_fact_select").select(desk_graph.facts["contractor"]).run()
    url = {key: at.query_params[key] for key in ("user", "fact")}
    assert desk_graph.facts["contractor"] in str(url["fact"])
    reloaded = _linked(memory_pages, **{k: _one(v) for k, v in url.items()}).run()
    assert reloaded.selectbox[0].value == DESK_USER
    assert reloaded.selectbox(key="desk_fact_select").value == desk_graph.facts["contractor"]
    assert "Desk User works at Acme as a contractor" in _shown(reloaded)


def _one(value: Any) -> str:
    return value[0] if isinstance(value, list) else str(value)


def test_a_bad_or_gated_user_in_a_link_is_refused_and_audited(
    memory_pages, desk_graph: DeskGraph
) -> None:
    crafted = "x' OR 1=1 //../../etc"
    at = _linked(memory_pages, user=crafted, fact=desk_graph.facts["dark"]).run()
    assert not at.exception and not at.metric
    assert len(at.error) == 1 and "\n" not in at.error[0].value
    [row] = memory_audit(get_settings(), crafted)
    assert (row.outcome, row.detail["view"]) == ("refused", "facts")
    gated = "dmitri_ivanov"  # the demo flags gate this test user off
    at = _linked(memory_pages, user=gated).run()
    assert not at.exception and not at.metric
    assert any("graphiti-memory" in str(w.value) for w in at.warning)
    [row] = memory_audit(get_settings(), gated)
    assert (row.outcome, row.detail["view"]) == ("gated_off", "facts")


def test_a_pasted_fact_goes_in_the_url_and_a_listed_choice_replaces_it(
    memory_pages, desk_graph: DeskGraph
) -> None:
    at = _linked(memory_pages, user=DESK_USER).run()
    at.text_input(key="desk_fact_uuid").input(desk_graph.facts["contractor"]).run()
    assert "Desk User works at Acme as a contractor" in _shown(at)
    assert _one(at.query_params["fact"]) == desk_graph.facts["contractor"]
    at = at.selectbox(key="desk_fact_select").select(desk_graph.facts["caching"]).run()
    assert at.text_input(key="desk_fact_uuid").value == ""
    assert "Desk User is interested in caching for the onboarding flow" in _shown(at)
    assert _one(at.query_params["fact"]) == desk_graph.facts["caching"]
