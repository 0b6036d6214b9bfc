"""AppTest: the "as of" control on the Facts, Entities and Warm context pages, and "Diff
with" on the Facts page. Real FalkorDB graph (`desk_graph`), real flags file, real store."""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from tests.fixtures.desk import DESK_USER, DeskGraph
from tests.fixtures.graph import REPO, memory_audit
from tests.memory.history.conftest import BETWEEN
from yuxi_dash.memory.history.timeline import parse_moment
from yuxi_dash.settings import get_settings
from yuxi_dash.ui.memory import clear_memory_caches
from yuxi_dash.ui.memory_facts import clear_desk_caches
from yuxi_dash.ui.memory_review.as_of import clear_as_of_caches


@pytest.fixture(autouse=True)
def _fresh_reads() -> None:
    clear_desk_caches()
    clear_as_of_caches()


def frames(at: AppTest) -> list[Any]:
    return [frame.value for frame in at.dataframe]


def shown(at: AppTest) -> str:
    return " ".join(str(m.value) for m in [*at.markdown, *at.caption, *at.info, *at.subheader])


def linked(page: str, **params: str) -> AppTest:
    """A page opened from a URL (a reload, or a link in a support ticket)."""
    clear_memory_caches()
    at = AppTest.from_file(str(REPO / "app_pages" / page), default_timeout=60)
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


def uuids_in(at: AppTest) -> set[str]:
    found: set[str] = set()
    for frame in frames(at):
        if "uuid" in frame.columns:
            found |= set(frame["uuid"])
    return found


def test_the_facts_page_as_of_a_moment_and_the_diff(memory_pages, desk_graph: DeskGraph) -> None:
    f = desk_graph.facts
    at = memory_pages("memory_facts.py", DESK_USER)
    assert "Memory as of" not in shown(at)  # no moment: today's page as before
    at.date_input(key="as_of_day").set_value(date(2026, 1, 5))
    at.time_input(key="as_of_time").set_value(time(9, 3)).run()
    assert not at.exception
    assert at.query_params["as_of"] == "2026-01-05T09:03:00+00:00"
    assert "3 fact(s) held then, 3 of them valid in the world then" in shown(at)
    table = frames(at)[0]
    assert set(table["uuid"]) == {f["dark"], f["caching"], f["tentative"]}
    assert at.expander[0].label == "Episodes written by then: 2 (newest 20)"  # 09:01:20, 09:02:20
    at.date_input(key="diff_day").set_value(date(2026, 1, 5))
    at.time_input(key="diff_time").set_value(time(9, 7)).run()
    assert at.query_params["diff"] == "2026-01-05T09:07:00+00:00"
    assert any("Diff from" in str(h.value) for h in at.subheader)
    assert "1 added, 0 retired, 0 changed, 2 came and went." in shown(at)
    text = " ".join(frame.to_csv() for frame in frames(at))
    assert "episode: episode 104, inferred" in text and f["full_time"] in text
    views = [r.detail.get("view") for r in memory_audit(get_settings(), DESK_USER)]
    assert "as_of" in views and "diff" in views


def test_a_link_opens_the_moment(memory_pages, desk_graph: DeskGraph) -> None:
    memory_pages("memory_facts.py", DESK_USER)  # the flags file and the store for the page
    at = linked("memory_facts.py", user=DESK_USER, as_of=BETWEEN.isoformat())
    assert not at.exception
    assert at.date_input(key="as_of_day").value == date(2026, 1, 5)
    assert at.query_params["as_of"] == BETWEEN.isoformat()  # the link's seconds are kept
    assert "6 fact(s) held then, 4 of them valid in the world then" in shown(at)
    bad = linked("memory_facts.py", user=DESK_USER, as_of="last tuesday")
    assert not bad.exception and "ISO date" in " ".join(str(w.value) for w in bad.warning)
    assert "Memory as of" not in shown(bad)


def test_entities_and_warm_context_as_of(memory_pages, desk_graph: DeskGraph) -> None:
    at = memory_pages("memory_entities.py", DESK_USER)
    at.date_input(key="as_of_day").set_value(date(2025, 12, 1)).run()
    assert "0 entities written by then" in shown(at)
    memory_pages("memory_warm_context.py", DESK_USER)
    at = linked("memory_warm_context.py", user=DESK_USER, as_of=BETWEEN.isoformat())
    at.text_input(key="warm_query").input("Acme contractor").run()
    assert not at.exception
    block = at.code[0].value
    assert "Desk User works at Acme as a contractor (2026-01-05T09:03:00+00:00 — present)" in block
    assert block.count("\n- [") == 4 and "reranker" in " ".join(str(i.value) for i in at.info)


def test_today_keeps_one_moment_across_reruns(memory_pages, desk_graph: DeskGraph) -> None:
    """Today at 23:59 is later than now: read as now, to the minute, and kept on reruns."""
    at = memory_pages("memory_facts.py", DESK_USER)
    today = datetime.now(UTC).date()
    at.date_input(key="as_of_day").set_value(today).run()
    assert not at.exception
    first = at.query_params["as_of"]
    assert parse_moment(first).second == 0
    at.run()
    at.run()
    assert at.query_params["as_of"] == first  # the same cache key: no new scan


def test_a_new_moment_goes_back_to_page_one(
    memory_pages, desk_graph: DeskGraph, monkeypatch
) -> None:
    monkeypatch.setattr("yuxi_dash.ui.memory_review.as_of.PAGE_SIZE", 2)
    at = memory_pages("memory_facts.py", DESK_USER)
    at.date_input(key="as_of_day").set_value(date(2026, 1, 5))
    at.time_input(key="as_of_time").set_value(time(9, 6)).run()  # 4 held: two pages
    at.number_input(key="as_of_page").set_value(2).run()
    assert len(frames(at)[0]) == 2
    at.time_input(key="as_of_time").set_value(time(9, 3)).run()  # 3 held: page 1 again
    assert not at.exception
    assert at.number_input(key="as_of_page").value == 1
    assert len(frames(at)[0]) == 2 and "held no facts" not in shown(at)
