"""AppTest: the Facts page — relation-name distribution and duplicate tables."""

from __future__ import annotations


def test_facts_page(memory_pages) -> None:
    at = memory_pages("memory_facts.py", "alice_chen")
    assert not at.exception
    assert at.get("vega_lite_chart")
    texts = " ".join(m.value for m in at.markdown)
    assert "Same source, name and target" in texts and "Mirrored edges" in texts
    assert len(at.dataframe) == 3
    assert len(at.dataframe[2].value) >= 3  # planted mirrored pairs
