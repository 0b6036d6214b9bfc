"""Character-safe clipping and compact JSON, shared by the preview rules.

No cut ever lands inside a character: slicing is by code point and boundaries
step around combining marks, joiners, variation selectors and flag pairs.
``_dumps`` writes the same text as ``json.dumps(..., ensure_ascii=False,
separators=(",", ":"))`` with json's C encoder built once. A ``_RecordPiece`` is
one record's JSON with its body clipped head…tail to an allowance;
``_grow_bodies`` hands spare characters to bodies. A body is a ``str``, or a
``RawBody``: its JSON string literal, decoded only as far as it is shown.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable
from typing import Any

from yuxi_dash.compression.salvage import decode_json_value

CLIP_MARK = "…"
MIN_BODY_CHARS = 32  # a listed record shows at least this much body (head…tail)
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
    # Fast path: nothing below U+0300, no CJK ideograph and no Hangul syllable continues one.
    char = text[index]
    if (char < "\u0300" or "\u3400" <= char <= "\u9fff" or "\uac00" <= char <= "\ud7a3") and (
        text[index - 1] != _ZWJ
    ):
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
    return _clip_ends(text, text, max_chars)


def _clip_ends(starts: str, ends: str, max_chars: int) -> str:
    """Head of ``starts``, ``…``, tail of ``ends``: a text longer than ``max_chars`` clipped.

    ``starts`` begins as the text does and ``ends`` ends as it does (both the text
    itself, or its two ends when only they were decoded: ``RawBody``).
    """
    if max_chars <= len(CLIP_MARK):
        return ""
    room = max_chars - len(CLIP_MARK)
    head_chars = (room * 2 + 2) // 3
    tail_chars = room - head_chars
    head = starts[: cut_end(starts, head_chars)]
    tail = ends[cut_start(ends, len(ends) - tail_chars) :] if tail_chars else ""
    return f"{head}{CLIP_MARK}{tail}"


# -- bodies decoded as far as they are shown ---------------------------------------
_CONTINUATION = range(0x80, 0xC0)  # UTF-8 bytes that do not start a character
_BACKSLASH = 0x5C


_HIGH_SURROGATES = (b"d8", b"d9", b"da", b"db")
_LOW_SURROGATES = (b"dc", b"dd", b"de", b"df")


def _opens_escape(inner: bytes, at: int) -> bool:
    """Whether the backslash at ``inner[at]`` opens an escape (not the second of ``\\\\``)."""
    run = 1  # backslashes ending at ``at``: odd means the last one opens an escape
    while at - run >= 0 and inner[at - run] == _BACKSLASH:
        run += 1
    return run % 2 == 1


def _surrogate_escape(inner: bytes, at: int, halves: tuple[bytes, ...]) -> bool:
    return (
        at >= 0
        and inner[at : at + 2] == b"\\u"
        and inner[at + 2 : at + 4].lower() in halves
        and _opens_escape(inner, at)
    )


def _escape_reach(inner: bytes, at: int) -> int:
    """Where the escape opening at ``inner[at]`` ends: a surrogate pair is one escape."""
    if inner[at + 1 : at + 2] != b"u":
        return at + 2
    if inner[at + 2 : at + 4].lower() in _HIGH_SURROGATES and _surrogate_escape(
        inner, at + 6, _LOW_SURROGATES
    ):
        return at + 12
    return at + 6


def _escape_around(inner: bytes, index: int) -> tuple[int, int] | None:
    """(start, end) of the escape ``index`` falls strictly inside, or None."""
    start = inner.rfind(b"\\", max(0, index - 11), index)
    if start == -1 or not _opens_escape(inner, start):
        return None  # no escape, or the escaped half of "\\\\", which ends before index
    if _surrogate_escape(inner, start, _LOW_SURROGATES) and _surrogate_escape(
        inner, start - 6, _HIGH_SURROGATES
    ):
        start -= 6  # the second half of a pair: the escape opens 6 bytes earlier
    end = _escape_reach(inner, start)
    return (start, end) if start < index < end else None


def _cut_before(inner: bytes, index: int) -> int:
    """The largest index ≤ ``index`` that starts a character of the JSON string ``inner``."""
    if index >= len(inner):
        return len(inner)
    while index > 0 and inner[index] in _CONTINUATION:
        index -= 1
    inside = _escape_around(inner, index)
    return index if inside is None else inside[0]


def _cut_after(inner: bytes, index: int) -> int:
    """The smallest index ≥ ``index`` that starts a character of the JSON string ``inner``."""
    while index < len(inner) and inner[index] in _CONTINUATION:
        index += 1
    inside = _escape_around(inner, index)
    return index if inside is None else inside[1]


class RawBody:
    """A record's body as its JSON string literal (bytes ``"…"``): decoded only as far as shown.

    ``yuxi_dash.compression.records`` keeps the bodies it reads this way, so a
    preview decodes just the bodies it gives room to. The literal was read by
    msgspec (escapes and control characters checked, not its UTF-8: a lone
    surrogate is read by ``json``, see ``salvage.decode_json_value``). Short bodies are
    decoded whole. A long one
    (no ``\\u`` escape and over 4 bytes for each of ``window`` characters: so
    over ``window`` characters) is decoded at its two ends only, ``window``
    characters each at least: every cut ``clip_head_tail`` makes for an
    allowance under ``window - 1`` reads nothing else, so its clip is the same.
    """

    __slots__ = ("ends", "length", "raw", "starts", "text", "window")

    def __init__(self, raw: bytes, window: int) -> None:
        self.raw = raw  # the literal, quotes included
        self.window = window
        self.text: str | None = None  # the whole body, when decoded whole
        self.starts = self.ends = ""  # its two ends, when only they are decoded
        self.length = -1  # characters; for a long body a lower bound (over ``window``)

    def is_blank(self) -> bool:
        """Whether the body is empty or only whitespace, deciding from its start where it can."""
        raw = self.raw
        if len(raw) <= 2:
            return True
        first = raw[1]
        if 0x20 < first < 0x7F and first != _BACKSLASH:  # a visible ASCII character
            return False
        inner = raw[1:-1]
        try:
            start = decode_json_value(b'"' + inner[: _cut_before(inner, 64)] + b'"')  # 50+ bytes
        except ValueError:  # not cut where it decodes (an escaped lone surrogate): read it all
            return self._whole().isspace()
        return start.isspace() and self._whole().isspace()

    def chars(self) -> int:
        if self.length < 0:
            self._decode()
        return self.length

    def clip(self, max_chars: int) -> str:
        """``clip_head_tail`` of the body."""
        if self.length < 0:
            self._decode()
        if self.text is not None:
            return clip_head_tail(self.text, max_chars)
        if max_chars >= self.window - 1:  # beyond what the ends hold: not reached by a preview
            return clip_head_tail(self._whole(), max_chars)
        return _clip_ends(self.starts, self.ends, max_chars)

    def _whole(self) -> str:
        if self.text is None:
            self.text = decode_json_value(self.raw)
            self.length = len(self.text)
        return self.text

    def _decode(self) -> None:
        inner = self.raw[1:-1]
        reach = 4 * self.window + 16  # bytes holding window + 3 characters at least
        if len(inner) <= 2 * reach or b"\\u" in inner:
            self._whole()
            return
        try:
            starts = decode_json_value(b'"' + inner[: _cut_before(inner, reach)] + b'"')
            ends = decode_json_value(b'"' + inner[_cut_after(inner, len(inner) - reach) :] + b'"')
        except ValueError:  # not cut where it decodes: read it whole
            self._whole()
            return
        if _is_regional_indicator(ends[0]):  # a flag run may reach back past this end
            self._whole()
            return
        self.starts, self.ends = starts, ends
        self.length = len(inner) // 4  # at most 4 bytes a character: over window characters


def body_chars(body: str | RawBody) -> int:
    return len(body) if isinstance(body, str) else body.chars()


def clip_body(body: str | RawBody, max_chars: int) -> str:
    return clip_head_tail(body, max_chars) if isinstance(body, str) else body.clip(max_chars)


# -- compact JSON ----------------------------------------------------------------
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
    return encode


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


# -- records with clipped bodies -------------------------------------------------
class _RecordPiece:
    """One record's JSON: its fields without the body, plus a body clipped to an allowance."""

    __slots__ = ("allowance", "bare", "body", "body_key", "prefix", "text")

    def __init__(self, bare: str, body_key: str | None, body: str | RawBody) -> None:
        self.bare = self.text = bare  # the record's JSON without its body
        self.body = body
        self.body_key = body_key
        self.prefix: str | None = None  # the record up to its body's value, built when needed
        self.allowance = 0

    def render(self, allowance: int) -> str:
        if self.body_key is None or allowance <= 0:
            return self.bare
        return self._prefix() + _encode_string(clip_body(self.body, allowance)) + "}"

    def _prefix(self) -> str:
        """The record up to its body's value: ``{fields,"content":``."""
        if self.prefix is None:
            comma = "," if len(self.bare) > 2 else ""
            self.prefix = self.bare[:-1] + comma + _encode_string(self.body_key or "") + ":"
        return self.prefix

    def empty_body_chars(self) -> int:
        """What an empty body adds to the bare record: its key, colon, comma and quotes."""
        return len(self._prefix()) + len('""}') - len(self.bare)

    def set(self, allowance: int) -> None:
        self.allowance = allowance
        self.text = self.render(allowance)


def _grow_bodies(shown: list[_RecordPiece], spare: int, *, fresh: bool) -> None:
    """Hand ``spare`` characters to the bodies of ``shown``, evenly, until whole or spent.

    ``fresh``: the records carry no body yet. A body shorter than ``MIN_BODY_CHARS``
    says little, so then only as many bodies as can reach that length get one,
    leading records first.
    """
    growing = shown
    if fresh:
        with_body = [piece for piece in shown if piece.body_key is not None]
        growing = with_body[: max(0, spare) // (MIN_BODY_CHARS + _BODY_KEY_CHARS)]
    for _ in range(4):
        growable = [piece for piece in growing if piece.allowance < body_chars(piece.body)]
        if spare <= 0 or not growable:
            break
        share = spare // len(growable)
        if share <= 0:
            break
        for piece in growable:
            target = piece.allowance + share
            floor = piece.allowance
            if fresh and not floor:
                # A new body also costs its key and quotes, and is useful from MIN_BODY_CHARS.
                target -= piece.empty_body_chars()
                floor = min(MIN_BODY_CHARS, body_chars(piece.body)) - 1
            allowance = min(body_chars(piece.body), target)
            while allowance > floor:
                text = piece.render(allowance)
                growth = len(text) - len(piece.text)
                if growth <= spare:
                    piece.allowance, piece.text = allowance, text
                    spare -= growth
                    break
                allowance -= growth - spare  # escaping made it longer than its characters
