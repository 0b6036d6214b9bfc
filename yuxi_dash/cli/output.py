"""Plain-text output of the `yuxi-dash` commands: `render_table`, `percent`, `iso`.

A cell reads as `yuxi_dash.wording.plain` writes it, the same as on the dashboard:
None as "-", a bool as yes / no, an int with thousands separators, a float with
one decimal, a list comma-separated, a mapping as "key value, ...", a moment in
UTC to the minute; never a Python repr. Any text is one line, cut at 60
characters. An id is passed as text (`wording.ident`), so it has no separators.
A column whose every value is a number, or number-shaped text ("1595",
"85.0%", "1,234"), is right-aligned. Imports nothing from the CLI, so every
command module can use it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from yuxi_dash.wording import pct, plain

_NUMBER_TEXT = re.compile(r"-?\d[\d,]*(\.\d+)?%?")


def percent(ratio: float | None) -> str:
    """A ratio as every page and command shows it (`yuxi_dash.wording.pct`): "162.3%"."""
    return pct(ratio, missing="-")


def iso(value: Any) -> str | None:
    """A moment as ISO 8601 text for --json; anything else as it is."""
    return value.isoformat() if hasattr(value, "isoformat") else value


def render_table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    """An aligned plain table; numeric columns are right-aligned."""
    cells = [[_cell(value) for value in row] for row in rows]
    widths = [len(header) for header in headers]
    for row in cells:
        for index, value in enumerate(row):
            widths[index] = max(widths[index], len(value))
    numeric = [bool(rows) and all(_is_numeric(row[i]) for row in rows) for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        parts = [
            value.rjust(widths[i]) if numeric[i] else value.ljust(widths[i])
            for i, value in enumerate(values)
        ]
        return "  ".join(parts).rstrip()

    out = [line(headers), line(["-" * width for width in widths])]
    out.extend(line(row) for row in cells)
    return "\n".join(out)


def _is_numeric(value: Any) -> bool:
    if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
        return True
    return isinstance(value, str) and _NUMBER_TEXT.fullmatch(value) is not None


def _cell(value: Any) -> str:
    text = plain(value, missing="-").replace("\n", " ")
    return text if len(text) <= 60 else text[:57] + "..."
