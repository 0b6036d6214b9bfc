"""Previews of large tool results: what stays in the model's view after offloading.

Two shapes (DESIGN §4):

- the generic preview: ``[HEAD]`` (2/5 of the budget), ``[MIDDLE]`` (1/5, taken
  from the middle of the text), ``[TAIL]`` (the rest); budget = limit × 4 chars;
- the structured preview for ``query_kb`` / ``web_search`` JSON: compact JSON with
  the result kind, count, query header fields, the leading records (at most 8, as
  many as fit) with their identity fields and a clipped body, and
  ``omitted_results``.

Two record rules are callable side by side so the bench can compare them:
``"plain"`` keeps every listed field that is present (the modelled system), and
``"compact"`` (ours, the default) keeps the same information in fewer bytes: a
record's ``kb_id`` equal to the header's, metadata values equal to the record's
own top-level value, and null/empty values are omitted.

No cut ever lands inside a character: slicing is by code point and boundaries
step around combining marks, joiners, variation selectors and flag pairs. Bad or
unexpected JSON falls back to the generic preview; a preview never raises.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any, Literal

PreviewRule = Literal["plain", "compact"]

MAX_PREVIEW_RECORDS = 8
STRUCTURED_KINDS: dict[str, str] = {"query_kb": "knowledge_base", "web_search": "web_search"}
HEADER_FIELDS = ("query", "kb_id", "response_time")
QUERY_KB_FIELDS = ("id", "kb_id", "file_id", "title", "source", "score", "distance")
QUERY_KB_METADATA_FIELDS = (
    "source",
    "filename",
    "title",
    "chunk_index",
    "score",
    "rerank_score",
    "hybrid_score",
    "graph_score",
    "distance",
)
WEB_SEARCH_FIELDS = ("title", "url", "site_name", "publish_time", "score")
BODY_FIELDS = ("content", "text", "snippet", "summary")
CLIP_MARK = "…"
MIN_BODY_CHARS = 40  # a record is only listed if at least this much of its body fits
MAX_FIELD_CHARS = 240  # identity strings (titles, urls) longer than this are clipped head…tail
_ZWJ = "\u200d"


# -- character-safe cutting ---------------------------------------------------
def _is_extender(char: str) -> bool:
    """Code points that continue the previous character (never start a cut piece)."""
    code = ord(char)
    return (
        char == _ZWJ
        or 0xFE00 <= code <= 0xFE0F  # variation selectors
        or 0x1F3FB <= code <= 0x1F3FF  # emoji skin tones
        or 0xE0020 <= code <= 0xE007F  # emoji tag sequences
        or 0xE0100 <= code <= 0xE01EF  # variation selectors supplement
        or unicodedata.category(char) in ("Mn", "Me", "Mc")
    )


def _is_regional_indicator(char: str) -> bool:
    return 0x1F1E6 <= ord(char) <= 0x1F1FF


def _splits_character(text: str, index: int) -> bool:
    if index <= 0 or index >= len(text):
        return False
    if _is_extender(text[index]) or text[index - 1] == _ZWJ:
        return True
    if _is_regional_indicator(text[index]) and _is_regional_indicator(text[index - 1]):
        run = 0
        position = index - 1
        while position >= 0 and _is_regional_indicator(text[position]):
            run += 1
            position -= 1
        return run % 2 == 1  # inside a flag pair
    return False


def cut_end(text: str, index: int) -> int:
    """Largest safe end index ≤ ``index`` (for keeping ``text[:end]``)."""
    index = max(0, min(index, len(text)))
    while _splits_character(text, index):
        index -= 1
    return index


def cut_start(text: str, index: int) -> int:
    """Smallest safe start index ≥ ``index`` (for keeping ``text[start:]``)."""
    index = max(0, min(index, len(text)))
    while _splits_character(text, index):
        index += 1
    return index


def clip_head_tail(text: str, max_chars: int) -> str:
    """``text`` itself when short enough, else its head, ``…`` and its tail within ``max_chars``."""
    if len(text) <= max_chars:
        return text
    if max_chars <= len(CLIP_MARK):
        return ""
    room = max_chars - len(CLIP_MARK)
    head_chars = (room * 2 + 2) // 3
    tail_chars = room - head_chars
    head = text[: cut_end(text, head_chars)]
    tail = text[cut_start(text, len(text) - tail_chars) :] if tail_chars else ""
    return f"{head}{CLIP_MARK}{tail}"


# -- generic preview ------------------------------------------------------------
def generic_preview(content: str, token_limit: int = 300) -> str:
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


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, str | list | dict | tuple) and len(value) == 0)


def _clip_field(value: Any) -> Any:
    return clip_head_tail(value, MAX_FIELD_CHARS) if isinstance(value, str) else value


def _project_record(
    record: dict[str, Any], kind: str, header: dict[str, Any], rule: PreviewRule
) -> tuple[dict[str, Any], str | None, str]:
    """The record's kept fields, plus (body key, body text) for clipping later."""
    compact = rule == "compact"
    fields = QUERY_KB_FIELDS if kind == "knowledge_base" else WEB_SEARCH_FIELDS
    kept: dict[str, Any] = {}
    for key in fields:
        if key not in record:
            continue
        value = record[key]
        if compact and _is_empty(value):
            continue
        if compact and key == "kb_id" and "kb_id" in header and value == header["kb_id"]:
            continue
        kept[key] = _clip_field(value)
    if kind == "knowledge_base" and isinstance(record.get("metadata"), dict):
        metadata = record["metadata"]
        nested: dict[str, Any] = {}
        for key in QUERY_KB_METADATA_FIELDS:
            if key not in metadata:
                continue
            value = metadata[key]
            if compact and (_is_empty(value) or (key in fields and record.get(key) == value)):
                continue
            nested[key] = _clip_field(value)
        if nested or not compact:
            kept["metadata"] = nested
    body_key: str | None = None
    body = ""
    for key in BODY_FIELDS:
        value = record.get(key)
        if isinstance(value, str) and value.strip():
            body_key, body = key, value
            break
    return kept, body_key, body


def _dumps(document: Any) -> str:
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"))


def _assemble(
    header: dict[str, Any],
    projected: list[tuple[dict[str, Any], str | None, str]],
    body_chars: list[int],
    result_count: int,
) -> str:
    results = []
    for (kept, body_key, body), allowance in zip(projected, body_chars, strict=True):
        record = dict(kept)
        if body_key is not None and allowance > 0:
            record[body_key] = clip_head_tail(body, allowance)
        results.append(record)
    document = {**header, "results": results, "omitted_results": result_count - len(results)}
    return _dumps(document)


def structured_preview(
    tool_name: str, content: str, token_limit: int = 300, *, rule: PreviewRule = "compact"
) -> str | None:
    """The structured preview, or None when the content is not a query_kb/web_search result."""
    kind = structured_kind(tool_name)
    if kind is None:
        return None
    try:
        payload = json.loads(content)
    except (ValueError, TypeError, RecursionError):
        return None
    if isinstance(payload, dict) and isinstance(payload.get("results"), list):
        records = payload["results"]
        header_source: dict[str, Any] = payload
    elif isinstance(payload, list):
        records = payload
        header_source = {}
    else:
        return None
    if not all(isinstance(record, dict) for record in records):
        return None

    header: dict[str, Any] = {"kind": kind, "result_count": len(records)}
    for key in HEADER_FIELDS:
        if key in header_source and not (rule == "compact" and _is_empty(header_source[key])):
            header[key] = _clip_field(header_source[key])
    projected = [
        _project_record(record, kind, header, rule) for record in records[:MAX_PREVIEW_RECORDS]
    ]
    budget = max(0, token_limit) * 4
    return _fit_records(header, projected, len(records), budget)


def _fit_records(
    header: dict[str, Any],
    projected: list[tuple[dict[str, Any], str | None, str]],
    result_count: int,
    budget: int,
) -> str | None:
    """As many leading records as fit ``budget`` with a minimal body, then grow the bodies."""

    def floor(entry: tuple[dict[str, Any], str | None, str]) -> int:
        return min(MIN_BODY_CHARS, len(entry[2]))

    shown: list[tuple[dict[str, Any], str | None, str]] = []
    for entry in projected:
        candidate = [*shown, entry]
        if len(_assemble(header, candidate, [floor(e) for e in candidate], result_count)) > budget:
            break
        shown = candidate
    if not shown and projected:
        bare = [projected[0]]
        if len(_assemble(header, bare, [0], result_count)) <= budget:
            return _assemble(header, bare, [0], result_count)
        return None  # not even one record fits: the generic preview says more
    allowances = [floor(entry) for entry in shown]
    spare = budget - len(_assemble(header, shown, allowances, result_count))
    # Hand the spare characters to the bodies, evenly, until they are whole or it is spent.
    for _ in range(8):
        growable = [i for i, entry in enumerate(shown) if allowances[i] < len(entry[2])]
        if spare <= 0 or not growable:
            break
        share = max(1, spare // len(growable))
        for i in growable:
            allowances[i] = min(len(shown[i][2]), allowances[i] + share)
        grown = _assemble(header, shown, allowances, result_count)
        if len(grown) > budget:
            allowances = _shrink_to_fit(header, shown, allowances, result_count, budget)
            break
        spare = budget - len(grown)
    return _assemble(header, shown, allowances, result_count)


def _shrink_to_fit(
    header: dict[str, Any],
    shown: list[tuple[dict[str, Any], str | None, str]],
    allowances: list[int],
    result_count: int,
    budget: int,
) -> list[int]:
    """Trim body allowances (JSON escaping can make bodies longer than their char count)."""
    allowances = list(allowances)
    for _ in range(16):
        excess = len(_assemble(header, shown, allowances, result_count)) - budget
        if excess <= 0:
            return allowances
        cut = excess // max(1, len(allowances)) + 1
        allowances = [max(min(MIN_BODY_CHARS, a), a - cut) for a in allowances]
    while len(_assemble(header, shown, allowances, result_count)) > budget and any(allowances):
        allowances = [a // 2 for a in allowances]
    return allowances


def tool_result_preview(
    tool_name: str | None,
    content: str,
    token_limit: int = 300,
    *,
    rule: PreviewRule = "compact",
) -> str:
    """The preview kept in the model's view for an offloaded result; never raises."""
    text = content if isinstance(content, str) else str(content)
    try:
        structured = structured_preview(tool_name or "", text, token_limit, rule=rule)
    except Exception:  # any surprise in odd JSON falls back to the generic shape
        structured = None
    return structured if structured is not None else generic_preview(text, token_limit)
