"""AppTest: the Facts page — relation-name distribution and duplicate tables."""

from __future__ import annotations

from typing import Any

import pytest

from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.memory.support import corrections
from yuxi_dash.settings import get_settings
from yuxi_dash.ui.memory_facts import clear_desk_caches

REASON = "the user disputes this fact on the phone"


def key(at: Any, name: str) -> str:
    """The key of a correction-form widget now (`<name>:<fact uuid>:<round>`)."""
    return f"{name}:{at.session_state['desk_form_id']}"


@pytest.fixture(autouse=True)
def _fresh_desk_reads() -> None:
    """The desk's kept reads outlive a test (the key is user, server, uuid) while each test
    plants its graph afresh: start every test without them."""
    clear_desk_caches()


def test_facts_page(memory_pages) -> None:
    at = memory_pages("memory_facts.py", "alice_chen")
    assert not at.exception
    assert at.get("vega_lite_chart")
    texts = " ".join(m.value for m in at.markdown)
    assert "Same source, name and target" in texts and "Mirrored edges" in texts
    # the headline fact's validity, then names, same triple, same text, mirrored
    assert len(at.dataframe) == 4
    assert len(at.dataframe[3].value) >= 1  # the planted mirrored pair


# --- the memory desk: provenance, corrections, undo ------------------------------
def _desk_page(memory_pages, desk_graph, fact: str):
    return memory_pages("memory_facts.py", desk_graph.user_id, desk_fact=fact)


def _texts(at) -> str:
    return " ".join(str(m.value) for m in [*at.markdown, *at.caption, *at.success, *at.error])


def test_a_fact_shows_its_message_and_words(memory_pages, desk_graph) -> None:
    at = _desk_page(memory_pages, desk_graph, desk_graph.facts["dark"])
    assert not at.exception
    texts = _texts(at)
    assert "Where this fact came from" in [s.value for s in at.subheader]
    assert "said by **user**" in texts
    assert "**dark** **mode**" in texts  # the key words in bold inside the user's own message
    assert "message #1" in texts
    # shown whole as text: a metric cut "assistant_derived" to "assistant_de…"
    assert "**Source kind:** user_asserted" in texts
    assert "Source kind" not in [m.label for m in at.metric]
    # run alone (outside st.navigation) the link to the thread is a plain one
    assert "(thread_detail?thread=desk-t1&message=1)" in texts


def test_hostile_strings_are_shown_literally(memory_pages, desk_graph) -> None:
    at = _desk_page(memory_pages, desk_graph, "![x](https://evil.example/a.png)")
    assert not at.exception
    assert "invalid_fact_uuid" in _texts(at) or any(
        "the fact uuid must be" in str(e.value) for e in at.error
    )
    assert "![x](https" not in " ".join(str(m.value) for m in at.markdown)


def test_operator_retracts_then_undoes(memory_pages, desk_graph) -> None:
    at = _desk_page(memory_pages, desk_graph, desk_graph.facts["dark"])
    at.radio(key=key(at, "desk_action")).set_value("retract").run()
    at.text_input(key=key(at, "desk_reason")).input("the user never said this at all")
    at.text_input(key=key(at, "desk_ticket")).input("SUP-9")
    at.checkbox(key=key(at, "desk_confirm")).check()
    [submit] = [b for b in at.button if "Apply" in str(b.label)]
    at = submit.click().run()
    assert not at.exception
    done = " ".join(str(s.value) for s in at.success)
    assert "retract done — audit row" in done
    assert "retracted" in " ".join(str(m.value) for m in at.metric)
    at = at.button(key="desk_undo").click().run()
    assert not at.exception
    assert "undo done — audit row" in " ".join(str(s.value) for s in at.success)
    assert "active" in " ".join(str(m.value) for m in at.metric)


def _form_is_empty(at) -> bool:
    return (
        at.text_input(key=key(at, "desk_reason")).value == ""
        and at.text_input(key=key(at, "desk_ticket")).value == ""
        and at.checkbox(key=key(at, "desk_confirm")).value is False
    )


def _apply(at):
    [submit] = [b for b in at.button if "Apply" in str(b.label)]
    return submit.click().run()


def test_the_form_is_disarmed_after_a_correction_and_after_undo(memory_pages, desk_graph) -> None:
    at = _desk_page(memory_pages, desk_graph, desk_graph.facts["dark"])
    at.radio(key=key(at, "desk_action")).set_value("retract").run()
    at.text_input(key=key(at, "desk_reason")).input("the user never said this at all")
    at.text_input(key=key(at, "desk_ticket")).input("SUP-9")
    at.checkbox(key=key(at, "desk_confirm")).check()
    at = _apply(at)
    assert not at.exception
    assert "retracted" in " ".join(str(m.value) for m in at.metric)
    assert _form_is_empty(at)
    assert (
        at.radio(key=key(at, "desk_action")).value == "restore"
    )  # chosen afresh for the new status
    # a second click without re-confirming changes nothing
    at = _apply(at)
    assert "Tick the confirmation box first." in " ".join(str(w.value) for w in at.warning)
    assert "retracted" in " ".join(str(m.value) for m in at.metric)
    at = at.button(key="desk_undo").click().run()
    assert "active" in " ".join(str(m.value) for m in at.metric)
    assert _form_is_empty(at)
    at = _apply(at)
    assert "Tick the confirmation box first." in " ".join(str(w.value) for w in at.warning)
    assert "active" in " ".join(str(m.value) for m in at.metric)


def test_a_short_reason_is_one_line_and_changes_nothing(memory_pages, desk_graph) -> None:
    at = _desk_page(memory_pages, desk_graph, desk_graph.facts["dark"])
    at.radio(key=key(at, "desk_action")).set_value("retract").run()
    at.text_input(key=key(at, "desk_reason")).input("bad")
    at.checkbox(key=key(at, "desk_confirm")).check()
    [submit] = [b for b in at.button if "Apply" in str(b.label)]
    at = submit.click().run()
    assert any(
        "reason_required" in str(e.value) or "at least 3 words" in str(e.value) for e in at.error
    )
    assert "active" in " ".join(str(m.value) for m in at.metric)


def test_a_viewer_sees_provenance_but_no_correction_form(
    memory_pages, desk_graph, monkeypatch
) -> None:
    monkeypatch.setenv("YUXI_DASH_VIEWERS", "operator@localhost")
    from yuxi_dash.settings import get_settings

    get_settings.cache_clear()
    at = _desk_page(memory_pages, desk_graph, desk_graph.facts["dark"])
    assert not at.exception
    assert "said by **user**" in _texts(at)
    assert "Corrections need the operator role." in _texts(at)
    assert not [b for b in at.button if "Apply" in str(b.label)]


def _other_operators_retract(desk_graph) -> dict[str, Any]:
    other = Actor(id="other-ops@example.com", role=Role.OPERATOR)
    result = corrections.correct(
        "retract", desk_graph.user_id, desk_graph.facts["dark"], actor=other, reason=REASON
    )
    clear_desk_caches()  # made outside the page: the page's kept reads are cleared as it does
    return result


def test_an_operator_is_not_offered_undo_of_another_operators_correction(
    memory_pages, desk_graph, monkeypatch
) -> None:
    monkeypatch.setenv("YUXI_DASH_OPERATORS", "operator@localhost")
    get_settings.cache_clear()
    result = _other_operators_retract(desk_graph)
    at = memory_pages(
        "memory_facts.py",
        desk_graph.user_id,
        desk_fact=desk_graph.facts["dark"],
        desk_result=result,
    )
    assert not at.exception
    assert "retract done — audit row" in " ".join(str(s.value) for s in at.success)
    assert not [b for b in at.button if b.key == "desk_undo"]
    assert "Only its author, or an admin with a reason" in _texts(at)


def test_an_admin_undoes_another_operators_correction_with_a_reason(
    memory_pages, desk_graph
) -> None:
    result = _other_operators_retract(desk_graph)  # the local operator is an admin here
    at = memory_pages(
        "memory_facts.py",
        desk_graph.user_id,
        desk_fact=desk_graph.facts["dark"],
        desk_result=result,
    )
    at = at.button(key="desk_undo").click().run()
    assert any("reason" in str(e.value) for e in at.error)
    assert "retracted" in " ".join(str(m.value) for m in at.metric)
    at.text_input(key=key(at, "desk_undo_reason")).input(REASON)
    at = at.button(key="desk_undo").click().run()
    assert not at.exception
    assert "undo done — audit row" in " ".join(str(s.value) for s in at.success)
    assert "active" in " ".join(str(m.value) for m in at.metric)


def test_the_demo_facts_page_opens_on_the_headline_and_claims_only_what_holds(
    demo_env, demo_graphs, falkordb_dir, demo_flags_file, monkeypatch
) -> None:
    """No fact asked for: the page opens on the headline, the user's own fact. A message
    shown for it was written before the fact, and "exact words" means the fact's words."""
    from streamlit.testing.v1 import AppTest

    from tests.fixtures.graph import REPO
    from yuxi_dash.access.roles import Actor, Role
    from yuxi_dash.memory.views.gate import open_view
    from yuxi_dash.memory.views.provenance import fact_provenance
    from yuxi_dash.memory.views.ratification import parse_time
    from yuxi_dash.settings import get_settings
    from yuxi_dash.ui.memory import clear_memory_caches
    from yuxi_dash.ui.memory_facts import clear_desk_caches

    monkeypatch.setenv("YUXI_DASH_FALKORDB_DIR", str(falkordb_dir))  # the seeded graphs
    monkeypatch.setenv("YUXI_DASH_LD_FLAGS_FILE", str(demo_flags_file))
    get_settings.cache_clear()
    clear_memory_caches()
    clear_desk_caches()
    at = AppTest.from_file(str(REPO / "app_pages" / "memory_facts.py"), default_timeout=60)
    at.session_state["memory_user"] = "bruno_silva"
    at.run()
    assert not at.exception
    texts = _texts(at)
    assert "Where this fact came from" in [s.value for s in at.subheader]
    assert "**Source kind:** user_asserted" in texts
    headline = at.query_params["fact"]
    look = open_view("bruno_silva", "provenance", actor=Actor(id="t@x.org", role=Role.VIEWER))
    data = fact_provenance(look, headline)
    created = parse_time(data["fact"]["created_at"])
    for episode in data["episodes"]:
        message = episode["message"]
        if message is None:
            assert "No chat message written before this fact matches this episode." in [
                w.value for w in at.warning
            ]
            continue
        assert parse_time(message["created_at"]) <= created
        assert "found by" in texts
        assert (episode["match"] == "exact words") == (not episode["missing_words"])
