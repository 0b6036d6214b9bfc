"""Compressing an attached platform's threads through the platform's own endpoint (the CLI).

The platform is the stand-in: a real uvicorn server over a real `create_agent`
graph with its PostgresSaver in its own database (`tests/attach/platform_server.py`),
with its own per-thread lock and idle check. The dashboard attaches to that
database read-only and calls the endpoint; it never writes the platform's state.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import sqlalchemy as sa

from tests.fixtures.platform import Platform, PlatformServer
from yuxi_dash.cli import main
from yuxi_dash.platform.client import close_platform_clients
from yuxi_dash.settings import get_settings
from yuxi_dash.store.compressions import list_compressions
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Conversation
from yuxi_dash.store.queries import list_audit

pytestmark = pytest.mark.services

ACTOR = "ops@example.com"
HOT = {"thread_id": "plat-hot", "user_id": "alice", "agent": "research", "turns": 3,
       "result_words": 250}  # fmt: skip


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    capsys.readouterr()
    code = main([*args, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else None


def seeded(
    platform: Platform, capsys: pytest.CaptureFixture[str], *threads: dict[str, Any]
) -> None:
    platform.run(list(threads) or [HOT])
    assert cli(capsys, "attach", "scan")[0] == 0


def audit_rows(thread_id: str = "plat-hot") -> list[Any]:
    with session_scope() as session:
        return list(reversed(list_audit(session, action="compress", target=f"thread:{thread_id}")))


def reconfigure(monkeypatch: pytest.MonkeyPatch, **env: str) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    close_platform_clients()


def test_compress_goes_to_the_platform_and_the_summary_shows_at_once(
    db_url: str,
    attached: Platform,
    platform_configured: PlatformServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    seeded(attached, capsys)
    seen = attached.latest_id("plat-hot")
    with session_scope() as session:
        pressure_before = session.scalar(
            sa.select(Conversation.summary_pressure_ratio).where(
                Conversation.thread_id == "plat-hot"
            )
        )
    assert pressure_before is not None and pressure_before >= 0.85

    code, result = cli(
        capsys, "compress", "plat-hot", "--actor", ACTOR, "--expected-checkpoint", seen
    )
    assert code == 0, result
    assert result["status"] == "completed" and result["compressed_messages"] > 0
    assert result["after_tokens"] < result["before_tokens"]
    newest = attached.latest_id("plat-hot")
    assert result["checkpoint_id"] == newest != seen  # the platform wrote it, through its graph

    (call,) = platform_configured.calls()
    assert call["authorized"] and call["expected_checkpoint_id"] == seen
    code, status = cli(capsys, "attach", "status")
    assert status["compress_endpoint"] == platform_configured.url
    assert call["idempotency_key"] and call["request_id"]

    # projected again at once: no scan in between
    code, context = cli(capsys, "context", "plat-hot")
    assert code == 0 and context["checkpoint_id"] == newest
    assert context["summary_active"] and context["summary"] is not None
    code, threads = cli(capsys, "threads")
    (row,) = [t for t in threads if t["thread_id"] == "plat-hot"]
    assert row["summary_pressure_ratio"] < pressure_before

    (audit,) = audit_rows()
    detail = audit.detail
    assert (audit.actor, audit.outcome) == (ACTOR, "completed")
    assert detail["platform"] == platform_configured.url
    assert detail["request_id"] == call["request_id"]
    assert detail["idempotency_key"] == call["idempotency_key"]
    assert (detail["http_status"], detail["code"]) == (200, "completed")
    assert detail["latency_ms"] > 0
    assert detail["pressure_before"] == pytest.approx(pressure_before, abs=1e-4)
    assert detail["pressure_after"] == pytest.approx(row["summary_pressure_ratio"], abs=1e-4)
    assert platform_configured.token not in json.dumps(detail)
    # its compression record: found by the projection, marked as this operator's
    with session_scope() as session:
        records = list_compressions(session, "plat-hot")
    assert [(r.checkpoint_id, r.trigger, r.actor) for r in records][:1] == [
        (newest, "manual", ACTOR)
    ]


def test_a_stale_click_is_refused_before_any_call(
    attached: Platform, platform_configured: PlatformServer, capsys: pytest.CaptureFixture[str]
) -> None:
    seeded(attached, capsys)
    code, refused = cli(
        capsys, "compress", "plat-hot", "--actor", ACTOR, "--expected-checkpoint", "1f0-old"
    )
    assert (code, refused["error"]["code"]) == (4, "stale_state")
    assert platform_configured.calls() == []
    assert [(r.outcome, r.detail["code"]) for r in audit_rows()] == [("refused", "stale_state")]


def test_busy_at_the_platform_is_409_thread_busy_exit_4_not_retried(
    attached: Platform, platform_configured: PlatformServer, capsys: pytest.CaptureFixture[str]
) -> None:
    seeded(attached, capsys)
    before = attached.latest_id("plat-hot")
    platform_configured.control(busy=["plat-hot"])  # the platform has an active run
    code, refused = cli(capsys, "compress", "plat-hot", "--actor", ACTOR)
    assert (code, refused["error"]["code"]) == (4, "thread_busy")
    assert "active run" in refused["error"]["message"]  # the platform's words, shown literally
    assert len(platform_configured.calls()) == 1
    assert attached.latest_id("plat-hot") == before
    assert [(r.outcome, r.detail["http_status"]) for r in audit_rows()] == [("refused", 409)]


def test_an_agent_without_compression_is_422_and_remembered(
    attached: Platform, platform_configured: PlatformServer, capsys: pytest.CaptureFixture[str]
) -> None:
    from yuxi_dash.sources import preview_compression
    from yuxi_dash.store.origin import unsupported_agents

    seeded(attached, capsys)
    platform_configured.control(unsupported_agents=["research"])
    code, refused = cli(capsys, "compress", "plat-hot", "--actor", ACTOR)
    assert (code, refused["error"]["code"]) == (5, "compression_unsupported")
    assert len(platform_configured.calls()) == 1
    with session_scope() as session:
        remembered = unsupported_agents(session)
    assert "research" in remembered and "does not support" in remembered["research"]
    preview = preview_compression("plat-hot")
    assert (preview.capable, preview.reason) == (False, "compression_unsupported")

    platform_configured.control(unsupported_agents=[])  # the platform got the capability
    code, refused = cli(capsys, "compress", "plat-hot", "--actor", ACTOR)  # the pages' verdict
    assert (code, refused["error"]["code"], len(platform_configured.calls())) == (
        5, "compression_unsupported", 1,
    )  # fmt: skip
    assert cli(capsys, "compress", "plat-hot", "--actor", ACTOR, "--ask-platform")[0] == 0
    with session_scope() as session:
        assert unsupported_agents(session) == {}


def test_a_wrong_token_is_a_config_error_and_exactly_one_call(
    attached: Platform,
    platform_configured: PlatformServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seeded(attached, capsys)
    reconfigure(monkeypatch, YUXI_DASH_PLATFORM_TOKEN="wrong-token-SECRET")
    capsys.readouterr()
    code = main(["compress", "plat-hot", "--actor", ACTOR])
    err = capsys.readouterr().err
    assert code == 1
    assert "[platform_auth_failed]" in err and "YUXI_DASH_PLATFORM_TOKEN" in err
    assert "wrong-token-SECRET" not in err
    (call,) = platform_configured.calls()  # never retried
    assert not call["authorized"]
    (row,) = audit_rows()
    assert (row.outcome, row.detail["http_status"], row.detail["code"]) == (
        "failed",
        401,
        "platform_auth_failed",
    )
    assert "wrong-token-SECRET" not in json.dumps(row.detail)


def test_the_token_can_come_from_a_file(
    attached: Platform,
    platform_configured: PlatformServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
) -> None:
    seeded(attached, capsys)
    secret = tmp_path / "platform-token"
    secret.write_text(platform_configured.token + "\n")
    monkeypatch.delenv("YUXI_DASH_PLATFORM_TOKEN")
    reconfigure(monkeypatch, YUXI_DASH_PLATFORM_TOKEN_FILE=str(secret))
    assert cli(capsys, "compress", "plat-hot", "--actor", ACTOR)[0] == 0
    assert platform_configured.calls()[0]["authorized"]


def test_the_platform_down_is_platform_unavailable_after_two_retries(
    attached: Platform,
    platform_configured: PlatformServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.fixtures.live_server import free_port

    seeded(attached, capsys)
    reconfigure(monkeypatch, YUXI_DASH_PLATFORM_URL=f"http://127.0.0.1:{free_port()}")
    code, refused = cli(capsys, "compress", "plat-hot", "--actor", ACTOR)
    assert (code, refused["error"]["code"]) == (1, "platform_unavailable")
    rows = audit_rows()
    assert [r.detail["attempt"] for r in rows] == [1, 2, 3]
    assert {r.detail["code"] for r in rows} == {"platform_unavailable"}
    assert len({r.detail["idempotency_key"] for r in rows}) == 3  # a fresh key per attempt
    assert len({r.detail["request_id"] for r in rows}) == 1
    assert all(r.detail["http_status"] is None for r in rows)


def test_503_is_retried_after_its_retry_after(
    attached: Platform, platform_configured: PlatformServer, capsys: pytest.CaptureFixture[str]
) -> None:
    seeded(attached, capsys)
    platform_configured.control(status_override=503, retry_after="1", body="<html>down</html>")
    code, refused = cli(capsys, "compress", "plat-hot", "--actor", ACTOR)
    assert (code, refused["error"]["code"]) == (1, "platform_unavailable")
    calls = platform_configured.calls()
    assert len(calls) == 3
    gaps = [b["at"] - a["at"] for a, b in zip(calls, calls[1:], strict=False)]
    assert all(gap >= 1.0 for gap in gaps), gaps  # Retry-After honoured


def test_a_body_that_is_not_the_contract_is_a_typed_error(
    attached: Platform, platform_configured: PlatformServer, capsys: pytest.CaptureFixture[str]
) -> None:
    seeded(attached, capsys)
    platform_configured.control(status_override=200, body="<html>proxy login</html>")
    code, refused = cli(capsys, "compress", "plat-hot", "--actor", ACTOR)
    # it said 200, so it may have compressed: never "try again"
    assert (code, refused["error"]["code"]) == (1, "compressed_not_projected")
    assert "answered 200 but its answer could not be read" in refused["error"]["message"]
    assert "do not compress again" in refused["error"]["message"]
    assert len(platform_configured.calls()) == 1
    (row,) = audit_rows()
    assert (row.outcome, row.detail["code"], row.detail["http_status"]) == (
        "unknown",
        "compressed_not_projected",
        200,
    )
    platform_configured.control(status_override=418, body="I'm a teapot")
    code, refused = cli(capsys, "compress", "plat-hot", "--actor", ACTOR)
    assert (code, refused["error"]["code"]) == (1, "platform_bad_response")
    assert "418" in refused["error"]["message"]


@pytest.mark.parametrize("landed", [True, False], ids=["written-then-slow", "slow-to-write"])
def test_the_deadline_passing_after_acceptance_is_never_sent_again(
    landed: bool,
    attached: Platform,
    platform_configured: PlatformServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seeded(attached, capsys)
    before = attached.latest_id("plat-hot")
    reconfigure(monkeypatch, YUXI_DASH_PLATFORM_DEADLINE_SECONDS="1.5")
    # the stand-in sleeps past our deadline, after (or before) writing, then completes
    platform_configured.control(**{"delay_after" if landed else "delay_before": 3.5})
    code, refused = cli(capsys, "compress", "plat-hot", "--actor", ACTOR)
    assert (code, refused["error"]["code"]) == (1, "platform_outcome_unknown")
    message = refused["error"]["message"]
    assert "not sent again" in message
    if landed:
        assert f"a new summary landed (checkpoint {attached.latest_id('plat-hot')})" in message
        code, context = cli(capsys, "context", "plat-hot")  # projected at once
        assert context["summary_active"]
    else:
        assert "no new summary has landed so far" in message
    time.sleep(4)  # the stand-in finishes its one call
    assert len(platform_configured.calls()) == 1  # no second call
    assert len(platform_configured.record()["written"]) == 1
    assert attached.latest_id("plat-hot") != before
    (row,) = audit_rows()
    assert (row.outcome, row.detail["code"], row.detail["summary_landed"]) == (
        "unknown",
        "platform_outcome_unknown",
        landed,
    )


def test_without_a_platform_url_the_refusal_stays(
    attached: Platform, platform_server: PlatformServer, capsys: pytest.CaptureFixture[str]
) -> None:
    seeded(attached, capsys)
    code, refused = cli(capsys, "compress", "plat-hot", "--actor", ACTOR)
    assert (code, refused["error"]["code"]) == (5, "thread_attached")
    assert platform_server.calls() == []
    assert cli(capsys, "attach", "status")[1]["compress_endpoint"] is None


@pytest.mark.parametrize("busy", [2])
def test_bulk_of_ten_with_two_busy_never_more_than_three_in_flight(
    busy: int,
    db_url: str,
    attached: Platform,
    platform_configured: PlatformServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    threads = [{**HOT, "thread_id": f"plat-{n}"} for n in range(10)]
    seeded(attached, capsys, *threads)
    ids = [t["thread_id"] for t in threads]
    platform_configured.control(busy=ids[:busy], delay_before=0.3)
    capsys.readouterr()
    code = main(["compress", *ids, "--actor", ACTOR])
    lines = capsys.readouterr().out.splitlines()
    assert code == 4  # the first failed thread's exit code
    assert [line.split(":")[0] for line in lines] == ids  # one line per thread, in order
    assert sum("completed:" in line for line in lines) == 10 - busy
    assert sum("thread_busy" in line for line in lines) == busy
    record = platform_configured.record()
    assert len(record["calls"]) == 10
    assert record["max_in_flight"] == 3  # in parallel, never more than 3


def test_a_deleted_attached_thread_is_404_without_a_call(
    attached: Platform, platform_configured: PlatformServer, capsys: pytest.CaptureFixture[str]
) -> None:
    seeded(attached, capsys)
    with session_scope() as session:
        session.execute(
            sa.update(Conversation)
            .where(Conversation.thread_id == "plat-hot")
            .values(status="deleted")
        )
    code, refused = cli(capsys, "compress", "plat-hot", "--actor", ACTOR)
    assert (code, refused["error"]["code"]) == (3, "thread_deleted")
    assert platform_configured.calls() == []
    assert [(r.outcome, r.detail["code"]) for r in audit_rows()] == [("refused", "thread_deleted")]


def test_a_viewer_is_refused_before_any_call(
    attached: Platform,
    platform_configured: PlatformServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seeded(attached, capsys)
    reconfigure(monkeypatch, YUXI_DASH_CLI_ROLE="viewer")
    code, refused = cli(capsys, "compress", "plat-hot", "--actor", ACTOR)
    assert (code, refused["error"]["code"]) == (1, "forbidden")
    assert platform_configured.calls() == []


def test_a_compress_whose_projection_fails_says_the_platform_compressed(
    attached: Platform,
    platform_configured: PlatformServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The platform answered 200, then projecting the thread here failed: a typed error that
    says it did compress, its audit row, and the next scan shows the new summary."""
    from yuxi_dash.attach import projector

    seeded(attached, capsys)
    before = attached.latest_id("plat-hot")

    def our_database_fails(*args: Any, **kwargs: Any) -> None:
        raise sa.exc.OperationalError("SELECT 1", {}, Exception("our database is down"))

    with monkeypatch.context() as patch:
        patch.setattr(projector, "run_batch", our_database_fails)
        code, out = cli(capsys, "compress", "plat-hot", "--actor", ACTOR)
    assert (code, out["error"]["code"]) == (1, "compressed_not_projected")
    assert "the platform compressed thread plat-hot" in out["error"]["message"]
    assert len(platform_configured.calls()) == 1  # never sent again
    (row,) = audit_rows()
    assert (row.outcome, row.detail["not_projected"]) == ("completed", "OperationalError")
    assert attached.latest_id("plat-hot") != before  # it did land at the platform
    assert cli(capsys, "attach", "scan")[0] == 0
    code, context = cli(capsys, "context", "plat-hot")
    assert code == 0 and context["checkpoint_id"] == attached.latest_id("plat-hot")
