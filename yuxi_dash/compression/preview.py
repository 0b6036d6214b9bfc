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
own top-level value (same key), null/empty values, and a web ``site_name`` that
is only the url's host name are omitted. Fewer bytes per record means more
records (ids, urls) fit the same budget. Ours also gives evidence priority:
records are fitted on their identity fields alone (ids, urls, titles, sources,
scores, metadata), as many as fit up to the cap, before any body text; the
spare characters then go to the bodies of the leading records, each shown
body at least ``MIN_BODY_CHARS`` long (or whole), evenly and clipped
head…tail. The plain rule fits each record with a ``MIN_BODY_CHARS`` body
first. Bodies are context; the full result is one file read away.

No cut ever lands inside a character: slicing is by code point and boundaries
step around combining marks, joiners, variation selectors and flag pairs. Bad or
unexpected JSON falls back to the generic preview; a preview never raises.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable, Iterator
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
MIN_BODY_CHARS = 32  # a listed record shows at least this much body (head…tail)
MAX_FIELD_CHARS = 240  # identity strings (titles, urls) longer than this are clipped head…tail
_ZWJ = "\u200d"
_BODY_KEY_CHARS = len(',"content":""')  # what a body costs besides its characters


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
    if text[index] < "\u0300" and text[index - 1] != _ZWJ:
        return False  # fast path: nothing below U+0300 continues a character
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


_SIZED_TYPES = (str, list, dict, tuple)
_MISSING = object()


def _is_empty(value: Any) -> bool:
    return value is None or (type(value) in _SIZED_TYPES and not value)


def _clip_field(value: Any) -> Any:
    return clip_head_tail(value, MAX_FIELD_CHARS) if isinstance(value, str) else value


def _url_host(url: Any) -> str | None:
    if type(url) is not str:
        return None
    rest = url.partition("://")[2]
    host = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0].rpartition("@")[2]
    return host.lower() or None


def _project_record(
    record: dict[str, Any], kind: str, header: dict[str, Any], rule: PreviewRule
) -> tuple[dict[str, Any], str | None, str]:
    """The record's kept fields, plus (body key, body text) for clipping later.

    The compact rule leaves out what the reader can already see: null or empty
    values, a ``kb_id`` equal to the header's, metadata values equal to the
    record's own top-level value of the same key, and a web ``site_name`` that is
    just the url's host name.
    """
    compact = rule == "compact"
    knowledge_base = kind == "knowledge_base"
    fields = QUERY_KB_FIELDS if knowledge_base else WEB_SEARCH_FIELDS
    kept: dict[str, Any] = {}
    for key in fields:
        if key not in record:
            continue
        value = record[key]
        if compact:
            if value is None or (type(value) in _SIZED_TYPES and not value):
                continue
            if key == "kb_id" and value == header.get("kb_id", _MISSING):
                continue
            if (
                key == "site_name"
                and type(value) is str
                and value.lower() == _url_host(record.get("url"))
            ):
                continue
        if type(value) is str and len(value) > MAX_FIELD_CHARS:
            value = clip_head_tail(value, MAX_FIELD_CHARS)
        kept[key] = value
    metadata = record.get("metadata") if knowledge_base else None
    if type(metadata) is dict:
        nested: dict[str, Any] = {}
        for key in QUERY_KB_METADATA_FIELDS:
            if key not in metadata:
                continue
            value = metadata[key]
            if compact and (
                value is None
                or (type(value) in _SIZED_TYPES and not value)
                or (key in fields and record.get(key, _MISSING) == value)
            ):
                continue
            if type(value) is str and len(value) > MAX_FIELD_CHARS:
                value = clip_head_tail(value, MAX_FIELD_CHARS)
            nested[key] = value
        if nested or not compact:
            kept["metadata"] = nested
    for key in BODY_FIELDS:
        value = record.get(key)
        if type(value) is str and value and not value.isspace():  # not blank, without a copy
            return kept, key, value
    return kept, None, ""


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_encode_string = json.encoder.encode_basestring  # json's own quoting, non-ASCII kept


def _make_fast_encoder() -> Callable[[Any, int], Any] | None:
    """json's C encoder built once (``json.dumps`` builds one per call); None if unavailable."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None

    def refuse(value: Any) -> Any:
        raise TypeError(f"not JSON serializable: {type(value).__name__}")

    try:
        encode = make(None, refuse, _encode_string, None, ":", ",", False, False, True)
        if "".join(encode({"a": [1, 2.5, None, True, "é"]}, 0)) != '{"a":[1,2.5,null,true,"é"]}':
            return None
    except Exception:
        return None
    return encode  # type: ignore[no-any-return]


_c_encode = _make_fast_encoder()


def _dumps(document: Any) -> str:
    """Compact JSON, UTF-8 characters kept as they are (same text as ``json.dumps``)."""
    if type(document) is str:
        return _encode_string(document)
    if _c_encode is not None:
        try:
            return "".join(_c_encode(document, 0))
        except (TypeError, ValueError):
            pass  # odd values: let the standard encoder decide
    return _ENCODER.encode(document)


class _RecordPiece:
    """One record's JSON, assembled from its kept fields and a body clipped to an allowance."""

    __slots__ = ("allowance", "bare", "body", "body_key", "prefix", "text")

    def __init__(self, kept: dict[str, Any], body_key: str | None, body: str) -> None:
        self.bare = self.text = _dumps(kept)  # the record without its body
        self.body = body
        self.body_key = body_key
        self.prefix: str | None = None  # the record up to its body's value, built when needed
        self.allowance = 0

    def render(self, allowance: int) -> str:
        if self.body_key is None or allowance <= 0:
            return self.bare
        return self._prefix() + _encode_string(clip_head_tail(self.body, allowance)) + "}"

    def _prefix(self) -> str:
        """The record up to its body's value: ``{fields,"content":``."""
        if self.prefix is None:
            comma = "," if len(self.bare) > 2 else ""
            self.prefix = self.bare[:-1] + comma + _encode_string(self.body_key) + ":"
        return self.prefix

    def empty_body_chars(self) -> int:
        """What an empty body adds to the bare record: its key, colon, comma and quotes."""
        return len(self._prefix()) + len('""}') - len(self.bare)

    def set(self, allowance: int) -> None:
        self.allowance = allowance
        self.text = self.render(allowance)


def structured_preview(
    tool_name: str, content: str, token_limit: int = 300, *, rule: PreviewRule = "compact"
) -> str | None:
    """The structured preview, or None when the content is not a query_kb/web_search result."""
    kind = structured_kind(tool_name)
    if kind is None:
        return None
    stripped = content.lstrip()
    if not stripped.startswith(("{", "[")):
        return None
    try:
        payload = json.loads(stripped)
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
    pieces = (
        _RecordPiece(*_project_record(record, kind, header, rule))
        for record in records[:MAX_PREVIEW_RECORDS]
    )  # lazy: records past the first that does not fit are never projected
    budget = max(0, token_limit) * 4
    if rule == "compact":
        return _fit_records(_dumps(header)[:-1], pieces, len(records), budget, min_body=0)
    return _fit_records(_dumps(header)[:-1], pieces, len(records), budget)


def _frame(header_json: str, shown: int, result_count: int) -> int:
    """Characters of everything but the records: header, brackets, commas, omitted count."""
    tail = f'],"omitted_results":{result_count - shown}}}'
    return len(header_json) + len(',"results":[') + max(0, shown - 1) + len(tail)


def _fit_records(
    header_json: str,
    pieces: Iterator[_RecordPiece],
    result_count: int,
    budget: int,
    *,
    min_body: int = MIN_BODY_CHARS,
) -> str | None:
    """As many leading records as fit ``budget`` with a ``min_body`` body, then grow the bodies.

    With ``min_body=0`` (the compact rule) records are fitted on their identity
    fields alone, and the spare characters then go to the bodies; when the spare
    is too small to give every shown record a useful body (``MIN_BODY_CHARS``),
    it goes to the leading records first, in rank order.
    Sizes are exact: the preview is the concatenation of the pieces measured here.
    """
    shown: list[_RecordPiece] = []
    first: _RecordPiece | None = None
    used = 0
    for piece in pieces:
        first = first or piece
        if min_body:
            piece.set(min(min_body, len(piece.body)))
        if _frame(header_json, len(shown) + 1, result_count) + used + len(piece.text) > budget:
            break
        shown.append(piece)
        used += len(piece.text)
    if not shown:
        if first is None:
            return _render(header_json, [], result_count)
        bare = first
        bare.set(0)
        if _frame(header_json, 1, result_count) + len(bare.text) > budget:
            return None  # not even one record fits: the generic preview says more
        return _render(header_json, [bare], result_count)
    spare = budget - _frame(header_json, len(shown), result_count) - used
    growing = shown
    if not min_body:
        # A body shorter than MIN_BODY_CHARS says little: fewer, useful bodies, leading first.
        with_body = [piece for piece in shown if piece.body_key is not None]
        growing = with_body[: max(0, spare) // (MIN_BODY_CHARS + _BODY_KEY_CHARS)]
    # Hand the spare characters to the bodies, evenly, until they are whole or it is spent.
    for _ in range(4):
        growable = [piece for piece in growing if piece.allowance < len(piece.body)]
        if spare <= 0 or not growable:
            break
        share = spare // len(growable)
        if share <= 0:
            break
        for piece in growable:
            target = piece.allowance + share
            floor = piece.allowance
            if not min_body and not floor:
                # A new body also costs its key and quotes, and is useful from MIN_BODY_CHARS.
                target -= piece.empty_body_chars()
                floor = min(MIN_BODY_CHARS, len(piece.body)) - 1
            allowance = min(len(piece.body), target)
            while allowance > floor:
                text = piece.render(allowance)
                growth = len(text) - len(piece.text)
                if growth <= spare:
                    piece.allowance, piece.text = allowance, text
                    spare -= growth
                    break
                allowance -= growth - spare  # escaping made it longer than its characters
    return _render(header_json, shown, result_count)


def _render(header_json: str, shown: list[_RecordPiece], result_count: int) -> str:
    records = ",".join(piece.text for piece in shown)
    return f'{header_json},"results":[{records}],"omitted_results":{result_count - len(shown)}}}'


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
