"""app_pages/compression_quality.py: the fleet's compressions per day, per agent, the worst first.

Two threads are compressed by our core (`sources.compress_thread_context`: real records
with real ledgers); beside them, records written as the projection writes the attached
platform's automatic ones (`store.compressions.insert_records`), one of them 40 days old.
Every figure is checked against the seeded rows, under each filter.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from tests.fixtures.app import APP
from tests.ui.compressed_thread import compressed_thread
from yuxi_dash.store.compressions import insert_records
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Conversation
from yuxi_dash.ui.compressions import loaders as compression_loaders
from yuxi_dash.ui.loaders import clear_loaders
from yuxi_dash.ui.page_text import pct

PAGE = "app_pages/compression_quality.py"


@pytest.fixture(autouse=True)
def fresh_caches() -> Iterator[None]:
    clear_loaders()
    compression_loaders.clear()
    yield
    compression_loaders.clear()


def _attached(index: int, at: datetime, cited: tuple[int, int, int]) -> dict[str, Any]:
    total, visible, lost = cited
    return {
        "thread_id": "plat-1",
        "event_key": f"{index:064d}",
        "at": at,
        "trigger": "automatic",
        "actor": None,
        "origin": "attached",
        "agent_slug": "research",
        "checkpoint_id": f"cp-{index}",
        "before_tokens": 50_000,
        "after_tokens": 4_000,
        "compressed_messages": 30,
        "summary": "## SESSION INTENT\n- research",
        "history_file": None,
        "history_sha256": None,
        "ledger": {"items": []},
        "evidence_visible": visible,
        "evidence_recoverable": total - visible - lost,
        "evidence_lost": lost,
        "cited_total": total,
        "cited_visible": visible,
        "cited_lost": lost,
    }


@pytest.fixture
def fleet() -> list[dict[str, Any]]:
    """Every record, as dicts with the columns the page sums."""
    records = [compressed_thread("t1")[1], compressed_thread("t2", agent_slug="agent-b")[1]]
    now = datetime.now(UTC)
    attached = [
        _attached(1, now - timedelta(hours=3), (6, 1, 4)),
        _attached(2, now - timedelta(days=2), (2, 2, 0)),
        _attached(3, now - timedelta(days=40), (3, 0, 3)),  # outside the default window
    ]
    with session_scope() as session:
        session.add(Conversation(thread_id="plat-1", user_id="u9", agent_slug="research"))
        session.flush()
        insert_records(session, attached)
    for record in records:
        cited = record["ledger"]["cited"]
        record.update(
            cited_total=sum(cited.values()),
            cited_visible=cited["visible"],
            cited_lost=cited["lost"],
        )
    return [*records, *attached]


def _open(**choices: str) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    at.switch_page(PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    for key, value in choices.items():
        at.selectbox(key=key).set_value(value).run()
        assert not at.exception, [e.value for e in at.exception]
    return at


def _expected(rows: list[dict[str, Any]]) -> dict[str, str]:
    cited = sum(r["cited_total"] for r in rows)
    visible = sum(r["cited_visible"] for r in rows)
    return {
        "Compressions": f"{len(rows):,}",
        "Tokens saved": f"{sum(r['before_tokens'] - r['after_tokens'] for r in rows):,}",
        "Cited kept in view": pct(visible / cited) if cited else "–",
        "Lost cited evidence": f"{sum(r['cited_lost'] > 0 for r in rows):,}",
    }


def _recent(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["at"] >= datetime.now(UTC) - timedelta(days=30)]


def test_an_empty_store_says_no_compression_is_recorded() -> None:
    at = _open()
    assert [i.value for i in at.main.info] == ["No compression recorded yet."]
    assert not at.main.metric and not at.main.dataframe


def test_the_fleet_figures_are_the_sums_of_the_records(fleet: list[dict[str, Any]]) -> None:
    at = _open()
    assert {m.label: m.value for m in at.metric} == _expected(_recent(fleet))
    assert len(at.get("vega_lite_chart")) == 2  # per day, and kept in view per agent
    [worst] = [d.value for d in at.dataframe]
    hiding = [r for r in _recent(fleet) if r["cited_total"] > r["cited_visible"]]
    assert len(worst) == len(hiding)
    losses = list(zip(worst["cited lost"], worst["cited hidden"], strict=True))
    assert losses == sorted(losses, key=lambda pair: (-pair[0], -(pair[0] + pair[1])))
    assert worst["cited lost"].iloc[0] == 4 and worst["origin"].iloc[0] == "attached: platform"
    assert set(worst["thread"]) <= {r["thread_id"] for r in fleet}
    for row in worst.to_dict("records"):
        assert row["open"].startswith(f"thread_detail?thread={row['thread']}&compression=")


def test_each_filter_narrows_the_figures(fleet: list[dict[str, Any]]) -> None:
    recent = _recent(fleet)
    at = _open(quality_agent="agent-b")
    assert {m.label: m.value for m in at.metric} == _expected(
        [r for r in recent if r["agent_slug"] == "agent-b"]
    )
    at = _open(quality_trigger="manual")
    manual = [r for r in recent if r["trigger"] == "manual"]
    assert {m.label: m.value for m in at.metric} == _expected(manual) and len(manual) == 2
    if not at.dataframe:
        assert all(r["cited_total"] == r["cited_visible"] for r in manual)
    else:
        assert set(at.dataframe[0].value["trigger"]) == {"manual, by ops@example.com"}
    at = _open(quality_origin="attached platform")
    assert {m.label: m.value for m in at.metric} == _expected(
        [r for r in recent if r["origin"] == "attached"]
    )
    at = _open(quality_window="any time")
    assert {m.label: m.value for m in at.metric} == _expected(fleet)


def test_filters_that_match_nothing_say_so(fleet: list[dict[str, Any]]) -> None:
    at = _open(quality_agent="agent-b", quality_origin="attached platform")
    assert [i.value for i in at.main.info] == ["No compressions match these filters."]
    assert not at.main.metric
