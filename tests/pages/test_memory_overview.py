"""AppTest: memory overview on demo graphs — counts, gates, index health, audit, gated-off user."""

from __future__ import annotations

from tests.fixtures.graph import memory_audit
from yuxi_dash.settings import get_settings


def test_overview_counts_and_audit(memory_pages, graph_client) -> None:
    at = memory_pages("memory_overview.py", "alice_chen")
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    entities = graph_client.ro_value("user_alice_chen", "MATCH (n:Entity) RETURN count(n)")
    facts = graph_client.ro_value("user_alice_chen", "MATCH ()-[e:RELATES_TO]->() RETURN count(e)")
    assert metrics["Entities"] == f"{entities:,}"
    assert metrics["RELATES_TO (directed)"] == f"{facts:,}"
    assert metrics["Drift"] == "0"
    assert any("graphiti-memory" in m.value and "on" in m.value for m in at.markdown)
    rows = memory_audit(get_settings(), "alice_chen")
    assert [(r.action, r.outcome, r.detail["view"]) for r in rows] == [
        ("memory.view", "ok", "overview")
    ]


def test_gated_off_user_shows_the_gate_and_reason(memory_pages) -> None:
    at = memory_pages("memory_overview.py", "dmitri_ivanov")
    assert not at.exception
    assert not at.metric
    assert "graphiti-memory = false (TARGET_MATCH)" in at.warning[0].value
    rows = memory_audit(get_settings(), "dmitri_ivanov")
    assert [r.outcome for r in rows] == ["gated_off"]


def test_picker_lists_existing_graphs(memory_pages) -> None:
    at = memory_pages("memory_overview.py", None)
    assert not at.exception
    options = at.selectbox[0].options
    assert {"alice_chen", "bruno_silva"} <= set(options)
    at.text_input(key="memory_user_search").input("brun").run()
    assert at.selectbox[0].options == ["bruno_silva"]
    at.selectbox[0].select("bruno_silva").run()
    assert not at.exception and at.metric


def test_falkordb_down_is_one_line(memory_pages, monkeypatch) -> None:
    monkeypatch.setenv("GRAPHITI_FALKORDB_HOST", "127.0.0.1")
    monkeypatch.setenv("GRAPHITI_FALKORDB_PORT", "1")  # nothing listens there
    get_settings.cache_clear()
    at = memory_pages("memory_overview.py", "alice_chen")
    assert not at.exception
    assert len(at.error) == 1
    assert "[memory_unavailable]" in at.error[0].value and "\n" not in at.error[0].value
    assert not at.metric
