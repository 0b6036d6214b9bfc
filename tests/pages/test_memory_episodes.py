"""AppTest: episodes page — envelopes, mentions, oversized flag."""

from __future__ import annotations


def test_episodes_page(memory_pages) -> None:
    at = memory_pages("memory_episodes.py", "alice_chen")
    assert not at.exception
    at.select_slider[0].set_value(100).run()
    assert not at.exception
    table = at.dataframe[0].value
    assert set(table["source_kind"]) - {"–"} == {
        "user_asserted",
        "assistant_derived",
        "tool_observed",
    }
    plain = table[table["source"] == "message"]  # no JSON envelope: no memory or source kind
    assert len(plain) and (plain[["memory_kind", "source_kind"]] == "–").all().all()
    assert not table.isin([None, "None", "nan"]).any().any() and not table.isna().any().any()
    assert table["oversized"].sum() == 1
    assert "over 64 KB" in at.warning[0].value
    assert table["mentions"].str.len().min() > 0
