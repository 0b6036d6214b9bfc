"""The platform client's own rules: its settings, the label, Retry-After, Server-Timing,
the one deadline, and what a platform's words become in our messages.

The calls through the CLI are tested against the stand-in platform's real server
(`tests/platform/test_compress.py`) and a hostile one (`test_hostile_platform.py`);
here the client is called directly, against the hostile server on loopback.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import httpx
import pytest

from tests.fixtures.hostile_http import HostileServer
from yuxi_dash.errors import (
    CompressedNotProjected,
    PlatformBadResponse,
    PlatformMisconfigured,
    PlatformOutcomeUnknown,
    PlatformUnavailable,
    ThreadBusy,
)
from yuxi_dash.platform.client import (
    MAX_COUNT,
    Attempt,
    PlatformClient,
    _retry_after,
    _server_timing,
    is_loopback,
    platform_label,
)
from yuxi_dash.settings import Settings

SECRET = "tok-SECRET-42"


def test_the_label_names_scheme_host_and_port_only() -> None:
    assert platform_label("https://platform.internal:8443/base") == "https://platform.internal:8443"
    assert platform_label("http://10.0.0.5") == "http://10.0.0.5"


@pytest.mark.parametrize(
    "url",
    ["ftp://host", "platform.internal", "https://user:pw@host", "https://host/?token=x", ""],
)
def test_an_unusable_url_is_refused_naming_the_setting(url: str) -> None:
    with pytest.raises(PlatformMisconfigured) as caught:
        PlatformClient(Settings(platform_url=url or " "))
    assert "YUXI_DASH_PLATFORM_URL" in caught.value.message
    assert "pw" not in caught.value.message and "token=x" not in caught.value.message


def test_the_token_file_must_be_readable_and_not_empty(tmp_path: Path) -> None:
    with pytest.raises(PlatformMisconfigured, match="cannot read YUXI_DASH_PLATFORM_TOKEN_FILE"):
        PlatformClient(Settings(platform_url="https://h", platform_token_file=tmp_path / "none"))
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(PlatformMisconfigured, match="is empty"):
        PlatformClient(Settings(platform_url="https://h", platform_token_file=empty))


def test_the_token_is_never_in_a_repr() -> None:
    settings = Settings(platform_url="https://h:1", platform_token=SECRET)
    client = PlatformClient(settings)
    try:
        assert SECRET not in repr(client) and SECRET not in repr(settings)
    finally:
        client.close()


def test_retry_after_in_seconds_or_as_a_date() -> None:
    def answer(value: str) -> httpx.Headers:
        return httpx.Headers({"Retry-After": value})

    assert _retry_after(answer("7")) == 7.0
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 <= (_retry_after(answer(later)) or 0) <= 31
    assert _retry_after(answer("soon")) is None
    assert _retry_after(httpx.Headers()) is None


def test_server_timing_is_the_platform_handling_time() -> None:
    assert _server_timing(httpx.Headers({"Server-Timing": "app;dur=12.5"})) == 12.5
    assert _server_timing(httpx.Headers({"Server-Timing": "app"})) is None
    assert _server_timing(httpx.Headers()) is None
    assert _server_timing(httpx.Headers({"Server-Timing": "app;dur=1e999"})) is None
    assert _server_timing(httpx.Headers({"Server-Timing": "app;dur=-5"})) is None


@pytest.mark.parametrize(
    "url",
    [
        "http://platform.internal",
        "http://10.0.0.5:8000",
        "http://[fe80::1]",
        "http://localhost.evil.example",
        "http://127.0.0.1.nip.io",
        "http://app.localhost",
    ],
)
def test_plain_http_off_loopback_is_refused_unless_allowed(url: str) -> None:
    with pytest.raises(PlatformMisconfigured) as caught:
        PlatformClient(Settings(platform_url=url, platform_token=SECRET))
    assert "YUXI_DASH_PLATFORM_ALLOW_INSECURE_HTTP" in caught.value.message
    assert SECRET not in caught.value.message
    allowed = PlatformClient(
        Settings(platform_url=url, platform_token=SECRET, platform_allow_insecure_http=True)
    )
    assert allowed.label == platform_label(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000",
        "http://127.8.9.10",
        "http://localhost:9",
        "http://LOCALHOST",
        "http://[::1]:8000",
        "https://platform.internal",
    ],
)
def test_loopback_and_https_need_no_permission(url: str) -> None:
    assert PlatformClient(Settings(platform_url=url, platform_token=SECRET)).label


def test_is_loopback() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("::ffff:127.0.0.2")
    assert not is_loopback("10.0.0.1") and not is_loopback("example.com")


def _client(server: HostileServer, deadline: float = 2.0) -> PlatformClient:
    settings = Settings(
        platform_url=server.url, platform_token=SECRET, platform_deadline_seconds=deadline
    )
    return PlatformClient(settings, backoff_seconds=0.05)


def _compress(client: PlatformClient) -> tuple[dict[str, object], list[Attempt], list[int]]:
    attempts: list[Attempt] = []
    started: list[int] = []
    body = client.compress(
        "t-1",
        expected_checkpoint_id="c-1",
        before_attempt=lambda number, request_id, key: started.append(number),
        on_attempt=attempts.append,
    )
    return body, attempts, started


def test_a_200_body_is_cleaned_counts_bounded_text_escaped_and_redacted(
    hostile_server: HostileServer,
) -> None:
    hostile_server.behave(
        "plain",
        body=(
            '{"status": "completed", "before_tokens": 99999999999999999999, "after_tokens": -4,'
            ' "compressed_messages": true, "file_path": "a/\\u001b[2Jb.md",'
            f' "reason": "Bearer {SECRET} \\u009b", "extra": "ignored"}}'
        ).encode(),
    )
    body, attempts, started = _compress(_client(hostile_server))
    assert body == {
        "status": "completed",
        "before_tokens": 0,  # past MAX_COUNT: not a count
        "after_tokens": 0,
        "compressed_messages": 0,
        "file_path": "a/\\x1b[2Jb.md",
        "reason": "Bearer [redacted] \\x9b",
        "checkpoint_id": None,
    }
    assert MAX_COUNT < 99999999999999999999
    assert started == [1] and [(a.number, a.http_status, a.code) for a in attempts] == [
        (1, 200, "completed")
    ]
    (request,) = hostile_server.requests
    assert request["headers"]["Authorization"] == f"Bearer {SECRET}"
    assert request["headers"]["Idempotency-Key"] and request["headers"]["X-Request-Id"]


@pytest.mark.parametrize("mode", ["drip_headers", "drip_body"])
def test_a_drip_ends_at_the_deadline_as_outcome_unknown_sent_once(
    mode: str, hostile_server: HostileServer
) -> None:
    hostile_server.behave(mode, drip_seconds=0.5)
    began = time.monotonic()
    with pytest.raises(PlatformOutcomeUnknown, match="YUXI_DASH_PLATFORM_DEADLINE_SECONDS"):
        _compress(_client(hostile_server, deadline=1.5))
    assert time.monotonic() - began < 1.5 + 1.0
    assert len(hostile_server.requests) == 1  # never sent again


def test_one_deadline_covers_every_retry_and_its_waits(hostile_server: HostileServer) -> None:
    """503 with Retry-After 30: the wait is cut to the time left and the call ends in time."""
    hostile_server.behave("plain", status=503, body=b"down", headers={"Retry-After": "30"})
    attempts: list[Attempt] = []
    began = time.monotonic()
    with pytest.raises(PlatformUnavailable, match="within the 1.5 s deadline"):
        _client(hostile_server, deadline=1.5).compress(
            "t-1", expected_checkpoint_id=None, on_attempt=attempts.append
        )
    assert time.monotonic() - began < 1.5 + 1.0
    assert [a.code for a in attempts] == ["platform_unavailable"]  # the wait used up the rest


@pytest.mark.parametrize(
    ("mode", "status", "error"),
    [
        ("huge", 200, CompressedNotProjected),
        ("huge_declared", 200, CompressedNotProjected),
        ("big_int", 200, CompressedNotProjected),
        ("deep_json", 200, CompressedNotProjected),
        ("huge", 500, PlatformBadResponse),
        ("huge_declared", 500, PlatformBadResponse),
        ("deep_json", 500, PlatformBadResponse),
    ],
)
def test_an_answer_past_the_bounds_is_a_typed_error_never_internal(
    mode: str, status: int, error: type[Exception], hostile_server: HostileServer
) -> None:
    hostile_server.behave(mode, status=status)
    began = time.monotonic()
    with pytest.raises(error) as caught:
        _compress(_client(hostile_server, deadline=10))
    assert time.monotonic() - began < 10
    if error is CompressedNotProjected:
        assert "answered 200 but its answer could not be read" in str(caught.value)
        assert "do not compress again" in str(caught.value)
    assert len(hostile_server.requests) == 1


@pytest.mark.parametrize("mode", ["echo_auth", "ansi"])
def test_a_platform_message_is_redacted_and_escaped(
    mode: str, hostile_server: HostileServer, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("file-token-SECRET-7\n")
    hostile_server.behave(mode, status=409)
    client = PlatformClient(
        Settings(
            platform_url=hostile_server.url,
            platform_token_file=token_file,
            alert_webhook_secret="hook-SECRET-9",
        )
    )
    with pytest.raises(ThreadBusy) as caught:
        client.compress("t-1", expected_checkpoint_id=None)
    message = caught.value.message
    assert "SECRET" not in message and "\x1b" not in message and "\x07" not in message
    if mode == "echo_auth":
        assert "you sent Bearer [redacted]" in message
    else:
        assert "gone \\x1b[31mred\\x1b[0m \\x07 bell" in message


def test_a_token_file_with_a_bom_is_read_without_it_and_other_bytes_are_refused(
    tmp_path: Path,
) -> None:
    """An editor's byte-order mark is not part of the token; a character no header can carry
    is a configuration error, never an unexpected error at the first call."""
    from yuxi_dash.platform.client import _read_token

    saved = tmp_path / "token"
    saved.write_bytes("\ufefftok-ABC-123\n".encode())
    assert _read_token(Settings(platform_url="http://h", platform_token_file=saved)) == (
        "tok-ABC-123"
    )
    saved.write_text("tok-\u00e9t\u00e9\n", encoding="utf-8")
    with pytest.raises(PlatformMisconfigured, match="characters a header cannot carry"):
        _read_token(Settings(platform_url="http://h", platform_token_file=saved))
