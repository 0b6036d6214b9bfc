"""`yuxi_dash.validation`: which characters an identifier or a stored text refuses."""

from __future__ import annotations

import unicodedata

import pytest

from yuxi_dash import validation
from yuxi_dash.errors import InvalidInput


def test_refused_characters_are_exactly_unicode_categories_cs_and_cc() -> None:
    for point in range(0x110000):
        char = chr(point)
        category = unicodedata.category(char)
        problem = validation._bad_characters(f"a{char}b", controls=True)
        if char == "\x00":
            assert problem == "must not contain a NUL byte"
        elif category == "Cs":
            assert problem == "must be valid Unicode (no lone surrogates)", hex(point)
        elif category == "Cc":
            assert problem == "must not contain control characters", hex(point)
        else:
            assert problem is None, hex(point)
        if category == "Cc" and char != "\x00":
            assert validation._bad_characters(char, controls=False) is None  # text may hold them


@pytest.mark.parametrize("value", ["t\x07", "t\ud800", "t\x00", "\u0085"])
def test_an_identifier_with_a_refused_character_is_invalid_input(value: str) -> None:
    with pytest.raises(InvalidInput):
        validation.thread_id(value)
