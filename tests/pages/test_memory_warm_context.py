"""AppTest: the Warm context page — the exact block, BM25 said out loud."""

from __future__ import annotations


def test_warm_context_page(memory_pages) -> None:
    at = memory_pages("memory_warm_context.py", "alice_chen")
    assert not at.exception
    assert at.info  # asks for a query
    at.text_input(key="warm_query").input("dark mode").run()
    assert not at.exception
    assert "BM25" in at.info[0].value
    block = at.code[0].value
    assert block.startswith("<temporal_context>\n<FACTS>\n- ")
    assert "</RECENT_EPISODES>\n</temporal_context>" in block
    assert "dark mode" in block
