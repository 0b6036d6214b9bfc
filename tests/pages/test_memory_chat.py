"""AppTest: chat vs memory — the user's words beside the facts, suspects first."""

from __future__ import annotations


def test_chat_vs_memory(memory_pages) -> None:
    at = memory_pages("memory_chat.py", "alice_chen")
    assert not at.exception
    assert any("dark mode last week" in m.value for m in at.markdown)
    assert not any("Noted: you prefer" in m.value for m in at.markdown)  # only the user's words
    table = at.dataframe[0].value
    assert table["suspect"].iloc[0]  # suspects first
    assert not table["suspect"].iloc[-1]
    suspects = table[table["suspect"]]
    assert (suspects["source_kind"] == "user_asserted").all()
    supported = table[table["supported_by_chat"]]
    assert supported["fact"].str.contains("dark mode|Python examples|onboarding").any()
