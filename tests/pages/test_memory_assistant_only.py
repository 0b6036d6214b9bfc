"""AppTest: assistant-only facts on the Facts page (the filter, the bulk retract's
preview, the retract and its undo, a stale preview dropped, no bulk form for a viewer) and on
the overview (the share, one line when it cannot be read, the fleet list).

Real FalkorDB graph written with graphiti-core's classes (`plant_words`), the demo's flag
file, the real store.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fixtures.graph import make_client, memory_audit
from tests.memory.quality.assistant_only_graph import (
    DAY_2,
    EARLY,
    WORDS_USER,
    WordsGraph,
    plant_words,
)
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.errors import MemoryQueryTimeout
from yuxi_dash.memory.graph.server import ServerHandle
from yuxi_dash.memory.quality import assistant_only
from yuxi_dash.memory.support import corrections
from yuxi_dash.settings import get_settings
from yuxi_dash.ui.memory_facts import clear_desk_caches
from yuxi_dash.ui.memory_review.assistant_only import clear_assistant_only_caches

REASON = "the assistant's guesses are not the user's memory"


@pytest.fixture
def words_graph(falkordb_server: ServerHandle, memory_settings) -> Iterator[WordsGraph]:
    clear_assistant_only_caches()
    clear_desk_caches()
    client = make_client(falkordb_server, memory_settings)
    try:
        yield plant_words(client)
    finally:
        client.close()


def _text(at) -> str:
    """What the page says, Markdown escapes dropped ("38\\.5%" reads "38.5%")."""
    shown = [*at.markdown, *at.caption, *at.info, *at.success, *at.error]
    return " ".join(str(m.value) for m in shown).replace("\\", "")


def test_the_facts_filter_and_the_bulk_retract_with_its_preview_and_undo(
    memory_pages, words_graph: WordsGraph
) -> None:
    at = memory_pages("memory_facts.py", WORDS_USER)
    assert not at.exception
    tables = len(at.dataframe)
    assert "Assistant-only facts" in [s.value for s in at.subheader]
    at = at.toggle(key="assistant_only_show").set_value(True).run()
    assert not at.exception
    assert "**5** of 13 live facts (38.5%) are assistant-only" in _text(at)
    assert len(at.dataframe) == tables + 1
    listed = list(at.dataframe[-1].value["fact"])
    assert listed[:3] == [f"Words User fact {n} about Lisbon" for n in EARLY] and len(listed) == 5

    at.text_input(key="assistant_only_before").input(DAY_2.isoformat())
    at = at.button(key="assistant_only_preview_button").click().run()
    assert not at.exception
    assert "Would retract **3** fact(s) created before 2026-03-02 09:00:00 UTC" in _text(at)
    preview = at.dataframe[-1].value
    assert list(preview["fact"]) == [f"Words User fact {n} about Lisbon" for n in EARLY]
    assert [b.label for b in at.button if b.key == "assistant_only_retract"] == [
        "Retract 3 fact(s)"
    ]
    # nothing changed yet: the preview is a look
    assert [r.action for r in memory_audit(get_settings(), WORDS_USER)].count(
        "memory.bulk_retract"
    ) == 0

    at.text_input(key="assistant_only_reason").input(REASON)
    at = at.button(key="assistant_only_retract").click().run()
    assert not at.exception
    assert "Retracted 3 fact(s); audit row" in _text(at)
    assert "**2** of 10 live facts (20.0%)" in _text(at)
    at = at.button(key="assistant_only_undo").click().run()
    assert not at.exception
    assert "Undid 3 retract(s); audit row" in _text(at)
    assert "**5** of 13 live facts (38.5%)" in _text(at)
    rows = [(r.action, r.outcome) for r in memory_audit(get_settings(), WORDS_USER)]
    assert rows.count(("memory.bulk_retract", "ok")) == 1
    assert rows.count(("memory.bulk_undo", "ok")) == 1
    assert rows.count(("memory.retract", "ok")) == 3 and rows.count(("memory.undo", "ok")) == 3


def test_a_bad_moment_is_one_line_and_changes_nothing(
    memory_pages, words_graph: WordsGraph
) -> None:
    at = memory_pages("memory_facts.py", WORDS_USER, assistant_only_show=True)
    at.text_input(key="assistant_only_before").input("next week")
    at = at.button(key="assistant_only_preview_button").click().run()
    assert not at.exception
    [error] = [e.value for e in at.error]
    assert "invalid_moment" in error and not [
        b for b in at.button if b.key == "assistant_only_retract"
    ]


def test_the_overview_shows_the_share_and_lists_the_fleet(
    memory_pages, words_graph: WordsGraph
) -> None:
    at = memory_pages("memory_overview.py", WORDS_USER)
    assert not at.exception
    assert "Assistant-only facts" not in {m.label for m in at.metric}  # read on request
    at = at.toggle(key="assistant_only_share_show").set_value(True).run()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Assistant-only facts"] == "38.5%"
    assert "5 of 13 live facts have no provenance in the user's own words" in _text(at)
    [fleet] = [b for b in at.button if b.label == "List every user by assistant-only share"]
    at = fleet.click().run()
    assert not at.exception
    table = at.dataframe[-1].value
    shares = dict(zip(table["user_id"], table["share"], strict=True))
    assert shares[WORDS_USER] == "38.5%"
    assert shares["dmitri_ivanov"] == "–"  # gated off in the demo's flags: not read


def test_a_stale_preview_is_dropped_with_its_retract_button(
    memory_pages, words_graph: WordsGraph, memory_settings
) -> None:
    at = memory_pages("memory_facts.py", WORDS_USER, assistant_only_show=True)
    at.text_input(key="assistant_only_before").input(DAY_2.isoformat())
    at = at.button(key="assistant_only_preview_button").click().run()
    assert [b.key for b in at.button if b.key == "assistant_only_retract"]
    operator = Actor(id="other-ops@example.com", role=Role.OPERATOR)
    corrections.retract(WORDS_USER, words_graph.facts[EARLY[0]], actor=operator, reason=REASON)
    at.text_input(key="assistant_only_reason").input(REASON)
    at = at.button(key="assistant_only_retract").click().run()
    assert not at.exception
    [error] = [e.value for e in at.error]
    assert "preview_stale" in error
    assert not [b for b in at.button if b.key == "assistant_only_retract"]
    assert "Would retract" not in _text(at)


def test_a_viewer_sees_the_facts_but_no_bulk_retract(
    memory_pages, words_graph: WordsGraph, monkeypatch
) -> None:
    monkeypatch.setenv("YUXI_DASH_VIEWERS", "operator@localhost")  # the local user: a viewer
    get_settings.cache_clear()
    at = memory_pages("memory_facts.py", WORDS_USER, assistant_only_show=True)
    assert not at.exception
    assert "**5** of 13 live facts (38.5%) are assistant-only" in _text(at)
    assert not [t for t in at.text_input if t.key == "assistant_only_before"]
    assert not [b for b in at.button if str(b.key).startswith("assistant_only_")]


def test_a_failed_share_read_is_one_line_and_the_overview_goes_on(
    memory_pages, words_graph: WordsGraph, monkeypatch
) -> None:
    def times_out(*_args: Any, **_kw: Any) -> Any:
        raise MemoryQueryTimeout("the graph query ran out of time")

    monkeypatch.setattr(assistant_only, "count_bases", times_out)
    at = memory_pages("memory_overview.py", WORDS_USER, assistant_only_share_show=True)
    assert not at.exception
    assert "Fact index health" in [s.value for s in at.subheader]
    assert "Assistant-only facts" not in {m.label for m in at.metric}
    assert [c.value for c in at.caption if "memory_query_timeout" in c.value]
    assert [b for b in at.button if b.label == "List every user by assistant-only share"]
