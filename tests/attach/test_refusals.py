"""A platform checkpoint that names a call is refused and quarantined; the scan goes on.

The platform (a separate process, a real `create_agent` graph on LangGraph's
PostgresSaver) writes three threads; its owner then puts an ``os.system`` call
into one thread's blobs, as anyone who can write the platform's database can.
With ``LANGGRAPH_STRICT_MSGPACK`` unset, `yuxi-dash attach scan` reads it
through the read-only role: nothing runs, that thread is quarantined
(``checkpoint_refused``, audited, the one list on `attach status`) and the
other two are projected. Reading its detail is refused and audited too.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import ormsgpack
import pytest
from langgraph.checkpoint.serde import _msgpack as lg_msgpack

from tests.fixtures.platform import Platform
from yuxi_dash.attach.quarantine import AUDIT_ACTION, READ_ACTOR, SCAN_ACTOR
from yuxi_dash.attach.status import attach_status
from yuxi_dash.cli import main
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.history import AuditRecord, list_audit

pytestmark = pytest.mark.services

THREADS = [
    {"thread_id": "p-good", "user_id": "alice", "agent": "research", "turns": 2,
     "result_words": 30},
    {"thread_id": "p-bad", "user_id": "bob", "agent": "research", "turns": 1,
     "result_words": 20},
    {"thread_id": "p-also", "user_id": "carol", "turns": 1, "result_words": 20},
]  # fmt: skip


@pytest.fixture(autouse=True)
def permissive_langgraph(monkeypatch: pytest.MonkeyPatch) -> None:
    """LangGraph's default: no LANGGRAPH_STRICT_MSGPACK, so its serializer calls what it reads."""
    monkeypatch.delenv("LANGGRAPH_STRICT_MSGPACK", raising=False)
    monkeypatch.setattr(lg_msgpack, "STRICT_MSGPACK_ENABLED", False)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    capsys.readouterr()
    code = main([*args, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else None


def poison(platform: Platform, thread_id: str, channel: str, marker: Path) -> int:
    """The platform's owner rewrites every blob of one channel of a thread to call os.system."""
    call = ormsgpack.Ext(0, ormsgpack.packb(("os", "system", f"touch {marker}")))
    blob = ormsgpack.packb({"llm_input_tokens": 5, "x": call})
    if channel == "messages":  # a message whose additional_kwargs hold the call
        message = ormsgpack.Ext(
            5,
            ormsgpack.packb(
                (
                    "langchain_core.messages.human",
                    "HumanMessage",
                    {"content": "hi", "additional_kwargs": {"n": call}},
                    "model_validate_json",
                )
            ),
        )
        blob = ormsgpack.packb([message])
    rows = platform.rows(
        "UPDATE checkpoint_blobs SET blob = %s WHERE thread_id = %s AND channel = %s "
        "AND type = 'msgpack' RETURNING version",
        blob,
        thread_id,
        channel,
    )
    return len(rows)


def refusal_rows() -> list[AuditRecord]:
    with session_scope() as session:
        return list_audit(session, action=AUDIT_ACTION)


@pytest.mark.parametrize("channel", ["token_usage", "messages"])
def test_a_poisoned_thread_is_refused_and_the_scan_goes_on(
    db_url: str,
    attached: Platform,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    channel: str,
) -> None:
    attached.run(THREADS)
    marker = tmp_path / f"pwned-{uuid.uuid4().hex}"
    assert poison(attached, "p-bad", channel, marker) > 0

    code, report = cli(capsys, "attach", "scan")
    assert not marker.exists()  # nothing the blob names was called
    assert code == 0, report
    assert report["projected"] == 2 and report["failed"] == 0
    assert report["quarantined"] == 1 and report["quarantined_threads"] == ["p-bad"]
    assert report["watermark"] == max(attached.latest_id(t["thread_id"]) for t in THREADS)

    code, threads = cli(capsys, "threads")
    assert {t["thread_id"] for t in threads if t["checkpoint_id"]} == {"p-good", "p-also"}

    rows = refusal_rows()
    assert [(r.target, r.outcome, r.actor) for r in rows] == [
        ("thread:p-bad", "refused", SCAN_ACTOR)
    ]
    assert {k: rows[0].detail[k] for k in ("code", "type", "via")} == {
        "code": "checkpoint_refused",
        "type": "os.system",
        "via": "scan",
    }

    code, status = cli(capsys, "attach", "status")
    assert code == 0
    assert [(p["thread"], p["action"], p["code"]) for p in status["problems"]] == [
        ("p-bad", "quarantined", "checkpoint_refused")
    ]
    assert "os.system" in status["problems"][0]["reason"]
    code = main(["attach", "status"])
    text = capsys.readouterr().out
    assert "quarantined p-bad" in text and "os.system" in text and "[checkpoint_refused]" in text

    # the next scan skips it (not read again, not audited again)
    code, again = cli(capsys, "attach", "scan", "--full")
    assert code == 0 and not marker.exists()
    assert (again["quarantined"], again["quarantined_skipped"]) == (0, 1)
    assert len(refusal_rows()) == 1

    # its detail, read from the platform, is refused too (and audited), and still runs nothing
    code, error = cli(capsys, "context", "p-bad")
    assert code != 0 and error["error"]["code"] == "checkpoint_refused"
    assert not marker.exists()
    rows = refusal_rows()
    assert sorted((r.actor, r.detail["via"]) for r in rows) == [
        (READ_ACTOR, "read"),
        (SCAN_ACTOR, "scan"),
    ]
    # one list: the read left the thread quarantined once, not listed twice
    assert [(p.thread, p.code) for p in attach_status().quarantined] == [
        ("p-bad", "checkpoint_refused")
    ]

    # the other threads read as they did
    code, context = cli(capsys, "context", "p-good")
    assert code == 0 and context["messages_total"] > 0
