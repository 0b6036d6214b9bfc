"""A platform checkpoint that names a call is refused, audited and listed; the scan goes on.

The platform (a separate process, a real `create_agent` graph on LangGraph's
PostgresSaver) writes three threads; its owner then puts an ``os.system`` call
into one thread's blobs, as anyone who can write the platform's database can.
With ``LANGGRAPH_STRICT_MSGPACK`` unset, `yuxi-dash attach scan` reads it
through the read-only role: nothing runs, that thread is refused (audited,
on `attach status`) and the other two are projected. Reading its detail is
refused and audited too.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import ormsgpack
import pytest
from langgraph.checkpoint.serde import _msgpack as lg_msgpack

from tests.attach.conftest import Platform
from yuxi_dash.attach.refusals import REFUSED_ACTION, refused_threads
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
        return list_audit(session, action=REFUSED_ACTION)


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
    assert report["refused"] == 1 and report["refused_threads"] == ["p-bad"]
    assert report["watermark"] == max(attached.latest_id(t["thread_id"]) for t in THREADS)

    code, threads = cli(capsys, "threads")
    assert {t["thread_id"] for t in threads if t["checkpoint_id"]} == {"p-good", "p-also"}

    rows = refusal_rows()
    assert [(r.target, r.outcome, r.actor) for r in rows] == [("thread:p-bad", "refused", "attach")]
    assert rows[0].detail == {"code": "checkpoint_refused", "type": "os.system", "via": "scan"}

    code, status = cli(capsys, "attach", "status")
    assert code == 0
    assert [(r["thread_id"], r["type"], r["via"]) for r in status["refused_threads"]] == [
        ("p-bad", "os.system", "scan")
    ]
    code = main(["attach", "status"])
    text = capsys.readouterr().out
    assert "refused thread p-bad" in text and "os.system" in text

    # its detail, read from the platform, is refused too (and audited), and still runs nothing
    code, error = cli(capsys, "context", "p-bad")
    assert code != 0 and error["error"]["code"] == "checkpoint_refused"
    assert not marker.exists()
    assert sorted(r.detail["via"] for r in refusal_rows()) == ["read", "scan"]
    assert [r.thread_id for r in refused_threads()] == ["p-bad"]

    # the other threads read as they did
    code, context = cli(capsys, "context", "p-good")
    assert code == 0 and context["messages_total"] > 0
