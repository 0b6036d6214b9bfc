"""app_pages/thread_detail.py's Compressions tab on real records: a thread compressed by our core.

Each thread is seeded (`tests.service.builders.seed_thread`) and compressed through
`sources.compress_thread_context`, so the tab draws the record the core wrote: its
summary in sections, tokens, trigger and actor, the ledger's counts, the recoverable and
lost items (cited first), and a recoverable item opened at its line (one audited read).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
from langchain_core.messages import HumanMessage
from streamlit.testing.v1 import AppTest

from tests.fixtures.app import APP
from tests.service.builders import OPERATOR, seed_thread
from tests.ui.compressed_thread import (
    GONE_PATH,
    HISTORY_ONLY,
    compressed_thread,
    evidence_messages,
    item_index,
)
from yuxi_dash import sources
from yuxi_dash.store.compressions import list_compressions
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.queries import list_audit
from yuxi_dash.tool_results.saved_lines import READ_LINES_ACTION
from yuxi_dash.ui.compressions import loaders as compression_loaders
from yuxi_dash.ui.compressions.ledger_view import evidence_line
from yuxi_dash.ui.loaders import clear_loaders
from yuxi_dash.ui.page_text import literal

PAGE = "app_pages/thread_detail.py"
HOSTILE = "See ![pixel](https://evil.example/p.png) and <img src=x> now."


@pytest.fixture(autouse=True)
def fresh_caches() -> Iterator[None]:
    clear_loaders()
    compression_loaders.clear()
    yield
    compression_loaders.clear()


def _open(query: dict[str, str]) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    for key, value in query.items():
        at.query_params[key] = value
    at.switch_page(PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _tab(at: AppTest, label: str = "Compressions"):  # noqa: ANN202 - AppTest's Tab
    [tab] = [t for t in at.tabs if t.label == label]
    return tab


def _reads(compression_id: int) -> list[str]:
    with session_scope() as session:
        rows = list_audit(session, action=READ_LINES_ACTION, target=f"compression:{compression_id}")
    return [row.outcome for row in rows]


def test_a_thread_without_compressions_says_so() -> None:
    seed_thread("t-none", messages=evidence_messages())
    at = _open({"thread": "t-none"})
    tab = _tab(at)
    assert [i.value for i in tab.info] == ["No compression recorded for this thread yet."]


def test_the_tab_shows_each_compression_with_its_summary_and_ledger() -> None:
    result, record = compressed_thread("t1")
    at = _open({"thread": "t1"})
    assert [t.label for t in at.tabs][-1] == "Compressions"
    tab = _tab(at)
    [expander] = tab.expander
    assert "manual, by ops@example.com" in expander.label
    assert f"{result.before_tokens:,} → {result.after_tokens:,} tokens" in expander.label
    cited = record["ledger"]["cited"]
    kept = f"{cited['visible']} of {sum(cited.values())}"
    metrics = {m.label: m.value for m in expander.metric}
    assert metrics["Tokens before"] == f"{result.before_tokens:,}"
    assert metrics["Tokens after"] == f"{result.after_tokens:,}"
    assert metrics["Cited kept in view"] == kept
    assert metrics["Cited lost"] == str(cited["lost"]) and cited["lost"] >= 1
    markdown = [m.value for m in expander.markdown]
    assert "**Session intent**" in markdown and "**Artifacts and references**" in markdown
    captions = " ".join(c.value for c in expander.caption)
    assert f"Cited evidence kept in view: {kept}" in captions
    assert (
        f"Compression \\#{record['id']}" in captions or f"Compression #{record['id']}" in captions
    )
    counts, lost, recoverable = (d.value for d in expander.dataframe)
    totals = record["ledger"]["totals"]
    assert counts[["in view", "recoverable", "lost"]].sum().tolist() == [
        totals["visible"],
        totals["recoverable"],
        totals["lost"],
    ]
    assert counts["cited"].sum() == sum(cited.values())
    assert (len(lost), len(recoverable)) == (totals["lost"], totals["recoverable"])
    for table in (lost, recoverable):  # cited first
        assert table["cited"].tolist() == sorted(table["cited"].tolist(), reverse=True)
    assert lost["value"].tolist() == [GONE_PATH] and lost["cited"].tolist() == ["cited"]
    assert "open" not in lost.columns
    assert all(
        link.startswith("thread_detail?thread=t1&compression=") for link in recoverable["open"]
    )
    assert set(recoverable["value"]) >= {HISTORY_ONLY, "chunk-17"}
    assert all(", line " in where for where in recoverable["where"])
    assert _reads(record["id"]) == []  # nothing read until an item is picked


def test_picking_a_recoverable_item_opens_its_saved_file_at_its_line_once() -> None:
    result, record = compressed_thread("t1")
    index = item_index(record, HISTORY_ONLY)
    line = record["ledger"]["items"][index]["line"]
    at = _open({"thread": "t1"})
    box = at.selectbox(key=f"compression_item_{record['id']}")
    assert box.value is None
    box.set_value(index).run()
    assert not at.exception
    [shown] = [c.value for c in _tab(at).code if "→" in c.value]
    marked = next(row for row in shown.split("\n") if row.startswith("→"))
    assert marked.split()[1] == str(line) and HISTORY_ONLY in marked
    captions = " ".join(c.value for c in _tab(at).caption)
    assert f"line {line:,} of" in captions and "unchanged since this compression" in captions
    assert result.file_path.split("/")[-1] in captions
    assert at.query_params["compression"] == str(record["id"])
    assert at.query_params["item"] == str(index)
    at.run()  # a rerun shows it again without another read
    assert not at.exception and _reads(record["id"]) == ["ok"]


def test_a_link_opens_the_tab_at_its_compression_and_item() -> None:
    _result, record = compressed_thread("t1")
    index = item_index(record, "chunk-17")
    at = _open({"thread": "t1", "compression": str(record["id"]), "item": str(index)})
    tab = _tab(at)
    assert at.selectbox(key=f"compression_item_{record['id']}").value == index
    [shown] = [c.value for c in tab.code if "→" in c.value]
    assert '"chunk-17"' in shown
    captions = " ".join(c.value for c in tab.caption)
    assert "SHA-256 ok" in captions and "around the item" in captions
    assert _reads(record["id"]) == ["ok"]


def test_a_link_to_another_threads_compression_opens_nothing() -> None:
    _result, record = compressed_thread("t1")
    seed_thread("t2", messages=evidence_messages(), create_agent=False)
    at = _open({"thread": "t2", "compression": str(record["id"]), "item": "0"})
    assert [i.value for i in _tab(at).info] == ["No compression recorded for this thread yet."]
    assert _reads(record["id"]) == []


def test_outside_text_in_a_summary_is_shown_as_written() -> None:
    messages = [HumanMessage(HOSTILE), *evidence_messages()]
    seed_thread("t-hostile", messages=messages, keep_messages=4)
    assert sources.compress_thread_context("t-hostile", actor=OPERATOR).status == "completed"
    at = _open({"thread": "t-hostile"})
    [expander] = _tab(at).expander
    shown = [m.value for m in expander.markdown] + [c.value for c in expander.caption]
    assert any(literal(HOSTILE) in text for text in shown)  # escaped: no image, no HTML
    for text in shown:
        assert "![pixel](https" not in text and "<img" not in text.replace("\\<img", ""), text


def test_the_compress_dialog_says_what_the_new_compression_kept() -> None:
    seed_thread("t-dialog", messages=evidence_messages(), keep_messages=4)
    at = _open({"thread": "t-dialog"})
    at.button(key="detail_compress").click().run()
    at.button(key="confirm_compress").click().run()
    assert not at.exception, [e.value for e in at.exception]
    [line] = [s.value for s in at.success]
    assert line.startswith("t-dialog: compressed ")
    with session_scope() as session:
        [view] = list_compressions(session, "t-dialog")
    cited = view.ledger["cited"]
    in_tab = Counter(c.value for c in _tab(at).caption)
    outside = (Counter(c.value for c in at.main.caption) - in_tab).elements()
    said = [text for text in outside if "Cited evidence" in text]
    assert said == [literal(evidence_line(view.ledger))]  # under the outcome's line
    assert f"kept in view: {cited['visible']} of {sum(cited.values())}" in said[0]
    assert f"lost: {view.ledger['totals']['lost']} ({cited['lost']} cited)" in said[0]
    [expander] = _tab(at).expander  # the tab shows the new record at once (caches cleared)
    assert "manual, by" in expander.label
