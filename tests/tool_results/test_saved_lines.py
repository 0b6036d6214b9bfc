"""A recoverable evidence item opened at its line (`tool_results.saved_lines`): the file the
compression record names, read without following links, checked, and audited either way."""

from __future__ import annotations

import os

import pytest

from tests.service.builders import OPERATOR, VIEWER
from tests.ui.compressed_thread import GONE_PATH, HISTORY_ONLY, compressed_thread, item_index
from yuxi_dash.errors import InvalidInput, NotFound, PathRefused
from yuxi_dash.files.workdir import Workdir
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.queries import list_audit
from yuxi_dash.tool_results.saved_lines import (
    LINE_CHARS,
    READ_LINES_ACTION,
    line_window,
    open_saved_line,
)


def _audit(compression_id: int) -> list[tuple[str, dict]]:
    with session_scope() as session:
        rows = list_audit(session, action=READ_LINES_ACTION, target=f"compression:{compression_id}")
    return [(row.outcome, row.detail) for row in rows]


def test_an_item_only_the_history_keeps_opens_at_its_line(db_url: str) -> None:
    result, record = compressed_thread()
    index = item_index(record, HISTORY_ONLY)
    item = record["ledger"]["items"][index]
    assert item["state"] == "recoverable" and item["file"] == result.file_path
    found = open_saved_line(record["id"], index, actor=VIEWER, context=3)
    history = Workdir(get_settings().workdir).read_text(result.file_path).split("\n")
    assert found.path == result.file_path and found.line == item["line"]
    assert found.lines[found.line - found.first_line] == history[item["line"] - 1]
    assert HISTORY_ONLY in found.lines[found.line - found.first_line]
    assert found.first_line == max(1, item["line"] - 3) and len(found.lines) <= 7
    assert found.total_lines == len(history)
    assert (found.check, found.checked_against) == ("ok", "history")
    [(outcome, detail)] = _audit(record["id"])
    assert outcome == "ok" and detail["path"] == result.file_path
    assert detail["line"] == item["line"] and detail["check"] == "ok"


def test_a_record_in_a_one_line_tool_result_shows_the_part_of_the_line_around_it(
    db_url: str,
) -> None:
    _result, record = compressed_thread()
    index = item_index(record, "chunk-17")
    item = record["ledger"]["items"][index]
    assert item["state"] == "recoverable" and item["line"] == 1
    assert item["file"].startswith("outputs/large_tool_results/query_kb-")
    found = open_saved_line(record["id"], index, actor=VIEWER)
    own = found.lines[0]
    assert '"chunk-17"' in own and len(own) == LINE_CHARS < found.line_chars
    assert found.line_offset > 0 and (found.check, found.checked_against) == ("ok", "tool result")


def test_a_changed_file_says_so(db_url: str) -> None:
    _result, record = compressed_thread()
    index = item_index(record, "chunk-17")
    path = get_settings().workdir / record["ledger"]["items"][index]["file"]
    path.write_text(path.read_text().replace("Body", "body"))
    assert open_saved_line(record["id"], index, actor=VIEWER).check == "mismatch"


def test_refusals_are_typed_and_audited(db_url: str) -> None:
    _result, record = compressed_thread()
    lost = item_index(record, GONE_PATH)
    assert record["ledger"]["items"][lost]["state"] == "lost"
    with pytest.raises(InvalidInput):
        open_saved_line(record["id"], lost, actor=VIEWER)
    with pytest.raises(NotFound):
        open_saved_line(record["id"], 10_000, actor=VIEWER)
    with pytest.raises(NotFound):
        open_saved_line(10**12, 0, actor=VIEWER)
    with pytest.raises(InvalidInput):
        open_saved_line(record["id"], -1, actor=VIEWER)
    refused = _audit(record["id"])
    assert [outcome for outcome, _ in refused] == ["refused"] * 3
    assert {detail["code"] for _, detail in refused} == {"invalid_input", "not_found"}
    assert _audit(10**12)[0][1]["code"] == "not_found"


def test_a_link_in_place_of_the_file_is_refused_and_a_gone_file_is_not_found(
    db_url: str, tmp_path: os.PathLike[str]
) -> None:
    result, record = compressed_thread()
    index = item_index(record, HISTORY_ONLY)
    history = get_settings().workdir / result.file_path
    outside = os.path.join(tmp_path, "outside.md")
    os.replace(history, outside)
    with pytest.raises(NotFound):
        open_saved_line(record["id"], index, actor=OPERATOR)
    os.symlink(outside, history)
    with pytest.raises(PathRefused):
        open_saved_line(record["id"], index, actor=OPERATOR)
    codes = [detail["code"] for outcome, detail in _audit(record["id"]) if outcome == "refused"]
    assert sorted(codes) == ["not_found", "path_refused"]


def test_the_window_keeps_the_value_in_view() -> None:
    line = "x" * 5000 + "needle" + "y" * 5000
    start, text = line_window(line, "needle", 300)
    assert "needle" in text and len(text) == 300 and line[start : start + 300] == text
    assert line_window("short", "needle") == (0, "short")
    assert line_window("z" * 500, "absent", 100) == (0, "z" * 100)
    escaped = '{"q": "say \\"hi\\""}' + "p" * 400
    assert '\\"hi\\"' in line_window(escaped, 'say "hi"', 50)[1]
