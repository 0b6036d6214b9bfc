"""Chat vs memory: key terms, support, suspects first."""

from __future__ import annotations

from yuxi_dash.memory.views.chat_compare import compare_facts, key_terms


def test_key_terms_skip_stopwords_and_the_users_name() -> None:
    assert key_terms("Alice Chen prefers the dark mode", exclude=["alice", "chen"]) == [
        "prefers",
        "dark",
        "mode",
    ]


def test_support_and_order() -> None:
    messages = [
        {"role": "user", "content": "I really like dark mode in my editor"},
        {"role": "assistant", "content": "You also enjoy hiking in the Alps"},
    ]
    facts = [
        {"fact": "Alice enjoys hiking in the Alps", "source_kind": "user_asserted"},
        {"fact": "Alice likes dark mode", "source_kind": "user_asserted"},
        {"fact": "Alice works at Globex", "source_kind": "tool_observed"},
    ]
    out = compare_facts(facts, messages, user_name="Alice")
    assert out[0]["fact"] == "Alice enjoys hiking in the Alps"  # asserted, only the bot said it
    assert out[0]["suspect"] and not out[0]["supported_by_chat"]
    dark = next(f for f in out if "dark" in f["fact"])
    assert dark["supported_by_chat"] and not dark["suspect"]
    assert dark["terms_in_chat"] == ["dark", "mode"]
    globex = next(f for f in out if "Globex" in f["fact"])
    assert not globex["suspect"]  # not claimed as the user's words
