"""Reading only what a structured preview shows: the fields it keeps, bodies left undecoded.

A query_kb / web_search result is mostly its records' bodies (``content``,
``text``, ``snippet``, ``summary``), and its preview shows a few hundred
characters of a few of them. ``read_records`` decodes a whole JSON document
(the UTF-8 bytes already made for the saved file) with msgspec into just the
fields a preview reads: the header fields, every kept field of a record
(``QUERY_KB_FIELDS``, ``WEB_SEARCH_FIELDS``, ``metadata``) and its bodies, each
string body kept as a ``RawBody`` that is decoded only as far as the preview
gives it room. Other keys are skipped (msgspec still checks them); records past
``MAX_PREVIEW_RECORDS`` are counted, not converted.

The preview made from its answer is the one the full decode gives: every value
read is the value ``json`` reads (a body holding a lone surrogate, which msgspec
refuses, is read by ``json``: ``salvage.decode_json_value``), and what it
skips cannot change the preview. Where the answer could differ it says None and
the caller decodes the whole document (``salvage.decode_json_bytes``): no
``results`` list at the top (a bare list is read here, and with ``nested`` an
envelope one level down: the first member that is an object with ``results``,
as the compact rule looks for it), a record that is not an object, or a value
read that msgspec refuses (a lone surrogate or ``NaN`` in a kept field).

One difference is deliberate: a number longer than Python's integer digit limit
(4300 digits) in a field no preview reads. ``json`` refuses the whole document
for it, so from the text alone the preview is the salvage of what precedes the
number (or the generic one); read here, the document is the valid JSON it is.
"""

from __future__ import annotations

from typing import Any

import msgspec

from yuxi_dash.compression.clipping import RawBody
from yuxi_dash.compression.evidence import (
    BODY_FIELDS,
    HEADER_FIELDS,
    MAX_PREVIEW_RECORDS,
    QUERY_KB_FIELDS,
    WEB_SEARCH_FIELDS,
)
from yuxi_dash.compression.salvage import decode_json_value, json_bounds

# Every record key a preview reads besides its bodies (both rules, both kinds).
RECORD_FIELDS: tuple[str, ...] = tuple(
    dict.fromkeys((*QUERY_KB_FIELDS, *WEB_SEARCH_FIELDS, "metadata"))
)
assert not set(RECORD_FIELDS) & set(BODY_FIELDS)

_UNSET = msgspec.UNSET
_Record = msgspec.defstruct(
    "_Record",
    [
        *((name, Any, _UNSET) for name in RECORD_FIELDS),
        *((name, msgspec.Raw | msgspec.UnsetType, _UNSET) for name in BODY_FIELDS),
    ],
    gc=False,
)
_Envelope = msgspec.defstruct(
    "_Envelope",
    [
        ("results", list[_Record] | msgspec.UnsetType, _UNSET),  # type: ignore[valid-type]
        *((name, Any, _UNSET) for name in HEADER_FIELDS),
    ],
    gc=False,
)
_read_envelope = msgspec.json.Decoder(_Envelope).decode
_read_members = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode  # each value left as read
_read_list = msgspec.json.Decoder(list[_Record]).decode  # type: ignore[valid-type]
_astuple = msgspec.structs.astuple
_FIELDS: tuple[str, ...] = (*RECORD_FIELDS, *BODY_FIELDS)  # a _Record's fields, in order
_FIRST_BODY = len(RECORD_FIELDS)
assert _Record.__struct_fields__ == _FIELDS

Records = tuple[list[dict[str, Any]], int, dict[str, Any]]


def read_records(encoded: bytes, window: int, *, nested: bool = False) -> Records | None:
    """(the leading records, how many there are, the header fields), or None: decode it whole.

    ``encoded``: a whole tool result as UTF-8 (``workdir.encode_text``); ``window``:
    the characters a ``RawBody`` decodes at each end of a long body (the preview's
    budget + 2). The leading records are the first ``MAX_PREVIEW_RECORDS``, as dicts
    of the fields present; string bodies are ``RawBody``. ``nested``: an object with
    no ``results`` is read one level down (``_inner_envelope``).
    """
    start, end = json_bounds(encoded)
    if start >= end:
        return None
    opener, closer = encoded[start], encoded[end - 1]
    try:
        if opener == 0x5B and closer == 0x5D:  # [ ... ]
            records = _read_list(encoded)
            header: dict[str, Any] = {}
        elif opener == 0x7B and closer == 0x7D:  # { ... }
            envelope = _read_envelope(encoded)
            results: Any = envelope.results  # type: ignore[attr-defined]  # a defstruct field
            if results is _UNSET:
                inner = _inner_envelope(encoded) if nested else None
                if inner is None:
                    return None
                envelope, results = inner
            records = results
            header = {}
            for name in HEADER_FIELDS:
                value = getattr(envelope, name)
                if value is not _UNSET:
                    header[name] = value
        else:
            return None
        leading = [_as_dict(record, window) for record in records[:MAX_PREVIEW_RECORDS]]
    except (ValueError, RecursionError, MemoryError):
        return None  # msgspec's DecodeError (ValidationError too) is a ValueError, as json's is
    return leading, len(records), header


def _inner_envelope(encoded: bytes) -> tuple[Any, Any] | None:
    """(the envelope, its results) of the first member that is an object with ``results``.

    The full decode's rule (``preview._locate_records``): members in document order, a
    repeated key where it first appears holding its last value, as a dict of json's has
    it. A member whose ``results`` is not a list of objects raises (msgspec's
    ValidationError): the caller then decodes the whole document, which decides.
    """
    for raw in _read_members(encoded).values():
        if memoryview(raw)[0] == 0x7B:  # {: an object (a Raw value is never empty)
            envelope = _read_envelope(raw)
            if envelope.results is not _UNSET:  # type: ignore[attr-defined]  # defstruct
                return envelope, envelope.results  # type: ignore[attr-defined]
    return None


def _as_dict(record: Any, window: int) -> dict[str, Any]:
    """The fields present (``_FIELDS`` order), string bodies as ``RawBody``."""
    values = _astuple(record)
    fields: dict[str, Any] = {}
    for index in range(_FIRST_BODY):
        value = values[index]
        if value is not _UNSET:
            fields[_FIELDS[index]] = value
    for index in range(_FIRST_BODY, len(_FIELDS)):
        raw = values[index]
        if raw is not _UNSET:
            data = bytes(raw)
            # a string stays undecoded; any other value is decoded (a preview skips it)
            fields[_FIELDS[index]] = (
                RawBody(data, window) if data[:1] == b'"' else decode_json_value(data)
            )
    return fields
