"""Character-safe clipping and compact JSON, shared by the previews.

No cut ever lands inside a character: slicing is by code point and boundaries
step around combining marks, joiners, variation selectors and flag pairs.
``clip_head_tail`` keeps a text's head and tail around ``…``; ``dumps`` is
``json.dumps`` with compact separators and UTF-8 characters kept as they are.
"""

from __future__ import annotations

import json
import math
import unicodedata
from typing import Any

CLIP_MARK = "…"
_ZWJ = "\u200d"


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def dumps(value: Any) -> str:
    """Compact JSON, UTF-8 characters kept as they are (``json.dumps``'s text)."""
    kind = type(value)
    if kind is int or (kind is float and math.isfinite(value)):
        return repr(value)  # json writes exactly an int's or a finite float's repr
    return _ENCODER.encode(value)


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
    """Whether cutting ``text`` at ``index`` would split one visible character."""
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
    """``text`` itself when short enough, else its head (2/3), ``…`` and its tail.

    A cut text always shows the mark: with room for nothing else it is ``…`` alone.
    """
    if len(text) <= max_chars:
        return text
    if max_chars <= 0:
        return ""
    if max_chars <= len(CLIP_MARK):
        return CLIP_MARK  # room for the mark alone
    room = max_chars - len(CLIP_MARK)
    head_chars = (room * 2 + 2) // 3
    tail_chars = room - head_chars
    head = text[: cut_end(text, head_chars)]
    tail = text[cut_start(text, len(text) - tail_chars) :] if tail_chars else ""
    return f"{head}{CLIP_MARK}{tail}"
