"""The evidence index file's text: one line per item of an evidence ledger, and reading it back.

Owns the format only; pure, no I/O (the engine is to save the text beside the history file
and name it in the summary). A comment line first, then one tab-separated line per item in
ledger order (``INDEX_COLUMNS``):
- kind (``evidence_ledger.KINDS``);
- where it lives: ``file:line`` (1-based) for a recoverable item, ``in view`` or ``lost``;
- marks: ``cited``, ``named_by_user``, comma-separated, or ``-``;
- the value, last, as it is; as a JSON string (ASCII escapes) when it is not plain
  printable text, has spaces at an end or starts with ``"``, so no value breaks a line.
"""

from __future__ import annotations

import json

from yuxi_dash.compression.evidence_ledger import Ledger, LedgerItem

INDEX_COLUMNS = ("kind", "where", "marks", "value")
IN_VIEW = "in view"
LOST = "lost"
NO_MARKS = "-"


def _where(item: LedgerItem) -> str:
    if item.state == "recoverable":
        return f"{item.file}:{item.line}"
    return IN_VIEW if item.state == "visible" else LOST


def _marks(item: LedgerItem) -> str:
    marks = [
        mark for mark, on in (("cited", item.cited), ("named_by_user", item.named_by_user)) if on
    ]
    return ",".join(marks) or NO_MARKS


def _value(value: str) -> str:
    plain = value.isprintable() and value == value.strip() and not value.startswith('"')
    return value if plain else json.dumps(value)


def evidence_index_text(ledger: Ledger) -> str:
    """The evidence index of ``ledger`` (module docstring), ending with a newline."""
    span = f"messages 0-{ledger.cutoff - 1}" if ledger.cutoff else "no messages"
    history = f" (history: {ledger.history_file})" if ledger.history_file else ""
    lines = [
        f"# Evidence index: {len(ledger.items)} items of the summarized {span}{history}. "
        f"Tab-separated: {', '.join(INDEX_COLUMNS)}."
    ]
    lines.extend(
        "\t".join((item.kind, _where(item), _marks(item), _value(item.value)))
        for item in ledger.items
    )
    return "\n".join(lines) + "\n"


def parse_evidence_index(text: str) -> list[tuple[str, str, tuple[str, ...], str]]:
    """(kind, where, marks, value) of each item line of an evidence index; a line that is
    not one (a comment, or text the file was edited to hold) is skipped."""
    rows = []
    for line in text.split("\n"):
        columns = line.split("\t", 3)
        if line.startswith("#") or len(columns) != len(INDEX_COLUMNS):
            continue
        kind, where, marks, value = columns
        if value.startswith('"'):
            try:
                value = json.loads(value)
            except ValueError:
                continue
            if not isinstance(value, str):
                continue
        rows.append((kind, where, tuple(m for m in marks.split(",") if m != NO_MARKS), value))
    return rows
