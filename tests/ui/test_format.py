"""One-line wording and parsing helpers (yuxi_dash.ui.page_text)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

from markdown_it import MarkdownIt

from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.compression import parse_saved_result
from yuxi_dash.errors import Forbidden, StaleState, ThreadBusy
from yuxi_dash.ui.compressibility import (
    blocked_kind,
    cannot_compress_line,
    compress_blocker,
    hidden_line,
)
from yuxi_dash.ui.messages import chat_line, indented_json
from yuxi_dash.ui.page_text import (
    ago,
    clip,
    crossing_text,
    error_line,
    markdown_literal,
    outcome_line,
    pct,
    stamp,
    structured_records,
    threshold_room_text,
    tokens,
    tokens_to_threshold,
)

OPERATOR = Actor(id="op@example.com", role=Role.OPERATOR)
VIEWER = Actor(id="v@example.com", role=Role.VIEWER)
IDLE = {"status": "active", "capable": True, "busy_reason": None, "agent_slug": "a"}


def test_numbers() -> None:
    assert pct(0.8734) == "87.3%"
    assert pct(None) == "–"
    assert tokens(102400) == "102,400"
    assert tokens_to_threshold(90_000, 102_400) == 12_400
    assert tokens_to_threshold(110_000, 102_400) == -7_600
    assert threshold_room_text(90_000, 102_400) == "12,400 left"
    assert threshold_room_text(110_000, 102_400) == "over by 7,600"
    assert threshold_room_text(102_400, 102_400) == "0 left"


def test_ago() -> None:
    now = datetime(2026, 1, 2, tzinfo=UTC)
    assert ago(None) == "never"
    assert ago(now - timedelta(seconds=5), now=now) == "just now"
    assert ago(now - timedelta(minutes=5), now=now) == "5 min ago"
    assert ago(now - timedelta(hours=3), now=now) == "3 h ago"
    assert ago(now - timedelta(days=2), now=now) == "2 d ago"


def test_compress_blocker_says_why_the_button_is_disabled() -> None:
    assert compress_blocker(IDLE, OPERATOR) is None
    assert "operator role" in (compress_blocker(IDLE, VIEWER) or "")
    assert "busy (queued)" in (compress_blocker({**IDLE, "busy_reason": "queued"}, OPERATOR) or "")
    assert "does not support" in (compress_blocker({**IDLE, "capable": False}, OPERATOR) or "")
    assert "deleted" in (compress_blocker({**IDLE, "status": "deleted"}, OPERATOR) or "")
    assert compress_blocker({**IDLE, "busy_reason": float("nan")}, OPERATOR) is None  # from pandas


def test_error_and_outcome_lines_are_single_lines() -> None:
    busy = error_line(ThreadBusy("thread t1 is busy (running)"), thread_id="t1")
    assert busy == "t1: Busy — thread t1 is busy (running) [thread_busy]"
    assert "Stale" in error_line(StaleState("moved"))
    assert "Not allowed" in error_line(Forbidden("no"))
    assert "RuntimeError" in error_line(RuntimeError("secret detail"))
    assert "secret detail" not in error_line(RuntimeError("secret detail"))
    done = outcome_line(
        "t1",
        {
            "status": "completed",
            "before_tokens": 120000,
            "after_tokens": 3000,
            "compressed_messages": 40,
            "file_path": "outputs/conversation_history/session_t1.md",
        },
    )
    assert done == (
        "t1: compressed 40 messages, 120,000 → 3,000 tokens; "
        "history in outputs/conversation_history/session_t1.md"
    )
    noop = outcome_line(
        "t1", {"status": "no_op", "reason": "insufficient_history", "before_tokens": 5}
    )
    assert "insufficient_history" in noop and "\n" not in noop


def test_saved_result_and_structured_records() -> None:
    preview = json.dumps(
        {
            "kind": "knowledge_base",
            "result_count": 12,
            "query": "refunds",
            "results": [{"id": "c1", "title": "Refunds", "metadata": {"chunk_index": 3}}],
            "omitted_results": 11,
        }
    )
    text = (
        "[Tool result saved]\nTool: query_kb\nApprox tokens: 900\nSHA-256: " + "a" * 64 + "\n"
        "Full output path: outputs/large_tool_results/query_kb-aaaa.txt\n\nOutput preview:\n"
        + preview
        + "\n[Truncated 3000 chars. Read the full output from the saved file.]"
    )
    parts = parse_saved_result(text)
    assert parts is not None
    assert parts.tool == "query_kb"
    assert parts.preview == preview
    assert parts.note.startswith("[Truncated 3000 chars")
    records = structured_records(parts.preview)
    assert records is not None
    assert records["records"] == [{"id": "c1", "title": "Refunds", "metadata.chunk_index": 3}]
    assert (records["result_count"], records["omitted_results"]) == (12, 11)
    assert parse_saved_result("plain tool output") is None
    assert structured_records("[HEAD]\nnot json") is None


def test_markdown_literal_shows_a_users_words_as_written() -> None:
    """Rendered as CommonMark (as Streamlit does): no image, link, HTML or heading survives."""
    hostile = (
        "# Title ![x](https://evil.example/p.png) [click](javascript:alert(1)) "
        "<img src=x onerror=alert(1)> https://evil.example `code` *em* $x^2$ 1. item \\ end"
    )
    html = MarkdownIt("commonmark").render(markdown_literal(hostile))
    for tag in ("<img", "<a ", "<h1", "<code", "<em", "<ol"):
        assert tag not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html  # shown, as text
    assert "![x](https" in html and "$x^2$" in html and "\\ end" in html
    assert "one<br />\ntwo" in MarkdownIt("commonmark").render(markdown_literal("one\ntwo"))


def test_stamp_and_clip() -> None:
    moment = datetime(2026, 11, 19, 15, 40, 15, 227046, tzinfo=UTC)
    assert stamp(moment) == "2026-11-19 15:40:15 UTC"
    assert stamp("2026-11-19 15:40:15.227046+00:00") == "2026-11-19 15:40:15 UTC"
    eastern = datetime(2026, 11, 19, 10, 40, tzinfo=timezone(timedelta(hours=-5)))
    assert stamp(eastern) == "2026-11-19 15:40:00 UTC"
    assert stamp(datetime(2026, 11, 19, 15, 40)) == "2026-11-19 15:40:00 UTC"  # naive is UTC
    assert stamp("yesterday") == "yesterday" and stamp(None) == "–"
    assert clip("abcdef", 6) == "abcdef" and clip("abcdefg", 6) == "abcde…"


def test_crossing_text_says_turns_and_time_or_that_it_cannot_tell() -> None:
    assert crossing_text(None, None) == "–" and crossing_text(float("nan"), None) == "–"
    assert crossing_text(0, 0) == "now"
    assert crossing_text(1, 30) == "1 turn, ~1 min"
    assert crossing_text(3, 2_400) == "3 turns, ~40 min"
    assert crossing_text(10, 36_000) == "10 turns, ~10 h"
    assert crossing_text(4, None) == "4 turns"
    assert crossing_text(4, 0) == "4 turns, due now"  # idle past its pace: the turns stay


def test_blocked_kinds_count_only_what_really_cannot_be_compressed_here() -> None:
    """Issue 37 item 8: an attached thread with the platform endpoint set can be compressed."""
    attached = {**IDLE, "attached": True, "platform_blocker": None, "compress_route": "platform"}
    assert blocked_kind(IDLE) is None
    assert blocked_kind({**IDLE, "capable": False}) == "unsupported"
    assert blocked_kind({**IDLE, "busy_reason": "queued"}) == "busy"
    assert blocked_kind({**IDLE, "status": "deleted"}) == "deleted"
    assert blocked_kind({**attached, "compress_route": "none"}) == "no_endpoint"
    assert blocked_kind(attached) is None
    refused = {**attached, "platform_blocker": "the platform said agent a does not support it"}
    assert blocked_kind(refused) == "unsupported"
    line = hidden_line({"unsupported": 25, "no_endpoint": 2, "busy": 3})
    assert line is not None and line.startswith(
        "30 threads that cannot be compressed now are hidden: 27 cannot be compressed here "
        "(2 attached with no platform endpoint: set YUXI_DASH_PLATFORM_URL) "
        "and 3 are busy (running, queued or interrupted)."
    )
    assert hidden_line({}) is None
    assert (hidden_line({}, role_blocked=4) or "").startswith("4 threads that cannot be")
    assert cannot_compress_line(0, {}) is None
    assert cannot_compress_line(2, {"attached: p": 1}, 1) == (
        "4 of these threads cannot be compressed here: 2 because their agent does not support "
        "context compression; 1 attached: p (its platform compresses them); 1 deleted."
    )


def test_the_chat_record_reads_tool_calls_and_json_results_as_words() -> None:
    """Issue 37 item 9: no raw JSON in the chat record's cells."""
    calls = 'calls run_command {"command": "pytest -q"}\ncalls write_file {}'
    assert chat_line("assistant", calls) == (
        "calls run_command — command: pytest -q\ncalls write_file — no arguments"
    )
    kb = json.dumps(
        {"query": "refunds", "results": [{"id": "c1", "title": "Refund policy", "score": 0.91}]}
    )
    assert chat_line("tool", kb) == "1 result for “refunds”: Refund policy"
    assert chat_line("tool", '{"rows": 3, "ok": true}') == "rows: 3 · ok: yes"
    assert chat_line("tool", "$ ls\nREADME") == "$ ls\nREADME"  # not JSON: as written
    assert chat_line("user", 'calls me {"maybe": 1}') == 'calls me {"maybe": 1}'  # a user's words
    assert indented_json('{"a": [1]}') == '{\n  "a": [\n    1\n  ]\n}'
    assert indented_json("[1, 2") is None and indented_json("plain") is None
