"""AppTest: ratification page — next-pass counts and the tentative table with hits."""

from __future__ import annotations


def test_ratification_page(memory_pages, graph_client) -> None:
    at = memory_pages("memory_ratification.py", "alice_chen")
    assert not at.exception
    metrics = {m.label: int(m.value) for m in at.metric}
    tentative = graph_client.ro_value(
        "user_alice_chen", "MATCH ()-[e:RELATES_TO {status: 'tentative'}]->() RETURN count(e)"
    )
    assert sum(metrics.values()) == tentative
    assert metrics["Would promote"] > 0 and metrics["Would supersede"] > 0
    table = at.dataframe[0].value
    assert set(table["action"]) == {"promote", "supersede", "leave"}
    assert (table[table["action"] == "promote"]["hits"] >= 1).all()
