"""A compression record in words, rows and charts (`ui.compressions.ledger_view`,
`quality_charts`), and the compress dialog's line about the record it has just written."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import pandas as pd

from tests.ui.compressed_thread import GONE_PATH, HISTORY_ONLY, evidence_messages, item_index
from yuxi_dash.compression.summarizers import EXTRACTIVE_NOTE
from yuxi_dash.sources import compress_each
from yuxi_dash.ui.compress import evidence_of
from yuxi_dash.ui.compressions.ledger_view import (
    choice_label,
    counts_frame,
    evidence_items,
    evidence_line,
    recoverable_choices,
    summary_parts,
)
from yuxi_dash.ui.compressions.quality_charts import (
    kept_frame,
    kept_per_agent_chart,
    per_day_chart,
    worst_table,
)


def _item(kind: str, value: str, state: str, cited: bool = False, **more: Any) -> dict[str, Any]:
    where = {"file": "outputs/h.md", "line": 3} if state == "recoverable" else {}
    return {"kind": kind, "value": value, "state": state, "cited": cited, **where, **more}


LEDGER = {
    "items": [
        _item("kb_record", "chunk-1", "visible", True),
        _item("kb_record", "chunk-2", "recoverable", source="docs/a.pdf", chunk_index=2),
        _item("web_result", "https://x.example/a", "lost"),
        _item("run", "run-9", "recoverable", True),
        _item("saved_result", "outputs/large_tool_results/a.txt", "lost", True, sha256="ab" * 32),
    ],
    "totals": {"visible": 1, "recoverable": 2, "lost": 2},
    "cited": {"visible": 1, "recoverable": 1, "lost": 1},
}


def test_the_evidence_line_counts_cited_kept_recoverable_and_lost() -> None:
    assert evidence_line(LEDGER) == (
        "Cited evidence kept in view: 1 of 3 · recoverable: 2 (1 cited) · lost: 2 (1 cited)"
    )
    nothing_cited = {**LEDGER, "cited": {"visible": 0, "recoverable": 0, "lost": 0}}
    assert evidence_line(nothing_cited).startswith("Cited evidence kept in view: none cited")
    empty = {"items": [], "totals": {"visible": 0, "recoverable": 0, "lost": 0}, "cited": {}}
    assert evidence_line(empty) == "No evidence items in the summarized messages."


def test_counts_per_kind_and_the_items_cited_first_lost_before_recoverable() -> None:
    counts = counts_frame(LEDGER).set_index("kind")
    assert counts.loc["KB record"].tolist() == [1, 1, 0, 1]
    assert counts.loc["Saved tool result"].tolist() == [0, 0, 1, 1]
    assert list(counts.index) == ["KB record", "Web result", "Saved tool result", "Run id"]
    items = evidence_items(LEDGER, "t 1", 7)
    assert items["item"].tolist() == [4, 3, 2, 1]  # cited lost, cited recoverable, lost, rest
    assert items["open"].tolist()[1] == "thread_detail?thread=t+1&compression=7&item=3"
    assert items["open"].isna().tolist() == [True, False, True, False]
    assert items["about"].tolist()[3] == "source docs/a.pdf · chunk 2"
    assert items["where"].tolist()[1] == "outputs/h.md, line 3"
    assert recoverable_choices(LEDGER) == [3, 1]
    assert choice_label(LEDGER, 3) == "run-9 · Run id · cited · line 3 of h.md"


def test_summary_sections_and_a_summary_without_any() -> None:
    text = (
        "[Conversation summary] Earlier part summarized.\n\n"
        f"{EXTRACTIVE_NOTE}\n\n## SESSION INTENT\n- Find the policy.\n"
        "## USER REQUIREMENTS AND PREFERENCES\n- (none found)\n"
    )
    preamble, sections = summary_parts(text)
    assert preamble.startswith("[Conversation summary]") and EXTRACTIVE_NOTE in preamble
    assert sections == [
        ("Session intent", ["Find the policy."]),
        ("User requirements and preferences", []),
    ]
    assert summary_parts("A platform's own summary, in prose.") == (
        "A platform's own summary, in prose.",
        [],
    )


def test_the_quality_charts_and_table() -> None:
    days = pd.DataFrame(
        [
            {
                "day": date(2026, 11, 27),
                "trigger": "automatic",
                "compressions": 3,
                "tokens_saved": 900,
            },
            {"day": date(2026, 11, 28), "trigger": "manual", "compressions": 1, "tokens_saved": 50},
        ]
    )
    spec = per_day_chart(days).to_dict()
    assert len(spec["vconcat"]) == 2
    agents = pd.DataFrame(
        [
            {"agent_slug": "a", "compressions": 4, "tokens_saved": 1, "cited_total": 4,
             "cited_visible": 3, "cited_lost": 1},
            {"agent_slug": "b", "compressions": 2, "tokens_saved": 1, "cited_total": 0,
             "cited_visible": 0, "cited_lost": 0},
        ]
    )  # fmt: skip
    kept = kept_frame(agents)
    assert kept["agent_slug"].tolist() == ["a"]  # nothing cited: no share to draw
    assert kept[["kept_text", "of_text"]].iloc[0].tolist() == ["75.0%", "3 of 4"]
    assert kept_per_agent_chart(agents).to_dict()["layer"]
    worst = pd.DataFrame(
        [
            {"id": 5, "thread_id": "t/1", "at": datetime(2026, 11, 28, 1, 2, 3, tzinfo=UTC),
             "agent_slug": "a", "trigger": "manual", "actor": "kim", "origin": "ours",
             "before_tokens": 9000, "after_tokens": 1000, "cited_total": 4, "cited_visible": 1,
             "cited_lost": 2, "cited_hidden": 1},
        ]
    )  # fmt: skip
    [row] = worst_table(worst).to_dict("records")
    assert row["open"] == "thread_detail?thread=t%2F1&compression=5"
    assert (row["trigger"], row["cited kept"], row["tokens"]) == (
        "manual, by kim",
        "1 of 4",
        "9,000 → 1,000",
    )
    assert row["at"] == "2026-11-28 01:02:03 UTC"


def test_the_dialog_line_is_the_new_records_ledger(db_url: str) -> None:
    from tests.service.builders import OPERATOR, seed_thread
    from yuxi_dash.store.compressions import list_compressions
    from yuxi_dash.store.db import session_scope

    seed_thread("t-line", messages=evidence_messages(), keep_messages=4)
    [outcome] = compress_each([("t-line", None)], actor=OPERATOR)
    with session_scope() as session:
        [view] = list_compressions(session, "t-line")
    record = view.to_dict()
    assert evidence_of(outcome) == evidence_line(record["ledger"])
    assert record["ledger"]["items"][item_index(record, GONE_PATH)]["state"] == "lost"
    assert record["ledger"]["items"][item_index(record, HISTORY_ONLY)]["state"] == "recoverable"
    [again] = compress_each([("t-line", None)], actor=OPERATOR)  # nothing new to summarize
    assert again.result is not None and again.result.status == "no_op"
    assert evidence_of(again) is None
