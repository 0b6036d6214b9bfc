"""Poison rows on a platform are quarantined and moved past, never a stalled scan.

NaN, infinite, 2**62 and negative token counts, NUL text and thread ids our
tables cannot hold (a newline, an ANSI escape, only blanks, 300 characters),
written into a real platform's saver tables with LangGraph's PostgresSaver.
Every scan exits 0, projects the good thread, lists the others on
`yuxi-dash attach status` with their reason's code (audited once), and does
not read them again until they move. On SQLite and on PostgreSQL.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from tests.attach.checkpoints import put_checkpoint, usage, values
from tests.fixtures.platform import Platform
from yuxi_dash.cli import main
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AuditEntry, Conversation

pytestmark = pytest.mark.services

POISON_USAGE = {
    "p-nan": usage(float("nan")),
    "p-inf": usage(float("inf")),
    "p-huge": usage(2**62),
    "p-neg": usage(-5000),  # would be drawn as pressure -20%
}
BAD_IDS = ["bad\nid", "bad\x1b[31mred", "   ", "x" * 300]


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    capsys.readouterr()
    code = main([*args, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else None


def _audited() -> list[AuditEntry]:
    with session_scope() as session:
        rows = list(
            session.scalars(sa.select(AuditEntry).where(AuditEntry.action == "attach_quarantine"))
        )
        session.expunge_all()
        return rows


def test_poison_rows_are_quarantined_and_the_scan_moves_past_them(
    db_url: str, attached: Platform, capsys: pytest.CaptureFixture[str]
) -> None:
    owner = attached.owner_conninfo
    good = put_checkpoint(owner, "p-good", values(tokens=20_000), metadata={"user_id": "alice"})
    neg = ""
    for thread_id, poison in POISON_USAGE.items():
        made = put_checkpoint(owner, thread_id, {**values(), "token_usage": poison})
        neg = made if thread_id == "p-neg" else neg
    put_checkpoint(owner, "p-nul", values("before\x00after"))
    for thread_id in BAD_IDS:
        put_checkpoint(owner, thread_id, values())

    code, report = cli(capsys, "attach", "scan")
    assert code == 0, report
    assert (report["projected"], report["failed"], report["quarantined"]) == (1, 0, 9)
    assert "bad\\x1b[31mred" in report["quarantined_threads"]
    assert report["watermark"] >= good  # moved past them all

    code, status = cli(capsys, "attach", "status")
    assert code == 0
    quarantined = {p["thread"]: p["code"] for p in status["problems"]}
    assert quarantined == {
        "p-nan": "impossible_usage",
        "p-inf": "impossible_usage",
        "p-huge": "impossible_usage",
        "p-neg": "impossible_usage",
        "p-nul": "invalid_input",
        "bad\\nid": "invalid_input",
        "bad\\x1b[31mred": "invalid_input",
        "   ": "invalid_input",
        "x" * 199 + "…": "invalid_input",
    }
    assert all(p["action"] == "quarantined" and p["reason"] for p in status["problems"])
    capsys.readouterr()
    assert main(["attach", "status"]) == 0
    shown = capsys.readouterr().out
    assert "bad\\x1b[31mred" in shown and "\x1b" not in shown  # shown literally, never raw
    assert len(_audited()) == 9

    # nothing of theirs is drawn: no row, no pressure of -20%
    code, threads = cli(capsys, "threads")
    assert [t["thread_id"] for t in threads] == ["p-good"]
    with session_scope() as session:
        assert session.scalar(sa.select(sa.func.count()).select_from(Conversation)) == 1

    # the next scans skip them (not read again, not audited again), and exit 0
    for args in (("attach", "scan"), ("attach", "scan", "--full")):
        code, again = cli(capsys, *args)
        assert code == 0, again
        assert (again["quarantined"], again["quarantined_skipped"], again["failed"]) == (0, 9, 0)
        assert again["checkpoints_read"] == 0
    assert len(_audited()) == 9

    # it moves, its history still poisoned: tried again, quarantined at its new checkpoint
    moved = put_checkpoint(owner, "p-neg", values(tokens=4000, message_id="m2"), parent=neg)
    code, report = cli(capsys, "attach", "scan")
    assert code == 0, report
    assert (report["projected"], report["quarantined"], report["quarantined_skipped"]) == (0, 1, 8)
    code, status = cli(capsys, "attach", "status")
    assert {p["checkpoint_id"] for p in status["problems"] if p["thread"] == "p-neg"} == {moved}
    assert len(_audited()) == 10

    # the platform prunes the bad checkpoint: projected, and out of the quarantine
    with psycopg.connect(owner, autocommit=True) as conn:
        conn.execute(
            "DELETE FROM checkpoints WHERE thread_id = 'p-neg' AND checkpoint_id = %s", (neg,)
        )
    fixed = put_checkpoint(owner, "p-neg", values(tokens=4000, message_id="m3"), parent=moved)
    code, report = cli(capsys, "attach", "scan")
    assert code == 0, report
    assert (report["projected"], report["quarantined"]) == (1, 0)
    code, status = cli(capsys, "attach", "status")
    assert "p-neg" not in {p["thread"] for p in status["problems"]}
    assert len(status["problems"]) == 8
    code, threads = cli(capsys, "threads")
    row = next(t for t in threads if t["thread_id"] == "p-neg")
    assert row["checkpoint_id"] == fixed and row["summary_pressure_ratio"] == pytest.approx(0.16)
