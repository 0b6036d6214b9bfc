"""Previews of large tool results: what stays in the model's view after offloading.

Two shapes:

- the generic preview: ``[HEAD]`` (2/5 of the budget), ``[MIDDLE]`` (1/5, taken
  from the middle of the text), ``[TAIL]`` (the rest); budget = limit × 4 chars;
- the structured preview for ``query_kb`` / ``web_search`` JSON (a ``results``
  list or a bare list): compact JSON with the result kind, count, query header
  fields, the leading records (at most 8, as many as fit) and ``omitted_results``.
  query_kb keeps id, kb_id, file_id, title, source, score, distance and, under
  ``metadata``, source, filename, title, chunk_index, score, rerank_score,
  hybrid_score, graph_score, distance; web_search keeps title, url, site_name,
  publish_time, score; the body comes from content/text/snippet/summary, clipped
  head…tail.

Two record rules are callable side by side so the bench can compare them:
``"plain"`` (the modelled system) keeps every listed field that is present and
fits each record with a ``MIN_BODY_CHARS`` body, leading records first;
``"compact"`` (ours, the default) spends the budget on evidence first: every
kept record's id or url (whole) and score, then the other kept fields by
usefulness with values every record shares written once in a ``common`` object,
then bodies (``yuxi_dash.compression.evidence``). It also finds the results one
level inside an envelope (``{"code": 0, "data": {"query": …, "results": [...]}}``).
Bodies are context; the full result is one file read away.

No cut ever lands inside a character (``yuxi_dash.compression.clipping``). Text
that is not JSON but starts with records (cut short, trailing text, a Python
repr) gets the compact rule's preview of its leading complete records, marked
``"salvaged"`` in the header (``yuxi_dash.compression.salvage``); other bad or
unexpected JSON falls back to the generic preview; a preview never raises.
Given the result's UTF-8 bytes (as the engine has them), a whole JSON document
is read by ``yuxi_dash.compression.records``: only the fields a preview keeps,
each body decoded only as far as it is shown; so is an envelope one level down
(compact rule), and a salvage that is one whole document (a document before
trailing text, a plain Python repr's JSON: ``salvage.salvaged_document``); the
preview is the same.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal, get_args

from yuxi_dash.agents import DEFAULT_TOOL_RESULT_TOKEN_LIMIT
from yuxi_dash.compression.clipping import (
    CLIP_MARK,
    MIN_BODY_CHARS,
    _dumps,
    _grow_bodies,
    _RecordPiece,
    _splits_character,
    body_chars,
    clip_head_tail,
    cut_end,
    cut_start,
)
from yuxi_dash.compression.evidence import (
    HEADER_FIELDS,
    MAX_FIELD_CHARS,
    MAX_IDENTITY_CHARS,
    MAX_METADATA_CHARS,
    MAX_PREVIEW_RECORDS,
    QUERY_KB_FIELDS,
    QUERY_KB_METADATA_FIELDS,
    WEB_SEARCH_FIELDS,
    _body,
    _clip_field,
    _fit_evidence,
    _is_empty,
)
from yuxi_dash.compression.records import read_records
from yuxi_dash.compression.salvage import (
    NOT_DECODED,
    SalvageKind,
    decode_json_bytes,
    parse_records_text,
    salvaged_document,
)

__all__ = [
    "CLIP_MARK",
    "MAX_FIELD_CHARS",
    "MAX_IDENTITY_CHARS",
    "MAX_METADATA_CHARS",
    "MAX_PREVIEW_RECORDS",
    "MIN_BODY_CHARS",
    "QUERY_KB_METADATA_FIELDS",
    "STRUCTURED_KINDS",
    "PreviewRule",
    "_dumps",
    "_splits_character",
    "clip_head_tail",
    "cut_end",
    "cut_start",
    "generic_preview",
    "preview_salvage",
    "structured_kind",
    "structured_preview",
    "tool_result_preview",
]

PreviewRule = Literal["plain", "compact"]
STRUCTURED_KINDS: dict[str, str] = {"query_kb": "knowledge_base", "web_search": "web_search"}
SALVAGE_KEY = "salvaged"  # the structured preview's header names how it was salvaged
_SALVAGE_KINDS = frozenset(get_args(SalvageKind))


# -- generic preview ------------------------------------------------------------
def generic_preview(content: str, token_limit: int = DEFAULT_TOOL_RESULT_TOKEN_LIMIT) -> str:
    """HEAD/MIDDLE/TAIL preview within ``token_limit × 4`` characters of content."""
    budget = max(0, token_limit) * 4
    if len(content) <= budget:
        return content
    head_chars = budget * 2 // 5
    middle_chars = budget // 5
    tail_chars = budget - head_chars - middle_chars
    head = content[: cut_end(content, head_chars)]
    middle_from = cut_start(content, (len(content) - middle_chars) // 2)
    middle = content[middle_from : cut_end(content, middle_from + middle_chars)]
    tail = content[cut_start(content, len(content) - tail_chars) :]
    return f"[HEAD]\n{head}\n[MIDDLE]\n{middle}\n[TAIL]\n{tail}"


# -- structured preview ---------------------------------------------------------
def structured_kind(tool_name: str | None) -> str | None:
    """``knowledge_base`` / ``web_search`` for the tools with a structured preview, else None."""
    if not tool_name:
        return None
    name = tool_name.strip().lower()
    for tool, kind in STRUCTURED_KINDS.items():
        if name == tool or name.endswith(("__" + tool, "." + tool, "/" + tool)):
            return kind
    return None


def _project_record(record: dict[str, Any], kind: str) -> _RecordPiece:
    """The plain rule's record: every listed field that is present, and its body for clipping."""
    knowledge_base = kind == "knowledge_base"
    kept: dict[str, Any] = {}
    for key in QUERY_KB_FIELDS if knowledge_base else WEB_SEARCH_FIELDS:
        if key in record:
            kept[key] = _clip_field(record[key])
    metadata = record.get("metadata") if knowledge_base else None
    if type(metadata) is dict:
        kept["metadata"] = {
            key: _clip_field(metadata[key]) for key in QUERY_KB_METADATA_FIELDS if key in metadata
        }
    body_key, body = _body(record)
    return _RecordPiece(_dumps(kept), body_key, body)


def _locate_records(payload: Any, rule: PreviewRule) -> tuple[list[Any], dict[str, Any]] | None:
    """(records, the object holding the header fields), or None when there are none.

    A ``results`` list or a bare list; the compact rule also looks one level into
    an envelope (``{"code": 0, "data": {"query": …, "results": [...]}}``).
    """
    if isinstance(payload, dict) and isinstance(payload.get("results"), list):
        return payload["results"], payload
    if isinstance(payload, list):
        return payload, {}
    if rule == "compact" and isinstance(payload, dict):
        for value in payload.values():
            if isinstance(value, dict) and isinstance(value.get("results"), list):
                return value["results"], value
    return None


def structured_preview(
    tool_name: str,
    content: str,
    token_limit: int = DEFAULT_TOOL_RESULT_TOKEN_LIMIT,
    *,
    rule: PreviewRule = "compact",
    encoded: bytes | None = None,
) -> str | None:
    """The structured preview, or None when the content is not a query_kb/web_search result.

    ``encoded``: the content's UTF-8 bytes (``workdir.encode_text``) when the caller
    has them; a whole JSON document is then decoded from them (``decode_json_bytes``).
    """
    kind = structured_kind(tool_name)
    if kind is None:
        return None
    stripped = content.lstrip()
    if not stripped.startswith(("{", "[")):
        return None
    budget = max(0, token_limit) * 4
    salvaged: SalvageKind | None = None
    # list[Any], not the read's list[dict]: mypyc checks what a typed list's items are, and
    # the whole decode's records are only known to be objects after the check below
    records: list[Any]
    compact = rule == "compact"
    read = None if encoded is None else read_records(encoded, budget + 2, nested=compact)
    payload = NOT_DECODED if read is not None or encoded is None else decode_json_bytes(encoded)
    if read is None and payload is NOT_DECODED and encoded is not None and compact:
        # not JSON: a salvage that is one whole document is read from its bytes too
        document = salvaged_document(stripped, encoded)
        if document is not None:
            read = read_records(document[0], budget + 2, nested=True)
            salvaged = None if read is None else document[1]
    if read is not None:  # the fields shown, bodies decoded only as far as shown
        records, result_count, header_source = read
    else:
        if payload is NOT_DECODED:
            parsed = parse_records_text(stripped)  # the exact decode; salvaged when not JSON
            if parsed is None or (parsed[1] is not None and not compact):
                return None
            payload, salvaged = parsed
        located = _locate_records(payload, rule)
        if located is None:
            return None
        records, header_source = located
        if not all(isinstance(record, dict) for record in records):
            return None
        result_count = len(records)

    header: dict[str, Any] = {"kind": kind}
    if salvaged is not None:
        if not records:
            return None  # nothing recovered: the generic preview says more
        header[SALVAGE_KEY] = salvaged
    header["result_count"] = result_count
    for key in HEADER_FIELDS:
        if key in header_source and not (rule == "compact" and _is_empty(header_source[key])):
            header[key] = _clip_field(header_source[key])
    if rule == "compact":
        return _fit_evidence(_dumps(header)[:-1], records, result_count, kind, header, budget)
    pieces = (
        _project_record(record, kind) for record in records[:MAX_PREVIEW_RECORDS]
    )  # lazy: records past the first that does not fit are never projected
    return _fit_records(_dumps(header)[:-1], pieces, result_count, budget)


def _frame(header_json: str, shown: int, result_count: int) -> int:
    """Characters of everything but the records: header, brackets, commas, omitted count."""
    tail = f'],"omitted_results":{result_count - shown}}}'
    return len(header_json) + len(',"results":[') + max(0, shown - 1) + len(tail)


def _fit_records(
    header_json: str,
    pieces: Iterator[_RecordPiece],
    result_count: int,
    budget: int,
) -> str | None:
    """The plain rule: as many leading records as fit with a ``MIN_BODY_CHARS`` body, then
    the spare characters to their bodies, evenly.

    Sizes are exact: the preview is the concatenation of the pieces measured here.
    """
    shown: list[_RecordPiece] = []
    first: _RecordPiece | None = None
    used = 0
    for piece in pieces:
        first = first or piece
        piece.set(min(MIN_BODY_CHARS, body_chars(piece.body)))
        if _frame(header_json, len(shown) + 1, result_count) + used + len(piece.text) > budget:
            break
        shown.append(piece)
        used += len(piece.text)
    if not shown:
        if first is None:
            empty = _render(header_json, [], result_count)
            return empty if len(empty) <= budget else None
        bare = first
        bare.set(0)
        if _frame(header_json, 1, result_count) + len(bare.text) > budget:
            return None  # not even one record fits: the generic preview says more
        return _render(header_json, [bare], result_count)
    _grow_bodies(shown, budget - _frame(header_json, len(shown), result_count) - used, fresh=False)
    return _render(header_json, shown, result_count)


def _render(header_json: str, shown: list[_RecordPiece], result_count: int) -> str:
    records = ",".join(piece.text for piece in shown)
    return f'{header_json},"results":[{records}],"omitted_results":{result_count - len(shown)}}}'


def tool_result_preview(
    tool_name: str | None,
    content: str,
    token_limit: int = DEFAULT_TOOL_RESULT_TOKEN_LIMIT,
    *,
    rule: PreviewRule = "compact",
    encoded: bytes | None = None,
) -> str:
    """The preview kept in the model's view for an offloaded result; never raises.

    ``encoded``: the content's UTF-8 bytes, when the caller has them (a faster decode).
    """
    text = content if isinstance(content, str) else str(content)
    try:
        structured = structured_preview(
            tool_name or "", text, token_limit, rule=rule, encoded=encoded
        )
    except Exception:  # any surprise in odd JSON falls back to the generic shape
        structured = None
    return structured if structured is not None else generic_preview(text, token_limit)


def preview_salvage(preview: str, content: str) -> SalvageKind | None:
    """How ``preview`` (the preview made of ``content``) was salvaged, or None.

    None unless ``preview`` is a structured preview whose header carries the
    salvage marker: content short enough to be its own preview, or a generic
    preview, is never reported as salvaged whatever its text says.
    """
    if preview == content or not preview.startswith('{"kind":'):
        return None
    try:
        document = json.loads(preview)
    except ValueError:
        return None
    kind = document.get(SALVAGE_KEY) if isinstance(document, dict) else None
    return kind if isinstance(kind, str) and kind in _SALVAGE_KINDS else None  # type: ignore[return-value]
