"""Outbound calls against a real hostile server: the deadline holds, the cap holds, JSON is bounded."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.fixtures.hostile_http import HostileServer
from yuxi_dash import outbound
from yuxi_dash.errors import OutboundFailed

DEADLINE = 1.5
MARGIN = 1.5  # the call ends within its deadline plus this


def call(server: HostileServer, deadline: float = DEADLINE) -> outbound.Answer:
    return outbound.post(server.url + "/x", content=b"{}", headers={}, deadline_seconds=deadline)


def failed(server: HostileServer) -> tuple[OutboundFailed, float]:
    started = time.monotonic()
    with pytest.raises(OutboundFailed) as caught:
        call(server)
    return caught.value, time.monotonic() - started


def test_a_plain_answer_is_read_whole(hostile_server: HostileServer) -> None:
    hostile_server.behave("plain", status=201, body=b'{"a": [1, 2.5, "x"]}')
    answer = call(hostile_server)
    assert (answer.status, answer.body) == (201, b'{"a": [1, 2.5, "x"]}')
    assert outbound.json_body(answer) == {"a": [1, 2.5, "x"]}
    (request,) = hostile_server.requests
    assert request["headers"]["Accept-Encoding"] == "identity"


@pytest.mark.parametrize("mode", ["drip_headers", "drip_body"])
def test_a_drip_ends_at_the_deadline(hostile_server: HostileServer, mode: str) -> None:
    hostile_server.behave(mode, drip_seconds=0.2)
    error, took = failed(hostile_server)
    assert (error.kind, error.sent) == (outbound.DEADLINE, True)
    assert DEADLINE <= took < DEADLINE + MARGIN
    assert hostile_server.url not in error.message


@pytest.mark.parametrize("mode", ["huge", "huge_declared"])
@pytest.mark.parametrize("status", [200, 500])
def test_a_huge_answer_is_not_read_past_the_cap(
    hostile_server: HostileServer, mode: str, status: int
) -> None:
    hostile_server.behave(mode, status=status)
    error, took = failed(hostile_server)
    assert (error.kind, error.http_status) == (outbound.TOO_LARGE, status)
    assert took < MARGIN


@pytest.mark.parametrize(
    ("mode", "said"),
    [("big_int", "more than 20 digits"), ("deep_json", "nested too deep")],
)
def test_json_past_the_bounds_is_bad_json(
    hostile_server: HostileServer, mode: str, said: str
) -> None:
    hostile_server.behave(mode)
    with pytest.raises(OutboundFailed) as caught:
        outbound.json_body(call(hostile_server))
    assert caught.value.kind == outbound.BAD_JSON and said in caught.value.message


@pytest.mark.parametrize("text", [b"NaN", b"1e999", b"\xff", b"<html>"])
def test_other_untrusted_json_is_bad_json(text: bytes) -> None:
    answer = outbound.Answer(status=200, headers=outbound.httpx.Headers(), body=text, elapsed_ms=1)
    with pytest.raises(OutboundFailed) as caught:
        outbound.json_body(answer)
    assert caught.value.kind == outbound.BAD_JSON


def test_nobody_listening_is_connect_and_not_sent() -> None:
    from tests.fixtures.live_server import free_port

    with pytest.raises(OutboundFailed) as caught:
        outbound.post(
            f"http://127.0.0.1:{free_port()}/", content=b"", headers={}, deadline_seconds=2
        )
    assert (caught.value.kind, caught.value.sent) == (outbound.CONNECT, False)


def test_a_compressed_answer_is_refused(hostile_server: HostileServer) -> None:
    hostile_server.behave("plain", headers={"Content-Encoding": "gzip"})
    error, _ = failed(hostile_server)
    assert error.kind == outbound.PROTOCOL


def test_a_redirect_is_an_answer_never_followed(hostile_server: HostileServer) -> None:
    hostile_server.behave("plain", status=307, headers={"Location": "http://127.0.0.1:9/"})
    assert call(hostile_server).status == 307
    assert len(hostile_server.requests) == 1


def test_it_works_from_code_already_on_an_event_loop(hostile_server: HostileServer) -> None:
    async def inside() -> int:
        return call(hostile_server).status

    assert asyncio.run(inside()) == 200


def test_a_slow_name_lookup_does_not_stretch_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lookup runs in a worker thread the deadline cannot stop: the call must not wait
    for it (asyncio.run would)."""
    import socket

    real = socket.getaddrinfo

    def slow(host: object, *args: object, **kwargs: object) -> object:
        if host == "slow-dns.invalid":
            time.sleep(3)
        return real(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", slow)
    started = time.monotonic()
    with pytest.raises(OutboundFailed) as caught:
        outbound.post("http://slow-dns.invalid/", content=b"", headers={}, deadline_seconds=0.5)
    assert time.monotonic() - started < 0.5 + MARGIN
    assert caught.value.kind in (outbound.CONNECT, outbound.DEADLINE) and not caught.value.sent


@pytest.mark.parametrize(
    ("url", "headers"),
    [("http://[::1/", {}), ("http://127.0.0.1:9/", {"Authorization": "Bearer \ufefftoken"})],
    ids=["unparsable-url", "non-ascii-header"],
)
def test_a_call_that_cannot_be_built_is_protocol_and_not_sent(
    url: str, headers: dict[str, str]
) -> None:
    with pytest.raises(OutboundFailed) as caught:
        outbound.post(url, content=b"", headers=headers, deadline_seconds=2)
    assert (caught.value.kind, caught.value.sent) == (outbound.PROTOCOL, False)


def test_a_header_value_never_reaches_the_message(hostile_server: HostileServer) -> None:
    hostile_server.behave("plain", status=404, headers={"Content-Encoding": "\x1b[2Jx"})
    error, _ = failed(hostile_server)
    assert error.kind == outbound.PROTOCOL and error.http_status == 404
    assert "\x1b" not in error.message and "[2J" not in error.message
