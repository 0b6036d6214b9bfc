"""AppTest: the Warm context page — the exact block, BM25 said out loud."""

from __future__ import annotations


def test_warm_context_page(memory_pages) -> None:
    at = memory_pages("memory_warm_context.py", "alice_chen")
    assert not at.exception
    assert at.info  # asks for a query
    at.text_input(key="warm_query").input("answers in Polish").run()  # alice's statement
    assert not at.exception
    assert "BM25" in at.info[0].value
    block = at.code[0].value
    assert block.startswith("<temporal_context>\n<FACTS>\n- ")
    assert "</RECENT_EPISODES>\n</temporal_context>" in block
    assert "Alice Chen prefers answers in Polish" in block


def test_facts_no_longer_live_are_listed_under_the_block(memory_pages, graph_client) -> None:
    """A retracted fact the search finds stays in the block (the agent gets it) and is
    listed below it with why it is not live."""
    retracted = (
        "MATCH ()-[e:RELATES_TO]->() WHERE e.status = 'retracted' RETURN e.fact AS fact LIMIT 1"
    )
    user, rows = next(
        (user, rows)
        for user in ("alice_chen", "bruno_silva", "chloe_martin", "elena_rossi")
        if (rows := graph_client.ro_rows(f"user_{user}", retracted))
    )
    at = memory_pages("memory_warm_context.py", user)
    at.text_input(key="warm_query").input(rows[0]["fact"]).run()
    assert not at.exception
    assert f"- {rows[0]['fact']} (" in at.code[0].value
    assert "no longer live" in at.warning[0].value
    listed = at.dataframe[0].value
    assert rows[0]["fact"] in list(listed["Fact"])
    assert set(listed["Why not live"]) <= {
        "retracted",
        "rejected",
        "superseded",
        "contradicted",
        "forgotten",
        "expired",
    }
