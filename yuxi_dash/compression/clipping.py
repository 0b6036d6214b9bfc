"""Character-safe clipping and compact JSON, shared by the preview rules.

No cut ever lands inside a character: slicing is by code point and boundaries
step around combining marks, joiners, variation selectors and flag pairs.
``_dumps`` writes the same text as ``json.dumps(..., ensure_ascii=False,
separators=(",", ":"))`` with json's C encoder built once. A ``_RecordPiece`` is
one record's JSON with its body clipped head…tail to an allowance;
``_grow_bodies`` hands spare characters to bodies.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable
from typing import Any

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
    if max_chars <= len(CLIP_MARK):
        return ""
    room = max_chars - len(CLIP_MARK)
    head_chars = (room * 2 + 2) // 3
    tail_chars = room - head_chars
    head = text[: cut_end(text, head_chars)]
    tail = text[cut_start(text, len(text) - tail_chars) :] if tail_chars else ""
    return f"{head}{CLIP_MARK}{tail}"


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

    def __init__(self, bare: str, body_key: str | None, body: str) -> None:
        self.bare = self.text = bare  # the record's JSON without its body
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
        growable = [piece for piece in growing if piece.allowance < len(piece.body)]
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
