"""Record tables: lists of dicts drawn with readable headers and timestamps to the minute.

The memory views hand back plain records (snake_case keys, ISO timestamps with
microseconds). ``record_frame`` turns them into what a person reads: every key
ending in ``_at`` shown as ``2026-11-19 15:40 UTC``, every header in words. The
frame keeps every key, so a page can still look up a value it does not show.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import streamlit as st

from yuxi_dash.ui.format import stamp

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
    """The rows as a frame with every key kept; ``*_at`` values formatted to the minute."""
    frame = pd.DataFrame([dict(row) for row in rows])
    for column in columns:
        if column not in frame.columns:
            frame[column] = pd.Series(dtype=object)
    for column in frame.columns:
        if str(column).endswith("_at"):
            frame[column] = [None if _missing(v) else stamp(v) for v in frame[column]]
    return frame


def _missing(value: Any) -> bool:
    return value is None or value == "" or (isinstance(value, float) and pd.isna(value))


def draw_records(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str] | None = None,
    *,
    helps: Mapping[str, str] | None = None,
) -> None:
    """A full-width table of ``rows`` showing ``columns`` (default: the rows' keys) in order."""
    if columns is None:
        columns = list(rows[0]) if rows else []
    helps = helps or {}
    st.dataframe(
        record_frame(rows, columns),
        column_order=list(columns),
        column_config={
            column: st.column_config.Column(header(column), help=helps.get(column))
            for column in columns
        },
        hide_index=True,
        width="stretch",
    )
