"""Fitting whole records into a structured preview's budget (query_kb / web_search).

1. Records in order, each whole (``printable_record.citation``), until the next does not
   fit; ``omitted_results`` counts the rest. The leading record keeps
   ``LEAD_BODY_CHARS`` of its body (head…tail), or as much as fits.
2. The header's optional fields (``query``, ``kb_id``), as room allows.
3. Values every shown record shares (two or more) are written once in
   ``common``, nested as in a record: a record reads as ``common`` overlaid.
4. The other kept fields (``printable_record.extras``), field by field, as room allows.
5. The spare characters to the bodies, evenly (at least ``MIN_BODY_CHARS`` each).

Every size is the rendered text's length, so no preview is over its budget.
None when not even the leading record fits (the generic preview says more).
"""

from __future__ import annotations

from typing import Any

from yuxi_dash.compression.previews.citation_records import (
    EXTRA_FIELDS,
    ShownRecord,
    extras,
    render_object,
)
from yuxi_dash.compression.previews.clipping import dumps

LEAD_BODY_CHARS = 120
MIN_BODY_CHARS = 32
COMMON_KEY = "common"


class _Preview:
    """The preview being fitted: header, shown records, the result count."""

    def __init__(self, header: dict[str, Any], result_count: int) -> None:
        self.header = header
        self.result_count = result_count
        self.shown: list[ShownRecord] = []
        self._common: frozenset[tuple[bool, str]] | None = None  # None: to be worked out
        self._header_chars: int | None = None  # the header's JSON without its closing brace

    def changed(self) -> None:
        """Call after any change to the shown records or their pieces."""
        self._common = None

    def common(self) -> frozenset[tuple[bool, str]]:
        """The pieces every shown record has (two records or more), when that is shorter."""
        if self._common is None:
            self._common = frozenset()
            if len(self.shown) >= 2:
                shared = set(self.shown[0].pieces)
                for record in self.shown[1:]:
                    shared.intersection_update(record.pieces)
                    if not shared:
                        break
                saved = sum(len(text) + 1 for _meta, text in shared) * (len(self.shown) - 1)
                if saved > len(f',"{COMMON_KEY}":{{}}') + len('"metadata":{}'):
                    self._common = frozenset(shared)
        return self._common

    def render(self) -> str:
        common = self.common()
        header = dumps(self.header)[:-1]  # without its closing brace
        if common:
            ordered = [piece for piece in self.shown[0].pieces if piece in common]
            header += f',"{COMMON_KEY}":' + render_object(ordered)
        records = ",".join(record.render(common) for record in self.shown)
        omitted = self.result_count - len(self.shown)
        return f'{header},"results":[{records}],"omitted_results":{omitted}}}'

    def length(self) -> int:
        """``len(self.render())``, without building the text."""
        common = self.common()
        if self._header_chars is None:
            self._header_chars = len(dumps(self.header)) - 1
        size = self._header_chars + len(',"results":[],"omitted_results":}')
        if common:  # its length does not depend on the order of its pieces
            size += len(f',"{COMMON_KEY}":') + len(render_object(list(common)))
        size += sum(len(record.render(common)) for record in self.shown)
        size += max(0, len(self.shown) - 1) + len(str(self.result_count - len(self.shown)))
        return size

    def fits(self, budget: int) -> bool:
        return self.length() <= budget


def fit_records(
    header: dict[str, Any],
    optional: dict[str, Any],
    records: list[dict[str, Any]],
    kind: str,
    budget: int,
) -> str | None:
    """The structured preview of ``records`` within ``budget`` characters.

    ``header``: what the header always holds; ``optional``: header fields written
    after the records, as room allows.
    """
    preview = _Preview(header, len(records))
    for record in records:
        shown = ShownRecord(record, kind)
        preview.shown.append(shown)
        preview.changed()
        if len(preview.shown) == 1:
            shown.set_body(LEAD_BODY_CHARS)
            _shrink_lead_body(preview, budget)
        if not preview.fits(budget):
            preview.shown.pop()
            preview.changed()
            break
    if not preview.shown:
        return preview.render() if not records and preview.fits(budget) else None
    for key, value in optional.items():
        header[key] = value
        preview._header_chars = None
        if not preview.fits(budget):
            del header[key]
            preview._header_chars = None
    kb_id = header.get("kb_id")
    offered = [dict(extras(r.record, kind, kb_id, r.cited)) for r in preview.shown]
    for field in EXTRA_FIELDS[kind]:
        for shown, values in zip(preview.shown, offered, strict=True):
            if field not in values:
                continue
            shown.add(field, values[field])
            preview.changed()
            if not preview.fits(budget):
                shown.drop_last()
                preview.changed()
                break
    _grow_bodies(preview, budget)
    return preview.render()


def _shrink_lead_body(preview: _Preview, budget: int) -> None:
    """The leading record's body cut down to what fits beside it (none when nothing does)."""
    lead = preview.shown[0]
    while lead.body_chars and not preview.fits(budget):
        over = preview.length() - budget
        lead.set_body(lead.body_chars - over if lead.body_chars - over >= 2 else 0)


def _grow_bodies(preview: _Preview, budget: int) -> None:
    """Hand the spare characters to the shown records' bodies, evenly, until whole or spent."""
    spare = budget - preview.length()
    common = preview.common()  # bodies are never common: it stays as it is
    for _round in range(4):
        growing = [r for r in preview.shown if r.body is not None and r.body_chars < len(r.body[1])]
        if spare <= 0 or not growing:
            return
        share = spare // len(growing)
        if share <= 0:
            return
        for record in growing:
            key, text = record.body  # type: ignore[misc]  # not None: see growing
            old_chars, old_len = record.body_chars, len(record.render(common))
            want = old_chars + share
            if not old_chars:  # a new body also costs its key, colon, quotes and comma
                want -= len(dumps(key)) + 4
                if want < min(MIN_BODY_CHARS, len(text)):
                    continue
            while want > old_chars:
                record.set_body(want)
                growth = len(record.render(common)) - old_len
                if growth <= spare:
                    spare -= growth
                    break
                want -= growth - spare  # escaping made it longer than its characters
            else:
                record.set_body(old_chars)
