"""Record tables: lists of dicts drawn with readable headers, timestamps and numbers.

The memory views hand back plain records (snake_case keys, ISO timestamps with
microseconds). ``record_frame`` turns them into what a person reads: every key
ending in ``_at`` shown as ``2026-11-19 15:40:07 UTC``, a list as comma-separated
text, no value as "–" (never "None"), every header in words. The frame keeps
every key, so a page can still look up a value it does not show. ``draw_records``
gives counts thousands separators, shows a yes/no column as the words (never a
checkbox, which reads as editable) and lets a page size its columns so a table fits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import pandas as pd
import streamlit as st

from yuxi_dash.ui.page_text import MISSING, literal, plain, stamp

Width = Literal["small", "medium", "large"] | int

# Headers a plain "snake case to words" would get wrong.
_HEADERS = {
    "uuid": "UUID",
    "source_kind": "Source kind",
    "memory_kind": "Memory kind",
    "content_bytes": "Bytes",
    "age_days": "Age (days)",
    "index_path_facts": "Facts via index",
    "label_free_facts": "Facts label-free",
    "user_id": "User",
    "supported_by_chat": "In the user's words",
    "terms_in_chat": "Terms found in chat",
}


def header(key: str) -> str:
    """``created_at`` -> 'Created at'; known abbreviations and terms as written."""
    return _HEADERS.get(key) or key.replace("_", " ").strip().capitalize() or key


def record_frame(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> pd.DataFrame:
    """The rows as a frame with every key kept (and every one of ``columns``, maybe empty).

    ``*_at`` values are formatted as `stamp` writes them, and lists become comma-separated text.
    """
    frame = pd.DataFrame([dict(row) for row in rows])
    for column in columns:
        if column not in frame.columns:
            frame[column] = pd.Series(dtype=object)
    for column in frame.columns:
        if str(column).endswith("_at"):
            frame[column] = [None if _missing(v) else stamp(v) for v in frame[column]]
        elif frame[column].dtype == object:
            frame[column] = [
                plain(v) if isinstance(v, list | tuple | dict) else v for v in frame[column]
            ]
    return frame


def shown_frame(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> pd.DataFrame:
    """`record_frame` as drawn: in the ``columns`` shown, a missing text value reads "–"."""
    frame = record_frame(rows, columns)
    for column in columns:
        values = frame[column]
        if not pd.api.types.is_numeric_dtype(values.dtype) and not _boolean(values):
            frame[column] = [MISSING if _missing(v) else v for v in values]
    return frame


def _missing(value: Any) -> bool:
    return value is None or value == "" or (isinstance(value, float) and pd.isna(value))


def _boolean(values: pd.Series) -> bool:
    present = [v for v in values if not _missing(v)]
    return bool(present) and all(isinstance(v, bool) for v in present)


def _column(frame: pd.DataFrame, column: str, help_text: str | None, width: Width | None) -> Any:
    """A column config: counts with separators (ids excepted), decimals to one place."""
    label = header(column)
    dtype = frame[column].dtype
    if pd.api.types.is_bool_dtype(dtype) or _boolean(frame[column]):  # "yes"/"no" (`_yes_no`)
        return st.column_config.TextColumn(
            label, help=literal(help_text) if help_text else None, width=width
        )
    if pd.api.types.is_integer_dtype(dtype):
        shape = "%d" if column in _ID_COLUMNS else "localized"
        return st.column_config.NumberColumn(
            label, help=literal(help_text) if help_text else None, width=width, format=shape
        )
    if pd.api.types.is_float_dtype(dtype):
        return st.column_config.NumberColumn(
            label, help=literal(help_text) if help_text else None, width=width, format="%.1f"
        )
    return st.column_config.TextColumn(
        label, help=literal(help_text) if help_text else None, width=width
    )


_ID_COLUMNS = frozenset({"id", "version", "sequence", "index"})


def _yes_no(value: Any) -> str:
    """A yes/no cell as words, never a checkbox: "yes", "no", or "–" for no value."""
    return MISSING if _missing(value) else "yes" if value else "no"


def draw_records(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str] | None = None,
    *,
    helps: Mapping[str, str] | None = None,
    widths: Mapping[str, Width] | None = None,
) -> None:
    """A full-width table of ``rows`` showing ``columns`` (default: the rows' keys) in order.

    ``widths`` sizes columns ("small", "medium", "large" or pixels) so that the columns
    an operator needs stay on screen.
    """
    if columns is None:
        columns = list(rows[0]) if rows else []
    helps = helps or {}
    widths = widths or {}
    frame = shown_frame(rows, columns)
    flags = [c for c in columns if pd.api.types.is_bool_dtype(frame[c].dtype) or _boolean(frame[c])]
    st.dataframe(  # the values stay booleans; the browser shows the words
        frame.style.format(_yes_no, subset=flags) if flags else frame,
        column_order=list(columns),
        column_config={
            column: _column(frame, column, helps.get(column), widths.get(column))
            for column in columns
        },
        hide_index=True,
        width="stretch",
    )
