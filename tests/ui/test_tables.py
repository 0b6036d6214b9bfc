"""Record tables: every key kept, timestamps in one format, yes/no as words, headers in words."""

from __future__ import annotations

import json

from yuxi_dash.ui.tables import header, record_frame


def test_record_frame_formats_timestamps_and_keeps_every_key() -> None:
    rows = [
        {"name": "Acme", "created_at": "2026-10-20T04:17:45.293480+00:00", "uuid": "u1"},
        {"name": "Bea", "created_at": None, "uuid": "u2", "expired_at": ""},
    ]
    frame = record_frame(rows, ["name", "created_at", "valid_at"])
    assert frame["created_at"].iloc[0] == "2026-10-20 04:17:45 UTC"
    assert frame["created_at"].isna().iloc[1]
    assert list(frame["uuid"]) == ["u1", "u2"]  # not shown, still there
    assert frame["valid_at"].isna().all()  # asked for, absent in every row: an empty column
    assert frame["expired_at"].isna().all()
    assert rows[0]["created_at"].startswith("2026-10-20T04:17:45")  # input untouched


def test_record_frame_of_no_rows_has_the_columns() -> None:
    assert list(record_frame([], ["name", "created_at"]).columns) == ["name", "created_at"]


def test_headers_read_as_words() -> None:
    assert header("created_at") == "Created at"
    assert header("uuid") == "UUID"
    assert header("supported_by_chat") == "In the user's words"
    assert header("fact") == "Fact"


def _draw_episodes() -> None:
    from yuxi_dash.ui.tables import draw_records

    draw_records(
        [
            {"name": "big", "oversized": True, "content_bytes": 70_000},
            {"name": "small", "oversized": False, "content_bytes": 12},
        ],
        ["name", "oversized", "content_bytes"],
    )


def test_a_yes_no_column_reads_as_words_never_as_a_checkbox() -> None:
    """Issue 37 item 14: "Oversized" is text, not a checkbox that looks editable."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_draw_episodes).run()
    assert not at.exception
    table = at.dataframe[0]
    column = json.loads(table.proto.columns)["oversized"]
    assert column["type_config"]["type"] == "text"
    assert list(table.value["oversized"]) == [True, False]  # the values stay booleans
    shown = table.proto.arrow_data.styler.display_values
    assert shown and b"yes" in shown and b"no" in shown
