"""`yuxi-dash compressions` (yuxi_dash.cli.context), in-process, on SQLite and PostgreSQL.

Records come from a real manual compress of a thread whose assistant cites its evidence,
or are written as the writers write them (`tests.store.compression_builders`).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from tests.service.builders import OPERATOR, seed_thread
from tests.store.compression_builders import cited_thread, item, put_record, put_thread_row
from yuxi_dash import sources
from yuxi_dash.access.audit import wait_for_pending_audit
from yuxi_dash.cli import main
from yuxi_dash.settings import get_settings
from yuxi_dash.store.compressions import list_compressions
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AuditEntry

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def run_text(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def refusals() -> list[tuple[str, str, str, str]]:
    wait_for_pending_audit()
    with session_scope() as session:
        rows = session.execute(
            sa.select(AuditEntry.action, AuditEntry.target, AuditEntry.outcome, AuditEntry.detail)
            .where(AuditEntry.action == "cli.compressions")
            .order_by(AuditEntry.id)
        ).all()
    return [(a, t, o, d["code"]) for a, t, o, d in rows]


def test_a_real_compress_is_listed_with_its_summary_and_ledger(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_thread(messages=cited_thread(), keep_messages=4)
    result = sources.compress_thread_context("t1", actor=OPERATOR)
    assert result.status == "completed"
    code, data, err = run(capsys, "compressions", "t1")
    assert code == 0 and err == ""
    assert data["thread_id"] == "t1" and data["total"] == 1
    [record] = data["compressions"]
    assert (record["trigger"], record["actor"], record["origin"]) == ("manual", OPERATOR.id, "own")
    assert (record["before_tokens"], record["after_tokens"]) == (
        result.before_tokens,
        result.after_tokens,
    )
    assert record["compressed_messages"] == result.compressed_messages
    assert record["summary"] and record["history_file"] == result.file_path
    datetime.fromisoformat(record["at"])  # ISO 8601
    items = record["ledger"]["items"]
    assert items and {"kind", "value", "state", "cited", "file", "line"} <= set(items[0])
    for entry in items:
        assert entry["state"] in ("visible", "recoverable", "lost")
        if entry["state"] == "recoverable":
            assert entry["file"] and entry["line"] >= 1
    assert any(entry["cited"] for entry in items)
    with session_scope() as session:  # the same read the API answers with
        [view] = list_compressions(session, "t1")
    assert record["ledger"] == view.ledger and record["id"] == view.id

    code, text, _ = run_text(capsys, "compressions", "t1")
    assert code == 0
    cited = record["ledger"]["cited"]
    assert f"manual by {OPERATOR.id} (own, agent agent-a)" in text
    assert f"tokens {result.before_tokens:,} -> {result.after_tokens:,}" in text
    assert f"{result.compressed_messages:,} messages summarized" in text
    total = sum(cited.values())
    assert f"cited kept in view: {cited['visible']:,} of {total:,}" in text
    assert text.rstrip().endswith("1 of 1 compressions of thread t1, newest first")


def test_newest_first_paged_cited_first_with_file_and_line(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    put_record("t1", T0, [item("old-1", "lost")])
    put_record(
        "t1",
        T0 + timedelta(hours=1),
        [
            item("seen", "visible", cited=True),
            item("plain-rec", "recoverable", file="outputs/a.md", line=7),
            item("cited-rec", "recoverable", cited=True, file="outputs/b.md", line=42),
            item("gone", "lost", kind="web_result"),
            item("cited-gone", "lost", cited=True),
        ],
        trigger="manual",
        actor="ops@example.com",
    )
    code, data, _ = run(capsys, "compressions", "t1", "--limit", "1")
    assert code == 0 and data["total"] == 2
    [newest] = data["compressions"]
    assert newest["ledger"]["cited"] == {"visible": 1, "recoverable": 1, "lost": 1}
    code, text, _ = run_text(capsys, "compressions", "t1", "--limit", "1")
    lines = text.splitlines()
    assert lines[0].startswith("2026-12-01 10:00:00 UTC  manual by ops@example.com")
    assert "  evidence: 1 visible, 2 recoverable, 2 lost" in lines
    assert "  cited kept in view: 1 of 3 (1 recoverable, 1 lost)" in lines
    start = lines.index("  recoverable (2):")
    assert lines[start + 1 : start + 3] == [
        "    cited kb_record cited-rec  outputs/b.md:42",  # cited first
        "    kb_record plain-rec  outputs/a.md:7",
    ]
    start = lines.index("  lost (2):")
    assert lines[start + 1 : start + 3] == ["    cited kb_record cited-gone", "    web_result gone"]
    assert lines[-1] == "1 of 2 compressions of thread t1, newest first; --offset 1 for more"
    code, data, _ = run(capsys, "compressions", "t1", "--offset", "1")
    assert [r["ledger"]["items"][0]["value"] for r in data["compressions"]] == ["old-1"]


def test_every_outside_string_is_escaped(db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    hostile = "evil\x1b[2J\u202e"
    put_record(
        "t1",
        T0,
        [item(f"id-{hostile}", "recoverable", file=f"outputs/{hostile}\n.md", line=3)],
        agent=f"agent-{hostile}",
        actor=f"actor-{hostile}",
    )
    code, text, _ = run_text(capsys, "compressions")  # every thread: the thread id is shown
    assert code == 0
    assert "\x1b" not in text and "\u202e" not in text
    assert "agent-evil\\x1b[2J\\u202e" in text and "actor-evil\\x1b[2J\\u202e" in text
    assert "kb_record id-evil\\x1b[2J\\u202e  outputs/evil\\x1b[2J\\u202e\\n.md:3" in text
    assert "(thread t1, own, agent" in text


@pytest.mark.parametrize(
    ("thread", "code", "error"),
    [
        ("t" * 300, 2, "invalid_input"),
        ("bad\x00id", 2, "invalid_input"),
        (" ", 2, "invalid_input"),
        ("nope", 3, "thread_not_found"),
        ("gone", 3, "thread_deleted"),
    ],
    ids=["too-long", "nul", "blank", "unknown", "deleted"],
)
def test_bad_input_and_unknown_threads_are_one_typed_error_and_one_audit_row(
    db_url: str, capsys: pytest.CaptureFixture[str], thread: str, code: int, error: str
) -> None:
    seed_thread("gone", status="deleted")
    got, data, err = run(capsys, "compressions", thread)
    assert got == code and data["error"]["code"] == error and "Traceback" not in err
    [(action, target, outcome, audited)] = refusals()
    assert (action, outcome, audited) == ("cli.compressions", "refused", error)
    assert target.startswith("thread:")
    got, text, err = run_text(capsys, "compressions", thread)
    assert got == code and text == "" and len(err.strip().splitlines()) == 1
    assert "\x00" not in err


def test_none_recorded_is_one_line(db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    put_thread_row("t1")
    code, text, _ = run_text(capsys, "compressions", "t1")
    assert (code, text) == (0, "no compressions recorded for thread t1\n")
    code, text, _ = run_text(capsys, "compressions")
    assert (code, text) == (0, "no compressions recorded for any thread\n")
    code, data, _ = run(capsys, "compressions", "t1")
    assert data == {"thread_id": "t1", "total": 0, "compressions": []}


def test_a_viewer_may_read(capsys: pytest.CaptureFixture[str], monkeypatch: Any) -> None:
    monkeypatch.setenv("YUXI_DASH_CLI_ROLE", "viewer")
    get_settings.cache_clear()
    put_record("t1", T0, [item("x", "lost", cited=True)])
    code, data, _ = run(capsys, "compressions", "t1")
    assert code == 0 and data["compressions"][0]["ledger"]["cited"]["lost"] == 1
    assert refusals() == []
