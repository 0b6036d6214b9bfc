"""A compression record's ledger and summary as the pages show them (pure, no Streamlit).

`evidence_line`: what a compression kept, in one line ("Cited evidence kept in view: 3 of
5 · recoverable: 12 (1 cited) · lost: 1 (1 cited)"), shared by the compress dialog and the
Compressions tab. `counts_frame`: items per kind and state. `evidence_items`: the
recoverable and lost items, cited first, lost before recoverable, then in the order the
thread held them; each keeps its index in the ledger (``item``: what a link and
`tool_results.saved_lines.open_saved_line` name). `summary_parts`: the summary's preamble
and its sections (`compression.summarizers.parse_sections`). Every value here is outside
text: pages show it with `page_text.literal` or in a table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

import pandas as pd

from yuxi_dash.compression.summarizers import parse_sections
from yuxi_dash.wording import count

KIND_LABELS = {
    "kb_record": "KB record",
    "web_result": "Web result",
    "saved_result": "Saved tool result",
    "file": "File written",
    "run": "Run id",
    "thread": "Thread id",
}
STATE_LABELS = {"visible": "in view", "recoverable": "recoverable", "lost": "lost"}
COUNT_COLUMNS = ["kind", "in view", "recoverable", "lost", "cited"]
ITEM_COLUMNS = ["item", "cited", "state", "kind", "value", "about", "where", "open"]
DETAIL_PAGE = "thread_detail"


def _items(ledger: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [item for item in ledger.get("items") or [] if isinstance(item, dict)]


def cited_counts(ledger: Mapping[str, Any]) -> dict[str, int]:
    """Cited items per state (visible, recoverable, lost)."""
    cited = ledger.get("cited") or {}
    return {state: int(cited.get(state) or 0) for state in STATE_LABELS}


def kept_text(visible: int, total: int) -> str:
    """'3 of 5', or 'none cited' when nothing was cited."""
    return f"{count(visible)} of {count(total)}" if total else "none cited"


def evidence_line(ledger: Mapping[str, Any]) -> str:
    """What a compression kept in view, left recoverable and lost, in one line."""
    totals = ledger.get("totals") or {}
    cited = cited_counts(ledger)
    if not _items(ledger) and not any(totals.values()):
        return "No evidence items in the summarized messages."
    recoverable, lost = int(totals.get("recoverable") or 0), int(totals.get("lost") or 0)
    return (
        f"Cited evidence kept in view: {kept_text(cited['visible'], sum(cited.values()))}"
        f" · recoverable: {count(recoverable)} ({count(cited['recoverable'])} cited)"
        f" · lost: {count(lost)} ({count(cited['lost'])} cited)"
    )


def counts_frame(ledger: Mapping[str, Any]) -> pd.DataFrame:
    """One row per kind that has items: how many in view, recoverable, lost, and cited."""
    rows: dict[str, dict[str, Any]] = {}
    for item in _items(ledger):
        kind = str(item.get("kind"))
        row = rows.setdefault(kind, dict.fromkeys(COUNT_COLUMNS[1:], 0))
        state = STATE_LABELS.get(str(item.get("state")))
        if state is not None:
            row[state] += 1
        row["cited"] += bool(item.get("cited"))
    ordered = [k for k in KIND_LABELS if k in rows] + sorted(set(rows) - set(KIND_LABELS))
    return pd.DataFrame(
        [{"kind": KIND_LABELS.get(kind, kind), **rows[kind]} for kind in ordered],
        columns=COUNT_COLUMNS,
    )


def _about(item: Mapping[str, Any]) -> str:
    parts = []
    if item.get("title"):
        parts.append(str(item["title"]))
    if item.get("source"):
        parts.append(f"source {item['source']}")
    if item.get("chunk_index") is not None:
        parts.append(f"chunk {item['chunk_index']}")
    if item.get("sha256"):
        parts.append(f"SHA-256 {str(item['sha256'])[:16]}")
    if item.get("named_by_user"):
        parts.append("named by the user")
    return " · ".join(parts)


def item_link(thread_id: str, compression_id: int, item: int) -> str:
    """Thread detail at this compression, with the item opened at its line."""
    query = {"thread": thread_id, "compression": compression_id, "item": item}
    return f"{DETAIL_PAGE}?{urlencode(query)}"


def evidence_items(ledger: Mapping[str, Any], thread_id: str, compression_id: int) -> pd.DataFrame:
    """The recoverable and lost items: cited first, lost before recoverable, then in order."""
    listed = [
        (index, item)
        for index, item in enumerate(ledger.get("items") or [])
        if isinstance(item, dict) and item.get("state") in ("recoverable", "lost")
    ]
    listed.sort(key=lambda pair: (not pair[1].get("cited"), pair[1].get("state") != "lost"))
    rows = []
    for index, item in listed:
        recoverable = item.get("state") == "recoverable"
        rows.append(
            {
                "item": index,
                "cited": "cited" if item.get("cited") else "",
                "state": STATE_LABELS[str(item["state"])],
                "kind": KIND_LABELS.get(str(item.get("kind")), str(item.get("kind"))),
                "value": str(item.get("value") or ""),
                "about": _about(item),
                "where": f"{item.get('file')}, line {item.get('line')}" if recoverable else "",
                "open": item_link(thread_id, compression_id, index) if recoverable else None,
            }
        )
    return pd.DataFrame(rows, columns=ITEM_COLUMNS)


def recoverable_choices(ledger: Mapping[str, Any]) -> list[int]:
    """The ledger indexes of the recoverable items, cited first, then in order."""
    found = [
        index
        for index, item in enumerate(ledger.get("items") or [])
        if isinstance(item, dict) and item.get("state") == "recoverable" and item.get("file")
    ]
    items = ledger.get("items") or []
    return sorted(found, key=lambda index: not items[index].get("cited"))


def choice_label(ledger: Mapping[str, Any], index: int, *, width: int = 80) -> str:
    """How the picker names an item: 'chunk-13 · KB record · cited · line 36 of session.md'."""
    item = (ledger.get("items") or [])[index]
    value = " ".join(str(item.get("value") or "").split())
    value = value if len(value) <= width else value[: width - 1] + "…"
    name = str(item.get("file") or "").rsplit("/", 1)[-1]
    cited = " · cited" if item.get("cited") else ""
    kind = KIND_LABELS.get(str(item.get("kind")), str(item.get("kind")))
    return f"{value} · {kind}{cited} · line {item.get('line')} of {name}"


def section_title(name: str) -> str:
    """'USER REQUIREMENTS AND PREFERENCES' -> 'User requirements and preferences'."""
    return name[:1].upper() + name[1:].lower()


def summary_parts(summary: str) -> tuple[str, list[tuple[str, list[str]]]]:
    """(the text before the first section, [(section title, bullets)]); no sections: the
    whole text as the preamble and no sections."""
    sections = parse_sections(summary)
    if not sections:
        return summary.strip(), []
    preamble: list[str] = []
    for line in summary.splitlines():
        if parse_sections(line):  # the first section's header line
            break
        preamble.append(line)
    return "\n".join(preamble).strip(), [(section_title(k), v) for k, v in sections.items()]
