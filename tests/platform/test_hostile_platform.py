"""`yuxi-dash compress` of a real attached thread against a hostile platform endpoint.

The thread is the stand-in platform's (`attached`, `platform_configured`: a real graph
in its own PostgreSQL database, projected here by a scan); the compress endpoint is then
pointed at `hostile_server` (a real HTTP server on loopback) with a 2 s deadline. Whatever
it does (drip, 300 MB, a 5,000-digit number, JSON nested 200,000 deep, our token echoed,
ANSI escapes), the call ends within the deadline plus a margin with a typed error, every
audit row is complete, our token and no control character reaches the output or the
audit, and nothing is written to the thread, there or here.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
import sqlalchemy as sa

from tests.fixtures.hostile_http import HostileServer
from tests.fixtures.platform import Platform, PlatformServer
from tests.platform.test_compress import ACTOR, audit_rows, reconfigure, seeded
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.cli import main
from yuxi_dash.errors import PlatformOutcomeUnknown
from yuxi_dash.sources import compress_thread_context
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Conversation

pytestmark = pytest.mark.services

THREAD = "plat-hot"
DEADLINE = 2.0
MARGIN = 8.0  # the CLI's start, the re-read of the thread after a lost answer, the audit
CONTROL_BYTES = ("\x1b", "\x07", "\x9b")


def _our_checkpoint() -> str | None:
    with session_scope() as session:
        return session.scalar(
            sa.select(Conversation.checkpoint_id).where(Conversation.thread_id == THREAD)
        )


def _point_at(
    hostile: HostileServer, monkeypatch: pytest.MonkeyPatch, deadline: float = DEADLINE
) -> None:
    reconfigure(
        monkeypatch,
        YUXI_DASH_PLATFORM_URL=hostile.url,
        YUXI_DASH_PLATFORM_DEADLINE_SECONDS=str(deadline),
    )


def _run(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str, float]:
    capsys.readouterr()
    began = time.monotonic()
    code = main(["compress", THREAD, "--actor", ACTOR, *extra])
    took = time.monotonic() - began
    captured = capsys.readouterr()
    return code, captured.out, captured.err, took


# mode, its status, the error code, the audit outcome
CASES = [
    ("drip_headers", 200, "platform_outcome_unknown", "unknown"),
    ("drip_body", 200, "platform_outcome_unknown", "unknown"),
    ("huge", 200, "compressed_not_projected", "unknown"),
    ("huge_declared", 200, "compressed_not_projected", "unknown"),
    ("huge", 500, "platform_bad_response", "failed"),
    ("huge_declared", 500, "platform_bad_response", "failed"),
    ("big_int", 200, "compressed_not_projected", "unknown"),
    ("deep_json", 200, "compressed_not_projected", "unknown"),
    ("deep_json", 500, "platform_bad_response", "failed"),
    ("echo_auth", 409, "thread_busy", "refused"),
    ("echo_auth", 500, "platform_bad_response", "failed"),
    ("ansi", 409, "thread_busy", "refused"),
]


@pytest.mark.parametrize(
    ("mode", "status", "error", "outcome"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES]
)
def test_a_hostile_platform_ends_in_time_typed_audited_clean(
    mode: str,
    status: int,
    error: str,
    outcome: str,
    attached: Platform,
    platform_configured: PlatformServer,
    hostile_server: HostileServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token = platform_configured.token
    seeded(attached, capsys)
    theirs, ours = attached.latest_id(THREAD), _our_checkpoint()
    assert ours is not None
    _point_at(hostile_server, monkeypatch)
    hostile_server.behave(mode, status=status, drip_seconds=0.5)

    code, out, err, took = _run(capsys)

    assert took < DEADLINE + MARGIN, f"{mode} held the call {took:.1f} s"
    assert code == (4 if error == "thread_busy" else 1)
    assert err.rstrip().endswith(f"[{error}]"), err
    assert "internal_error" not in err and "unexpected" not in err
    for text in (out, err):
        assert token not in text
        assert not any(byte in text for byte in CONTROL_BYTES), repr(text)
    assert len(hostile_server.requests) == 1  # never sent again
    assert hostile_server.requests[0]["headers"]["Authorization"] == f"Bearer {token}"

    (row,) = audit_rows()  # one attempt, one row: the pending one, completed
    assert (row.outcome, row.detail["code"]) == (outcome, error)
    assert row.detail["attempt"] == 1 and row.detail["request_id"]
    assert row.detail["latency_ms"] > 0
    assert row.detail["http_status"] == (None if mode.startswith("drip") else status)
    detail = json.dumps(row.detail)
    assert token not in detail and "\\u001b" not in detail
    if outcome == "unknown":
        assert row.detail["summary_landed"] is False

    assert attached.latest_id(THREAD) == theirs  # nothing written there
    assert _our_checkpoint() == ours  # nor here

    if mode == "echo_auth" and status == 409:
        assert "you sent Bearer [redacted]" in err
    if mode == "ansi":
        assert "gone \\x1b[31mred\\x1b[0m \\x07 bell" in err  # shown, as inert text
    if error == "compressed_not_projected":
        assert "answered 200 but its answer could not be read" in err
        assert "do not compress again" in err and "yuxi-dash attach scan" in err


@pytest.mark.parametrize("mode", ["echo_auth", "ansi"])
def test_json_output_holds_no_token_and_no_control_character(
    mode: str,
    attached: Platform,
    platform_configured: PlatformServer,
    hostile_server: HostileServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seeded(attached, capsys)
    _point_at(hostile_server, monkeypatch)
    hostile_server.behave(mode, status=409)
    code, out, err, _took = _run(capsys, "--json")
    assert code == 4
    message = json.loads(out)["error"]["message"]
    assert platform_configured.token not in out + err
    assert not any(byte in message for byte in CONTROL_BYTES), repr(message)
    assert "\\u001b" not in out  # not even as a JSON escape a reader would decode


def test_two_threads_at_once_each_line_clean(
    attached: Platform,
    platform_configured: PlatformServer,
    hostile_server: HostileServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bulk form prints one line per thread: the platform's words are cleaned there too."""
    from tests.platform.test_compress import HOT

    seeded(attached, capsys, HOT, {**HOT, "thread_id": "plat-two"})
    _point_at(hostile_server, monkeypatch)
    hostile_server.behave("ansi", status=409)
    capsys.readouterr()
    code = main(["compress", THREAD, "plat-two", "--actor", ACTOR])
    out = capsys.readouterr().out
    assert code == 4 and len(out.splitlines()) == 2
    assert "\x1b" not in out and "\\x1b[31m" in out


def test_an_attempt_in_flight_is_a_pending_row_completed_when_it_ends(
    attached: Platform,
    platform_configured: PlatformServer,
    hostile_server: HostileServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While the platform holds the call, the attempt's row is already there ("pending"),
    naming what was sent: a call killed now would not be invisible."""
    seeded(attached, capsys)
    _point_at(hostile_server, monkeypatch, deadline=6)
    hostile_server.behave("drip_headers", drip_seconds=0.5)
    actor = Actor(id=ACTOR, role=Role.OPERATOR, via="cli")
    ended: dict[str, Any] = {}

    def call() -> None:
        try:
            compress_thread_context(THREAD, actor=actor)
        except Exception as exc:  # noqa: BLE001 - handed to the test's thread
            ended["error"] = exc

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    try:
        give_up = time.monotonic() + 5
        while not hostile_server.requests and time.monotonic() < give_up:
            time.sleep(0.05)
        (sent,) = hostile_server.requests
        (pending,) = audit_rows()
        assert worker.is_alive()  # still in flight
        assert pending.outcome == "pending"
        assert pending.detail["attempt"] == 1
        assert pending.detail["request_id"] == sent["headers"]["X-Request-Id"]
        assert pending.detail["idempotency_key"] == sent["headers"]["Idempotency-Key"]
        assert pending.detail["platform"] == hostile_server.url
        assert pending.detail["agent"] == "research"
        assert pending.detail["pressure_before"] is not None
        assert "code" not in pending.detail and "http_status" not in pending.detail
    finally:
        worker.join(timeout=6 + MARGIN)
    assert not worker.is_alive()
    assert isinstance(ended.get("error"), PlatformOutcomeUnknown)
    (row,) = audit_rows()  # the same row, completed
    assert (row.id, row.outcome, row.detail["code"]) == (
        pending.id,
        "unknown",
        "platform_outcome_unknown",
    )


def test_retried_attempts_are_one_completed_row_each(
    attached: Platform,
    platform_configured: PlatformServer,
    hostile_server: HostileServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seeded(attached, capsys)
    _point_at(hostile_server, monkeypatch, deadline=10)
    hostile_server.behave("plain", status=503, body=b"<html>down</html>")
    code, _out, err, took = _run(capsys)
    assert code == 1 and err.rstrip().endswith("[platform_unavailable]")
    assert took < 10 + MARGIN
    rows = audit_rows()
    assert [(r.detail["attempt"], r.outcome, r.detail["code"]) for r in rows] == [
        (1, "failed", "platform_unavailable"),
        (2, "failed", "platform_unavailable"),
        (3, "failed", "platform_unavailable"),
    ]
    assert [r.detail["idempotency_key"] for r in rows] == [
        r["headers"]["Idempotency-Key"] for r in hostile_server.requests
    ]
