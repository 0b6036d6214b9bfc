"""AppTest: the Warm context page — the exact block, BM25 said out loud."""

from __future__ import annotations

import json

from yuxi_dash.memory.graph import queries
from yuxi_dash.memory.views.warm_context import (
    EPISODE_CONTENT_CHARS,
    cut_at_word,
    format_episode_line,
    readable_episode,
)
from yuxi_dash.ui.page_text import literal


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


def _episode_bodies(at) -> list[str]:
    """The episode texts drawn under the block (the gate lines are Markdown too)."""
    return [m.value for m in at.markdown if not m.value.startswith(":material/")]


def test_episodes_are_readable_under_the_verbatim_block(memory_pages, graph_client) -> None:
    """The block keeps each episode as the agent gets it (raw JSON, cut at 500 characters);
    below it each one reads as text: envelope fields apart, real line breaks, a cut at a
    whole word with an ellipsis."""
    at = memory_pages("memory_warm_context.py", "alice_chen")
    at.text_input(key="warm_query").input("answers in Polish").run()
    assert not at.exception
    rows = queries.recent_episodes(graph_client, "user_alice_chen", limit=5)
    block = at.code[0].value
    for row in rows:  # the block is untouched: every episode line as the agent gets it
        assert format_episode_line(row["created_at"], row["content"]) in block
    bodies = _episode_bodies(at)
    assert len(bodies) == len(rows) == 5
    assert not any('"content"' in b or "\\\\n" in b or "{" in b for b in bodies)
    whole = [r for r in rows if len(r["content"]) < EPISODE_CONTENT_CHARS]
    enveloped = [json.loads(r["content"]) for r in whole if r["content"].startswith("{")]
    assert enveloped and any("\n" in e["content"] for e in enveloped)
    for envelope in enveloped:  # real line breaks: Markdown's hard break, not a literal \n
        assert str(literal(envelope["content"])) in bodies
        assert any(
            f"memory_kind: **{envelope['memory_kind']}**" in c.value
            and f"source_kind: **{envelope['source_kind']}**" in c.value
            for c in at.caption
        )
    cut = [r for r in rows if len(r["content"]) >= EPISODE_CONTENT_CHARS]
    assert cut, "alice's recent episodes hold one the query cut at 500 characters"
    full = graph_client.ro_rows(
        "user_alice_chen",
        "MATCH (ep:Episodic) WHERE ep.created_at = $at RETURN ep.content AS content",
        {"at": cut[0]["created_at"]},
    )[0]["content"]
    words = json.loads(full)["content"]
    shown = next(b for b in bodies if b.endswith("…")).removesuffix("…")
    ends = [k for k in range(1, len(words)) if words[k].isspace() and not words[k - 1].isspace()]
    assert any(str(literal(words[:k])) == shown for k in ends), shown[-40:]


def test_readable_episode_forms() -> None:
    plain = readable_episode("2026-01-01T00:00:00+00:00", "assistant: line one\nline two")
    assert plain["fields"] == {"role": "assistant"} and plain["text"] == "line one\nline two"
    assert not plain["cut"]
    text = "word " * 200
    envelope = json.dumps({"role": "tool", "memory_kind": "event", "content": text})
    cut = readable_episode(None, envelope[:EPISODE_CONTENT_CHARS])  # as the query cuts it
    assert cut["fields"] == {"role": "tool", "memory_kind": "event"} and cut["cut"]
    assert cut["text"].endswith("word…") and "wor…" not in cut["text"]
    assert readable_episode(None, "[1, 2]")["text"] == "[1, 2]"  # not an envelope: as written
    assert readable_episode(None, "{not json")["text"] == "{not json"
    assert cut_at_word("alpha beta gamma", 13) == "alpha beta…"
    assert cut_at_word("alpha beta", 10) == "alpha beta"
