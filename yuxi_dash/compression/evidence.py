"""The compact preview rule (ours): evidence first, in the same budget.

1. every kept record's identity (its ``id``, or ``url`` for web results, whole,
   and its score), records in order up to the cap, as many as fit;
2. the other kept fields, one field at a time by usefulness
   (``KB_FIELD_ORDER`` / ``WEB_FIELD_ORDER``), for the leading records as far
   as it fits. A field that every shown record has with the same value is
   written once in the header's ``common`` object (nested as in a record: read a
   record as ``common`` overlaid with the record). Left out as already visible:
   null or empty values, a ``kb_id`` equal to the header's, metadata values
   equal to the record's own top-level value (same key), a web ``site_name``
   that is only the url's host name; strings are clipped head…tail to
   ``MAX_METADATA_CHARS``;
3. the spare characters to the bodies of the leading records, each shown body
   at least ``MIN_BODY_CHARS`` long (or whole), evenly.

Both rules keep the same fields (``QUERY_KB_FIELDS``, ``QUERY_KB_METADATA_FIELDS``,
``WEB_SEARCH_FIELDS``, a body from ``BODY_FIELDS``) of at most
``MAX_PREVIEW_RECORDS`` records; they differ in what they spend the budget on.
"""

from __future__ import annotations

from typing import Any

from yuxi_dash.compression.clipping import (
    _BODY_KEY_CHARS,
    MIN_BODY_CHARS,
    RawBody,
    _dumps,
    _encode_string,
    _grow_bodies,
    _RecordPiece,
    clip_head_tail,
)

MAX_PREVIEW_RECORDS = 8
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
# The compact rule: identity keys (the first present is shown, whole), then the other kept
# fields by usefulness as (nested under metadata, key).
KB_IDENTITY_KEYS = ("id", "file_id", "source", "title")
WEB_IDENTITY_KEYS = ("url", "title")
KB_FIELD_ORDER: tuple[tuple[bool, str], ...] = (
    (False, "title"),
    (True, "title"),
    (False, "source"),
    (True, "source"),
    (True, "filename"),
    (True, "chunk_index"),
    (False, "file_id"),
    (True, "rerank_score"),
    (False, "distance"),
    (True, "distance"),
    (True, "hybrid_score"),
    (True, "graph_score"),
    (True, "score"),
    (False, "kb_id"),
)
WEB_FIELD_ORDER: tuple[tuple[bool, str], ...] = (
    (False, "title"),
    (False, "site_name"),
    (False, "publish_time"),
)
COMMON_KEY = "common"
BODY_FIELDS = ("content", "text", "snippet", "summary")
MAX_FIELD_CHARS = 240  # plain rule and header strings longer than this are clipped head…tail
MAX_IDENTITY_CHARS = 512  # an id or url longer than this is clipped (and no longer whole)
MAX_METADATA_CHARS = 80  # compact rule: other kept strings (titles, sources) are clipped to this
_MIN_PIECE_CHARS = len('"score":0')  # no field fits in less spare than this


_SIZED_TYPES = frozenset((str, list, dict, tuple))
_MISSING = object()


def _is_empty(value: Any) -> bool:
    return value is None or (not value and type(value) in _SIZED_TYPES)


def _clip_field(value: Any) -> Any:
    return clip_head_tail(value, MAX_FIELD_CHARS) if isinstance(value, str) else value


def _url_host(url: Any) -> str | None:
    if type(url) is not str:
        return None
    rest = url.partition("://")[2]
    host = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0].rpartition("@")[2]
    return host.lower() or None


# -- the evidence-first fitting (the compact rule) ------------------------------
_METADATA_OPEN = '"metadata":{'
_EMPTY_METADATA_CHARS = len('"metadata":{}')
_COMMON_OPEN = f',"{COMMON_KEY}":'
_KEY_PREFIXES: dict[str, str] = {
    key: _encode_string(key) + ":"
    for key in {*QUERY_KB_FIELDS, *QUERY_KB_METADATA_FIELDS, *WEB_SEARCH_FIELDS}
}
_NON_FINITE = {"inf": "Infinity", "-inf": "-Infinity", "nan": "NaN"}


def _value_json(value: Any, max_chars: int) -> str:
    """``value`` as compact JSON (as ``_dumps``), a string clipped head…tail to ``max_chars``."""
    kind = type(value)
    if kind is str:
        return _encode_string(
            value if len(value) <= max_chars else clip_head_tail(value, max_chars)
        )
    if kind is int:  # exactly int or float here: repr() is json's text of the number
        return repr(value)
    if kind is float:
        text = repr(value)
        return _NON_FINITE.get(text, text)
    return _dumps(value)


class _Object:
    """A JSON object assembled from ``"key":value`` pieces, top level and under ``metadata``.

    ``length`` is always the exact length of ``render()``.
    """

    __slots__ = ("length", "meta", "parts")

    def __init__(self) -> None:
        self.parts: list[str | list[str]] = []  # the list is the metadata object's pieces
        self.meta: list[str] | None = None
        self.length = 2  # "{}"

    def cost(self, in_meta: bool, piece: str) -> int:
        """What adding ``piece`` (at the top level or under metadata) adds to the length."""
        if not in_meta:
            return len(piece) + (1 if self.parts else 0)
        if self.meta is not None:
            return len(piece) + 1
        return len(piece) + _EMPTY_METADATA_CHARS + (1 if self.parts else 0)

    def add(self, in_meta: bool, piece: str, cost: int) -> None:
        self.length += cost
        if not in_meta:
            self.parts.append(piece)
        elif self.meta is not None:
            self.meta.append(piece)
        else:
            self.meta = [piece]
            self.parts.append(self.meta)

    def render(self) -> str:
        if self.meta is None:
            return "{" + ",".join(self.parts) + "}"  # type: ignore[arg-type]
        return (
            "{"
            + ",".join(
                [
                    part if type(part) is str else _METADATA_OPEN + ",".join(part) + "}"
                    for part in self.parts
                ]
            )
            + "}"
        )


Field = tuple[bool, str]  # (nested under metadata, key)


def _identity(
    record: dict[str, Any], id_keys: tuple[str, ...], knowledge_base: bool
) -> tuple[_Object, tuple[Field, ...]]:
    """The record's identity: its first id key present (``id`` / ``url`` first), whole, then its
    score; and the fields it took when those are not the usual ``id``/``url`` and ``score``."""
    shown = _Object()
    taken: tuple[Field, ...] = ()
    for key in id_keys:
        value = record.get(key)
        if value is not None and not (not value and type(value) in _SIZED_TYPES):
            piece = _KEY_PREFIXES[key] + _value_json(value, MAX_IDENTITY_CHARS)
            shown.add(False, piece, shown.cost(False, piece))
            if key != id_keys[0]:
                taken = ((False, key),)
            break
    score = record.get("score")
    if score is not None and not (not score and type(score) in _SIZED_TYPES):
        piece = '"score":' + _value_json(score, MAX_IDENTITY_CHARS)
        shown.add(False, piece, shown.cost(False, piece))
    elif knowledge_base and type(record.get("metadata")) is dict:
        score = record["metadata"].get("score")
        if score is not None and not (not score and type(score) in _SIZED_TYPES):
            piece = '"score":' + _value_json(score, MAX_IDENTITY_CHARS)
            shown.add(True, piece, shown.cost(True, piece))
            taken = (*taken, (True, "score"))
    return shown, taken


def _offered(
    record: dict[str, Any],
    field: Field,
    taken: tuple[Field, ...],
    header_kb_id: Any,
) -> Any:
    """The value of a kept field the reader cannot already see, else ``_MISSING``.

    Left out: null or empty values, a ``kb_id`` equal to the header's, metadata
    values equal to the record's own top-level value of the same key, a web
    ``site_name`` that is just the url's host name, the identity's own fields.
    """
    in_meta, key = field
    if in_meta:
        metadata = record.get("metadata")
        if type(metadata) is not dict:
            return _MISSING
        value = metadata.get(key, _MISSING)
        if value is _MISSING or (key in QUERY_KB_FIELDS and record.get(key, _MISSING) == value):
            return _MISSING
    else:
        value = record.get(key, _MISSING)
        if value is _MISSING:
            return _MISSING
        if key == "kb_id" and value == header_kb_id:
            return _MISSING
        if (
            key == "site_name"
            and type(value) is str
            and value.lower() == _url_host(record.get("url"))
        ):
            return _MISSING
    if value is None or (not value and type(value) in _SIZED_TYPES):
        return _MISSING
    if taken and field in taken:
        return _MISSING
    return value


def _body(record: dict[str, Any]) -> tuple[str | None, str | RawBody]:
    """(the key, the body): the first of ``BODY_FIELDS`` that is a string and not blank."""
    for key in BODY_FIELDS:
        value = record.get(key)
        if type(value) is str:
            if value and not value.isspace():  # not blank, without a copy
                return key, value
        elif type(value) is RawBody and not value.is_blank():
            return key, value
    return None, ""


def _fit_evidence(
    header_json: str,
    records: list[dict[str, Any]],
    result_count: int,
    kind: str,
    header: dict[str, Any],
    budget: int,
) -> str | None:
    """The compact rule: identity of every kept record, then other fields by usefulness, then bodies.

    1. Records in order, up to the cap, each with its identity alone (id or url,
       whole, and its score), as many as fit.
    2. The other kept fields, one field at a time in ``KB_FIELD_ORDER`` /
       ``WEB_FIELD_ORDER``, for the leading records as far as it fits; a field
       that every shown record has with the same value is written once, in the
       header's ``common`` object (same nesting as a record).
    3. The spare characters to the bodies (``_grow_bodies``).

    ``records``: the leading records at least (up to the cap) of ``result_count``.
    None when not even one record's identity fits (the generic preview says more).
    Sizes are exact: the preview is the concatenation of the pieces measured here.
    The loops are written out (no helper call per field and record): this runs
    once per offloaded result, next to one ``json.loads`` of it.
    """
    knowledge_base = kind == "knowledge_base"
    id_keys = KB_IDENTITY_KEYS if knowledge_base else WEB_IDENTITY_KEYS
    id_prefix = _KEY_PREFIXES[id_keys[0]]
    # everything but the records: header, '"results":[', commas, '],"omitted_results":N}'
    frame = len(header_json) + len(',"results":[],"omitted_results":}')
    shown: list[dict[str, Any]] = []
    objects: list[_Object] = []
    taken: list[tuple[Field, ...]] = []
    used = 0
    for record in records[:MAX_PREVIEW_RECORDS]:
        ident = record.get(id_keys[0])
        score = record.get("score")
        if (
            type(ident) is str
            and 0 < len(ident) <= MAX_IDENTITY_CHARS
            and (type(score) is float or type(score) is int)
        ):  # the usual record: a string id or url and a number score
            identity = _Object()
            score_text = repr(score)  # exactly a float or an int: json's text of the number
            identity.parts = [
                id_prefix + _encode_string(ident),
                '"score":' + _NON_FINITE.get(score_text, score_text),
            ]
            identity.length = 3 + len(identity.parts[0]) + len(identity.parts[1])
            took: tuple[Field, ...] = ()
        else:
            identity, took = _identity(record, id_keys, knowledge_base)
        count = len(shown) + 1
        if frame + count - 1 + len(str(result_count - count)) + used + identity.length > budget:
            break
        shown.append(record)
        objects.append(identity)
        taken.append(took)
        used += identity.length
    if not shown:  # no record, or not even one identity fits: the header alone, or generic
        empty = f'{header_json},"results":[],"omitted_results":{result_count}}}'
        return empty if not records and len(empty) <= budget else None
    count = len(shown)
    spare = budget - (frame + count - 1 + len(str(result_count - count))) - used
    common = _Object()
    header_kb_id = header.get("kb_id", _MISSING)
    any_taken = any(taken)
    # the keys some shown record has, at the top and under metadata: a field no record
    # has is passed over without a walk over the records
    keys: set[str] = set()
    metadata_keys: set[str] = set()
    metadata_of: list[Any] = []
    for record in shown:
        keys.update(record)
        metadata = record.get("metadata") if knowledge_base else None
        metadata_of.append(metadata)
        if type(metadata) is dict:
            metadata_keys.update(metadata)
    for field in KB_FIELD_ORDER if knowledge_base else WEB_FIELD_ORDER:
        in_meta, key = field
        if key not in (metadata_keys if in_meta else keys):
            continue
        prefix = _KEY_PREFIXES[key]
        if spare < len(prefix) + 2:
            continue  # not even a one-character value would fit
        if spare < _MIN_PIECE_CHARS:
            break
        shadowed = in_meta and key in QUERY_KB_FIELDS  # a metadata copy of a top-level value?
        # what the reader cannot see yet: see _offered; fields then stop at the first record
        # they do not fit; a value every shown record has is written once, in "common"
        same = count > 1
        first: Any = _MISSING
        values: list[Any] = []  # looked up once, as the walk first reaches each record
        index = 0
        while index < count:
            if index < len(values):
                value = values[index]
            else:
                record = shown[index]
                if in_meta:
                    metadata = metadata_of[index]
                    value = metadata.get(key, _MISSING) if type(metadata) is dict else _MISSING
                    if shadowed and value is not _MISSING and record.get(key, _MISSING) == value:
                        value = _MISSING
                else:
                    value = record.get(key, _MISSING)
                    if value is not _MISSING and (key == "kb_id" or key == "site_name"):
                        value = _offered(record, field, (), header_kb_id)
                if value is None or (not value and type(value) in _SIZED_TYPES):
                    value = _MISSING
                elif any_taken and field in taken[index]:
                    value = _MISSING
                values.append(value)
            if same:
                if index == 0:
                    first = value
                    same = value is not _MISSING
                elif value is _MISSING or type(value) is not type(first) or value != first:
                    same = False
                    index = 0  # not common: place it record by record, from the first
                    continue
                if same:
                    index += 1
                    continue
            if value is not _MISSING:
                piece = prefix + (
                    _encode_string(value)
                    if type(value) is str and len(value) <= MAX_METADATA_CHARS
                    else _value_json(value, MAX_METADATA_CHARS)
                )
                target = objects[index]
                if not in_meta:
                    cost = len(piece) + (1 if target.parts else 0)
                elif target.meta is not None:
                    cost = len(piece) + 1
                else:
                    cost = len(piece) + _EMPTY_METADATA_CHARS + (1 if target.parts else 0)
                if cost > spare:
                    break
                target.add(in_meta, piece, cost)
                spare -= cost
            index += 1
        if same:  # every shown record has the same value: once for all, if it fits
            piece = prefix + _value_json(first, MAX_METADATA_CHARS)
            cost = common.cost(in_meta, piece) + (0 if common.parts else len(_COMMON_OPEN) + 2)
            if cost <= spare:
                common.add(in_meta, piece, cost)
                spare -= cost
    if spare >= MIN_BODY_CHARS + _BODY_KEY_CHARS:
        pieces = [
            _RecordPiece(target.render(), *_body(record))
            for target, record in zip(objects, shown, strict=True)
        ]
        _grow_bodies(pieces, spare, fresh=True)
        records_json = ",".join([piece.text for piece in pieces])
    else:
        records_json = ",".join([target.render() for target in objects])
    if common.parts:
        header_json += _COMMON_OPEN + common.render()
    omitted = result_count - count
    return f'{header_json},"results":[{records_json}],"omitted_results":{omitted}}}'
