"""Record tables: every key kept, timestamps to the minute, headers in words."""

from __future__ import annotations

from yuxi_dash.ui.tables import header, record_frame


def test_record_frame_formats_timestamps_and_keeps_every_key() -> None:
    rows = [
        {"name": "Acme", "created_at": "2026-10-20T04:17:45.293480+00:00", "uuid": "u1"},
        {"name": "Bea", "created_at": None, "uuid": "u2", "expired_at": ""},
    ]
    frame = record_frame(rows, ["name", "created_at", "valid_at"])
    assert frame["created_at"].iloc[0] == "2026-10-20 04:17 UTC"
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
