"""`api serve`'s uvicorn set-up (yuxi_dash.api.server) against a real server: slow clients.

A slowloris (HAZARDS item 18): connections that send their headers a byte at a
time are closed once the header timeout passes, while other callers are served;
a body that comes slowly after complete headers is not cut off.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.api.test_app import _token, running_api
from tests.service.builders import seed_thread
from yuxi_dash.api.server import HeaderTimeoutProtocol, protocol_class, server_config
from yuxi_dash.settings import Settings

HEADER_TIMEOUT = 1.0
MARGIN = 4.0  # scheduling slack on a loaded machine
DRIP_SECONDS = 0.3
SLOW_CLIENTS = 20
# a request whose headers never end: the request line, then one header value forever
DRIP = b"POST /api/chat/thread/t1/compress HTTP/1.1\r\nHost: x\r\nX-Slow: "


@pytest.fixture
def slow_api() -> Iterator[httpx.Client]:
    with running_api(Settings(api_header_timeout_seconds=HEADER_TIMEOUT)) as client:
        yield client


def _connect(client: httpx.Client) -> socket.socket:
    port = client.base_url.port
    assert port is not None
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def _closed_by_server(sock: socket.socket) -> bool:
    """True once the server closed its end (EOF or reset); never blocks."""
    sock.setblocking(False)
    try:
        return sock.recv(4096) == b""  # a 408/400 answer would be data, then EOF next time
    except BlockingIOError:
        return False
    except (ConnectionResetError, BrokenPipeError):
        return True
    finally:
        sock.setblocking(True)


def _drip_until_closed(socks: list[socket.socket], sent: int) -> dict[int, float]:
    """Send one more byte on each open socket every DRIP_SECONDS; when each was closed."""
    started = time.monotonic()
    closed: dict[int, float] = {}
    while len(closed) < len(socks) and time.monotonic() - started < HEADER_TIMEOUT + MARGIN:
        time.sleep(DRIP_SECONDS)
        byte = DRIP[sent : sent + 1] or b"a"
        sent += 1
        for index, sock in enumerate(socks):
            if index in closed:
                continue
            if _closed_by_server(sock):
                closed[index] = time.monotonic() - started
                continue
            try:
                sock.sendall(byte)
            except (BrokenPipeError, ConnectionResetError):
                closed[index] = time.monotonic() - started
    return closed


def test_connections_that_drip_their_headers_are_closed_and_others_are_served(
    slow_api: httpx.Client,
) -> None:
    socks = [_connect(slow_api) for _ in range(SLOW_CLIENTS)]
    try:
        for sock in socks:
            sock.sendall(DRIP[:1])
        assert slow_api.get("/healthz").status_code == 200  # served while they drip
        closed = _drip_until_closed(socks, sent=1)
    finally:
        for sock in socks:
            sock.close()
    assert len(closed) == SLOW_CLIENTS, f"{SLOW_CLIENTS - len(closed)} slow connections still open"
    assert max(closed.values()) <= HEADER_TIMEOUT + MARGIN
    assert slow_api.get("/healthz").status_code == 200


def test_a_kept_alive_connection_dripping_its_next_request_is_closed(
    slow_api: httpx.Client,
) -> None:
    sock = _connect(slow_api)
    try:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = sock.recv(4096)
        assert answer.startswith(b"HTTP/1.1 200"), answer
        # each byte resets uvicorn's keep-alive timer; only the header timeout ends this
        closed = _drip_until_closed([sock], sent=0)
    finally:
        sock.close()
    assert list(closed) == [0] and closed[0] <= HEADER_TIMEOUT + MARGIN


def test_a_slow_body_after_complete_headers_is_not_cut_off(slow_api: httpx.Client) -> None:
    seed_thread()
    body = b'{"expected_checkpoint_id": null}'
    head = (
        b"POST /api/chat/thread/t1/compress HTTP/1.1\r\nHost: x\r\n"
        + f"Authorization: Bearer {_token()}\r\n".encode()
        + b"Content-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
    )
    sock = _connect(slow_api)
    sock.settimeout(60)
    try:
        sock.sendall(head + body[:10])
        time.sleep(HEADER_TIMEOUT * 2)  # longer than the header timeout, inside the body
        sock.sendall(body[10:])
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    finally:
        sock.close()
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    assert b'"status":"completed"' in answer


def test_a_header_block_over_16_kib_is_400(slow_api: httpx.Client) -> None:
    sock = _connect(slow_api)
    try:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * (17 * 1024))
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    finally:
        sock.close()
    assert answer.startswith(b"HTTP/1.1 400"), answer[:200]


def test_server_config_uses_the_settings() -> None:
    settings = Settings(api_header_timeout_seconds=2.5, api_max_connections=7)
    config = server_config(object(), host="127.0.0.1", port=1, settings=settings)
    assert isinstance(config.http, type) and issubclass(config.http, HeaderTimeoutProtocol)
    assert config.http.header_timeout_seconds == 2.5
    assert config.limit_concurrency == 7
    assert config.h11_max_incomplete_event_size == 16 * 1024
    assert config.timeout_keep_alive == 5 and config.access_log is False
    assert protocol_class(9).header_timeout_seconds == 9.0
    assert HeaderTimeoutProtocol.header_timeout_seconds == 10.0  # the default stays
    assert Settings().api_header_timeout_seconds == 10.0 and Settings().api_max_connections == 64
