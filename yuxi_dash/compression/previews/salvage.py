"""Reading a tool result's JSON records, and salvaging them from text that is not JSON.

``parse_records_text`` decodes the text once (``json.JSONDecoder.raw_decode``); when that
fails it recovers the leading complete records. The salvages:
- ``"trailing_text"``: a whole JSON document followed by other text;
- ``"cut"``: JSON cut short: every complete value before the cut is kept, down to
  ``MAX_SALVAGE_DEPTH`` levels; list items (and a cut object's pairs) are whole or absent,
  at most ``MAX_SALVAGED_ITEMS`` of them;
- ``"python_repr"`` (``"python_repr_cut"`` when cut): a Python literal. A plain repr is
  turned into JSON with string operations; any other is read with ``ast.literal_eval``
  (never code), whole only, within ``MAX_LITERAL_CHARS`` and ``MAX_LITERAL_ITEMS``.

Bounded: a salvage reads the text at most ``2 × MAX_SALVAGE_DEPTH + 1`` times, each linear.
Too deep, too large or unparseable gives None (the caller shows the generic preview).
Never raises. Inside ``shared_parses()`` one text object is read once (``shared_parses``).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal

SalvageKind = Literal["trailing_text", "cut", "python_repr", "python_repr_cut"]
MAX_SALVAGE_DEPTH = 3
MAX_SALVAGED_ITEMS = 1000  # a cut list (object) is read item (pair) by item up to this many
MAX_LITERAL_CHARS = 1 << 20  # a longer Python repr is not parsed
MAX_LITERAL_ITEMS = 5000  # nor one with more separators: at most ~50 ms of parsing

_DECODER = json.JSONDecoder()
_decode = _DECODER.raw_decode
_JSON_SPACE_TEXT = " \t\n\r"
_WHITESPACE = re.compile(r"[ \t\n\r]*")


def _skip_space(text: str, pos: int) -> int:
    """The index of the first non-whitespace character at or after ``pos``."""
    return _WHITESPACE.match(text, pos).end()  # type: ignore[union-attr]  # "*" always matches


_PARSE_ERRORS = (ValueError, TypeError, RecursionError, MemoryError, OverflowError)


Parsed = tuple[Any, SalvageKind | None] | None
# id(text) -> (text, its value): the text is held, so its id names it for the memo's life.
_SHARED: ContextVar[dict[int, tuple[str, Parsed]] | None] = ContextVar("_SHARED", default=None)


@contextmanager
def shared_parses() -> Iterator[None]:
    """Within the block (this thread or task), ``parse_records_text`` reads each text object
    once: a compression's preview, then its evidence ledger, decode a result once. Keyed by
    identity, so the same object, not an equal copy, is what is shared; the values (which
    no caller changes) are held until the block ends."""
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


def parse_records_text(text: str) -> Parsed:
    """(the decoded value, how it was salvaged or None when the text is JSON), or None.

    Inside ``shared_parses()``, a text object already read gives the same value again.
    """
    memo = _SHARED.get()
    if memo is None:
        return _parse_records_text(text)
    held = memo.get(id(text))
    if held is None or held[0] is not text:
        held = memo[id(text)] = (text, _parse_records_text(text))
    return held[1]


def _parse_records_text(text: str) -> Parsed:
    """``parse_records_text`` without the memo.

    ``text`` starts with ``{`` or ``[`` (leading whitespace already stripped). Text
    that cannot be one JSON document (it does not end as one does) and is not a
    Python repr is read once, container by container (``_partial``), instead of a
    whole decode that fails at the cut and then a partial one.
    """
    repr_first = _repr_first(text)
    if not repr_first and not _ends_like_json(text):
        try:
            value, ended, _end = _partial(text, 0, MAX_SALVAGE_DEPTH)
        except RecursionError:
            return None
        except _PARSE_ERRORS:
            pass  # read again below, as any other text is
        else:
            if ended == _CLOSED:  # a whole document, then text after it
                return value, "trailing_text"
            if ended == _BROKEN:  # what the whole decode's failure would lead to
                return _cut_or_literal(text, value, repr_first=False)
    try:
        value, end = _decode(text)
    except RecursionError:
        return None
    except ValueError:
        return _salvage(text, repr_first)
    if end == len(text) or _skip_space(text, end) == len(text):
        return value, None
    return value, "trailing_text"


def _repr_first(text: str) -> bool:
    """Whether the text's first quote is ``'``: a Python repr, read as one first."""
    first_single = text.find("'")
    if first_single == -1:
        return False
    first_double = text.find('"', 0, first_single)
    return first_double == -1


def _ends_like_json(text: str) -> bool:
    """Whether ``text`` ends with ``}`` or ``]`` before JSON whitespace (a document must)."""
    end = len(text)
    while end and text[end - 1] in _JSON_SPACE_TEXT:
        end -= 1
    return end > 0 and text[end - 1] in "}]"


def _salvage(text: str, repr_first: bool) -> tuple[Any, SalvageKind] | None:
    """Cut JSON or a Python repr: whichever the text's first quote says it is first."""
    if repr_first:
        read = _read_repr(text)
        if read is not None:
            return read
    try:
        value, _ended, _end = _partial(text, 0, MAX_SALVAGE_DEPTH)
    except _PARSE_ERRORS:
        return None
    return _cut_or_literal(text, value, repr_first)


def _cut_or_literal(text: str, value: Any, repr_first: bool) -> tuple[Any, SalvageKind] | None:
    """The salvage of text that is not JSON, given what ``_partial`` read of it."""
    if value:  # something before the cut: a key or an item
        if _ends_closed(text) and not repr_first and _looks_like_a_literal(text):
            # whole, yet not JSON: a repr whose first quote is a '"' ({"it's": None})
            literal = _literal_eval(text)
            if literal is not None:
                return literal
        return value, "cut"
    return None if repr_first else _read_repr(text)


def _ends_closed(text: str) -> bool:
    """Whether ``text`` ends as a whole dict or list does (a cut text mostly does not)."""
    return text.rstrip().endswith(("}", "]"))


def _read_repr(text: str) -> tuple[Any, SalvageKind] | None:
    if not _looks_like_a_literal(text):
        return None
    as_json = _simple_repr_as_json(text)
    if as_json is not None:
        try:
            return _decode(as_json)[0], "python_repr"
        except RecursionError:
            return None
        except ValueError:
            # Not JSON once converted: cut short, or whole but beyond JSON (an integer
            # key, a set). Text that does not end as a dict or list does is cut for sure.
            if not _ends_closed(text):
                cut = _read_cut_repr(as_json)
                if cut is not None:
                    return cut
                as_json = None  # nothing complete before the cut: literal_eval says
    literal = _literal_eval(text)
    if literal is not None or as_json is None:
        return literal
    return _read_cut_repr(as_json)  # ends like a whole repr, but cut after an inner record


def _read_cut_repr(as_json: str) -> tuple[Any, SalvageKind] | None:
    try:
        value, _ended, _end = _partial(as_json, 0, MAX_SALVAGE_DEPTH)
    except _PARSE_ERRORS:
        return None
    return (value, "python_repr_cut") if value else None


def _literal_eval(text: str) -> tuple[Any, SalvageKind] | None:
    """``ast.literal_eval`` of a whole repr (literals only, never code), within the limits."""
    if len(text) > MAX_LITERAL_CHARS or text.count(",") + text.count(":") > MAX_LITERAL_ITEMS:
        return None
    try:
        return ast.literal_eval(text), "python_repr"
    except (SyntaxError, *_PARSE_ERRORS):
        return None


def _simple_repr_as_json(text: str) -> str | None:
    """A plain repr as JSON text, read the way ``ast.literal_eval`` reads it; None if not plain.

    Plain: no ``"``, no backslash and no NUL anywhere, so every ``'`` opens or closes
    a string without escapes (``repr`` writes a string holding ``'`` or a control
    character with ``"`` or a backslash). Between strings (every other piece
    between quotes) ``True``/``False``/``None``/``inf``/``nan`` become their JSON
    words and tuple parentheses brackets; the strings are kept as they are. Anything
    else that is not JSON (a prefix, a name, a comment) makes the JSON decode fail,
    so the caller falls back to ``ast.literal_eval``. A text cut inside a string
    ends in an unterminated string, which the decode stops at. All C-level string
    work; no parse tree.
    """
    if '"' in text or "\\" in text or "\x00" in text:
        return None
    pieces = text.split("'")
    between = "\x00".join(pieces[0::2])
    if not any(token in between for token in _REPR_TOKENS):
        return text.replace("'", '"')  # nothing to change between the strings: one C pass
    between = _REPR_WORDS.sub(_json_word, between).translate(_TUPLE_BRACKETS)
    pieces[0::2] = between.split("\x00")
    return '"'.join(pieces)


# The words as whole words (``\b`` on both sides): the one after is in the pattern, the one
# before is checked by ``_json_word``, because a leading ``\b`` makes ``re`` try every
# position instead of jumping to the words' first letters (about 5x slower here).
_REPR_WORDS = re.compile(r"(?:True|False|None|inf|nan)\b")
_JSON_WORDS = {"True": "true", "False": "false", "None": "null", "inf": "Infinity", "nan": "NaN"}
_TUPLE_BRACKETS = str.maketrans("()", "[]")
_REPR_TOKENS = (*_JSON_WORDS, "(", ")")  # what the two steps above change


def _json_word(match: re.Match[str]) -> str:
    word = match.group()
    start = match.start()
    if start:
        before = match.string[start - 1]
        if before.isalnum() or before == "_":  # ``re``'s word character: no word boundary
            return word  # (no word can start inside this one, so nothing is skipped)
    return _JSON_WORDS[word]


def _looks_like_a_literal(text: str) -> bool:
    """Starts like the repr of a dict or a list: ``{'``, ``{"``, ``[{``, ``['``, ``[(``."""
    probe = text[:16].replace(" ", "").replace("\n", "")
    return probe.startswith(("{'", '{"', "[{", "['", "[("))


# How a container read by ``_partial`` ended.
_CLOSED = 0  # whole: its value is the one ``json`` reads
_BROKEN = 1  # something in it is not JSON (cut short, or text): ``json`` refuses it too
_CAPPED = 2  # read up to ``MAX_SALVAGED_ITEMS`` (``json`` may read it whole)


def _partial(text: str, pos: int, depth: int) -> tuple[Any, int, int]:
    """The container at ``pos`` as far as it is complete: (value, how it ended, the index
    after it when it closed).

    An object keeps every complete key/value pair before the first bad one; a list
    keeps its complete items only, each read whole. While ``depth`` allows, an object's
    value that is itself an object or a list is read the same way, so a cut value
    costs one read, not a failed whole decode and then a partial one. The grammar
    is JSON's, and every other value is read by ``json``'s own scanner, so a
    container that closes is exactly what ``json`` reads, and one that does not is
    one ``json`` refuses; past the cap, a value is read whole by ``json`` if it can.
    """
    if text[pos] == "{":
        obj: dict[str, Any] = {}
        pos = _skip_space(text, pos + 1)
        if text.startswith("}", pos):
            return obj, _CLOSED, pos + 1
        for _pair in range(MAX_SALVAGED_ITEMS):
            if not text.startswith('"', pos):
                return obj, _BROKEN, pos
            try:
                key, pos = _decode(text, pos)
            except ValueError:
                return obj, _BROKEN, pos
            pos = _skip_space(text, pos)
            if not text.startswith(":", pos):
                return obj, _BROKEN, pos
            pos = _skip_space(text, pos + 1)
            if depth > 1 and text.startswith(("{", "["), pos):
                inner, ended, after = _partial(text, pos, depth - 1)
                if ended == _CAPPED:  # whole if json reads it whole, else as far as read
                    try:
                        inner, after = _decode(text, pos)
                    except ValueError:
                        ended = _BROKEN
                    else:
                        ended = _CLOSED
                if ended != _CLOSED:
                    if inner:
                        obj[key] = inner
                    return obj, _BROKEN, pos
                obj[key], pos = inner, after
            else:
                try:
                    obj[key], pos = _decode(text, pos)
                except ValueError:
                    return obj, _BROKEN, pos
            pos = _skip_space(text, pos)
            if text.startswith(",", pos):
                pos = _skip_space(text, pos + 1)
            elif text.startswith("}", pos):
                return obj, _CLOSED, pos + 1
            else:
                return obj, _BROKEN, pos
        return obj, _CAPPED, pos  # the rest is not read: shown as if cut here
    items: list[Any] = []
    pos = _skip_space(text, pos + 1)
    if text.startswith("]", pos):
        return items, _CLOSED, pos + 1
    while len(items) < MAX_SALVAGED_ITEMS:
        try:
            item, pos = _decode(text, pos)
        except ValueError:
            return items, _BROKEN, pos
        items.append(item)
        pos = _skip_space(text, pos)
        if text.startswith(",", pos):
            pos = _skip_space(text, pos + 1)
        elif text.startswith("]", pos):
            return items, _CLOSED, pos + 1
        else:
            return items, _BROKEN, pos
    return items, _CAPPED, pos  # the rest is not read: shown as if cut here
