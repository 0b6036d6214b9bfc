"""One query_kb / web_search record as a structured preview shows it.

A shown record is whole: its citation is always written in full (``citation``):
- query_kb: ``id``, ``title``, ``source`` (or ``metadata.filename`` when there is no
  source), ``metadata.chunk_index`` and ``score``;
- web_search: ``url``, ``title`` and ``score``.
Each field is written where the record has it (top level or under ``metadata``; query_kb
looks at the top level first, except for ``chunk_index``). A title is clipped head…tail to
``MAX_TITLE_CHARS``; every other citation value is kept as it is.

Other kept fields (``EXTRA_FIELDS``) follow as room allows, strings clipped to
``MAX_EXTRA_CHARS``. Left out as already visible: null or empty values, metadata copies of a
top-level value, a ``kb_id`` equal to the header's, a ``site_name`` that is only the url's
host. The body is the first of ``BODY_FIELDS`` that is a non-blank string, clipped head…tail.
"""

from __future__ import annotations

from typing import Any

from yuxi_dash.compression.previews.clipping import clip_head_tail, dumps

MAX_TITLE_CHARS = 32
MAX_EXTRA_CHARS = 80
BODY_FIELDS = ("content", "text", "snippet", "summary")
META = "metadata"
Field = tuple[bool, str]  # (under metadata, key)

# Where a citation field may be, in the order looked at; the first non-empty one is shown.
KB_CITATION: tuple[tuple[Field, ...], ...] = (
    ((False, "id"),),
    ((False, "title"), (True, "title")),
    ((False, "source"), (True, "source"), (True, "filename")),
    ((True, "chunk_index"), (False, "chunk_index")),
    ((False, "score"), (True, "score")),
)
WEB_CITATION: tuple[tuple[Field, ...], ...] = (
    ((False, "url"),),
    ((False, "title"),),
    ((False, "score"),),
)
EXTRA_FIELDS: dict[str, tuple[Field, ...]] = {
    "knowledge_base": (
        (True, "filename"),
        (False, "file_id"),
        (True, "rerank_score"),
        (False, "distance"),
        (True, "distance"),
        (True, "hybrid_score"),
        (True, "graph_score"),
        (False, "kb_id"),
    ),
    "web_search": ((False, "site_name"), (False, "publish_time")),
}


_SIZED = (str, list, dict, tuple)


def is_empty(value: Any) -> bool:
    return value is None or (not value and isinstance(value, _SIZED))


def lookup(record: dict[str, Any], field: Field) -> Any:
    """The record's value at ``field``, or None."""
    in_meta, key = field
    holder = record.get(META) if in_meta else record
    return holder.get(key) if isinstance(holder, dict) else None


def citation(record: dict[str, Any], kind: str) -> list[tuple[Field, Any]]:
    """The citation fields the record has: (where it is, the value shown)."""
    found: list[tuple[Field, Any]] = []
    for places in KB_CITATION if kind == "knowledge_base" else WEB_CITATION:
        for field in places:
            value = lookup(record, field)
            if not is_empty(value):
                if field[1] == "title" and isinstance(value, str):
                    value = clip_head_tail(value, MAX_TITLE_CHARS)
                found.append((field, value))
                break
    return found


def _url_host(url: Any) -> str | None:
    if not isinstance(url, str):
        return None
    rest = url.partition("://")[2]
    return rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0].rpartition("@")[2].lower()


def extras(
    record: dict[str, Any], kind: str, header_kb_id: Any, cited: list[tuple[Field, Any]]
) -> list[tuple[Field, Any]]:
    """The other kept fields the reader cannot see yet (``cited``: the record's citation),
    in order of usefulness."""
    shown = {field for field, _value in cited}
    source = next((str(v) for (_m, key), v in cited if key in ("source", "filename")), "")
    found: list[tuple[Field, Any]] = []
    for field in EXTRA_FIELDS[kind]:
        value = lookup(record, field)
        in_meta, key = field
        if (
            is_empty(value)
            or field in shown
            or (in_meta and record.get(key) == value)
            or (key == "kb_id" and value == header_kb_id)
            or (key == "site_name" and str(value).lower() == _url_host(record.get("url")))
            or (key == "filename" and source.endswith(str(value)))
        ):
            continue
        if isinstance(value, str):
            value = clip_head_tail(value, MAX_EXTRA_CHARS)
        found.append((field, value))
    return found


def body(record: dict[str, Any]) -> tuple[str, str] | None:
    """(key, text) of the record's body, or None."""
    for key in BODY_FIELDS:
        value = record.get(key)
        if isinstance(value, str) and value.strip():
            return key, value
    return None


class ShownRecord:
    """A record's pieces (``"key":value`` JSON, top level or under metadata) and its body."""

    def __init__(self, record: dict[str, Any], kind: str) -> None:
        self.record = record
        self.cited = citation(record, kind)
        self.pieces: list[tuple[bool, str]] = [
            (in_meta, f'"{key}":' + dumps(value)) for (in_meta, key), value in self.cited
        ]  # the keys are ours: plain ASCII names
        self.body = body(record)
        self.body_chars = 0  # the body's allowance: characters shown of it
        self.body_json = ""
        self._rendered: tuple[frozenset[tuple[bool, str]], str] | None = None

    def add(self, field: Field, value: Any) -> None:
        self.pieces.append((field[0], f'"{field[1]}":' + dumps(value)))
        self._rendered = None

    def drop_last(self) -> None:
        self.pieces.pop()
        self._rendered = None

    def set_body(self, chars: int) -> None:
        """Show ``chars`` characters of the body (head…tail); 0 shows none."""
        self._rendered = None
        if self.body is None or chars <= 0:
            self.body_chars, self.body_json = 0, ""
            return
        self.body_chars = min(chars, len(self.body[1]))
        text = clip_head_tail(self.body[1], self.body_chars)
        self.body_json = dumps(self.body[0]) + ":" + dumps(text)

    def render(self, common: frozenset[tuple[bool, str]] = frozenset()) -> str:
        """The record's JSON without the pieces written once in ``common``."""
        cached = self._rendered
        if cached is None or (cached[0] is not common and cached[0] != common):
            kept = [piece for piece in self.pieces if piece not in common]
            cached = self._rendered = (common, render_object(kept, self.body_json))
        return cached[1]


def render_object(pieces: list[tuple[bool, str]], last: str = "") -> str:
    """``{top pieces,"metadata":{metadata pieces},last}``."""
    parts = [text for in_meta, text in pieces if not in_meta]
    nested = [text for in_meta, text in pieces if in_meta]
    if nested:
        parts.append(f'"{META}":{{' + ",".join(nested) + "}")
    if last:
        parts.append(last)
    return "{" + ",".join(parts) + "}"
