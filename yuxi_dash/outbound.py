"""Calls to outside servers (the platform, Alertmanager, a webhook): one deadline, a byte cap.

`post(url, ...)` sends one POST and returns the answer (`Answer`: status, headers, body), or
raises `OutboundFailed` with a `kind` a caller maps to its own typed error. Its rules:
- One total deadline per call (connect, send, headers, body), however slowly a server
  drips. httpx's own timeouts bound each read only, so the call runs on an event loop under
  `asyncio.timeout`, which cancels it and closes the connection.
- At most `max_bytes` of the body are read (1 MiB by default); past that, or when the
  Content-Length says so, the connection is dropped unread (`too_large`). The body is asked
  for uncompressed, so the cap counts what we keep.
- Redirects are never followed. `sent` says whether the request had been sent in full when
  the failure came, so a caller knows whether the server may have acted on it.
- A message never holds the URL, a header or the body. `json_body` decodes an answer with
  bounded numbers and nesting: anything else is `bad_json`.
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import ssl
import threading
import time
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from yuxi_dash.errors import OutboundFailed

MAX_ANSWER_BYTES = 1024 * 1024  # every contract we speak answers in far less
MAX_INT_DIGITS = 20  # a token count or a status code; not a 5,000-digit integer

# OutboundFailed.kind: what went wrong
CONNECT = "connect"  # never reached the server: nothing was sent
DEADLINE = "deadline"  # the call's deadline passed (see `sent`)
DROPPED = "dropped"  # the connection broke (see `sent`)
TOO_LARGE = "too_large"  # the answer is over the byte cap
PROTOCOL = "protocol"  # not an HTTP answer we can read (bad framing, a compressed body)
BAD_JSON = "bad_json"  # `json_body`: not JSON, or numbers or nesting past the bounds


@functools.cache
def _tls() -> ssl.SSLContext:
    """The TLS context every call shares (building one costs tens of ms; it is thread-safe)."""
    return httpx.create_ssl_context()


@dataclass(frozen=True)
class Answer:
    """A whole answer, read within the deadline and the cap."""

    status: int
    headers: httpx.Headers
    body: bytes
    elapsed_ms: float


def post(
    url: str,
    *,
    content: bytes,
    headers: Mapping[str, str],
    deadline_seconds: float,
    connect_timeout_seconds: float | None = None,
    max_bytes: int = MAX_ANSWER_BYTES,
) -> Answer:
    """POST ``content`` to ``url`` and read the answer, all within ``deadline_seconds``."""
    call = _post(
        url,
        content=content,
        headers=dict(headers),
        deadline_seconds=deadline_seconds,
        connect_timeout_seconds=connect_timeout_seconds,
        max_bytes=max_bytes,
    )
    if not _loop_running():
        return _run(call)
    # called from code already on an event loop: run on a loop of our own in a thread
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["answer"] = _run(call)
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller's thread
            result["error"] = exc

    worker = threading.Thread(target=run, name="yuxi-dash-outbound", daemon=True)
    worker.start()
    worker.join()
    if "error" in result:
        raise result["error"]
    answer: Answer = result["answer"]
    return answer


def _run(call: Coroutine[Any, Any, Answer]) -> Answer:
    """Run ``call`` on a loop of its own. Unlike `asyncio.run`, closing it does not wait for
    the loop's worker threads: a name lookup that hangs past the deadline is left behind
    instead of stretching the call."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(call)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def _post(
    url: str,
    *,
    content: bytes,
    headers: dict[str, str],
    deadline_seconds: float,
    connect_timeout_seconds: float | None,
    max_bytes: int,
) -> Answer:
    started = time.perf_counter()
    sent = False

    async def trace(name: str, info: Mapping[str, Any]) -> None:
        nonlocal sent
        if name.endswith("send_request_body.complete"):
            sent = True

    connect = min(connect_timeout_seconds or deadline_seconds, deadline_seconds)
    timeout = httpx.Timeout(deadline_seconds, connect=connect)
    headers = {**headers, "Accept-Encoding": "identity"}
    try:
        async with asyncio.timeout(deadline_seconds):
            async with httpx.AsyncClient(
                timeout=timeout, follow_redirects=False, verify=_tls()
            ) as client:
                request = client.build_request(
                    "POST", url, content=content, headers=headers, extensions={"trace": trace}
                )
                response = await client.send(request, stream=True)
                try:
                    body = await _read_capped(response, max_bytes)
                finally:
                    await response.aclose()
    except TimeoutError:
        raise OutboundFailed(
            f"no whole answer within the {deadline_seconds:g} s deadline", kind=DEADLINE, sent=sent
        ) from None
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
        raise OutboundFailed(
            f"cannot connect ({type(exc).__name__})", kind=CONNECT, sent=False
        ) from None
    except httpx.TimeoutException:
        raise OutboundFailed(
            f"no whole answer within the {deadline_seconds:g} s deadline", kind=DEADLINE, sent=sent
        ) from None
    except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError) as exc:
        raise OutboundFailed(
            f"the connection dropped ({type(exc).__name__})", kind=DROPPED, sent=sent
        ) from None
    except (httpx.HTTPError, httpx.InvalidURL, UnicodeError, ValueError) as exc:
        # also a URL httpx cannot parse or a header value that is not ASCII: never sent
        raise OutboundFailed(
            f"the call failed ({type(exc).__name__})", kind=PROTOCOL, sent=sent
        ) from None
    return Answer(
        status=response.status_code,
        headers=response.headers,
        body=body,
        elapsed_ms=round((time.perf_counter() - started) * 1000, 3),
    )


async def _read_capped(response: httpx.Response, max_bytes: int) -> bytes:
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise OutboundFailed(
            f"HTTP {response.status_code} answer is content-encoded though none was asked",
            kind=PROTOCOL,
            sent=True,
            http_status=response.status_code,
        )
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise _too_large(response.status_code, max_bytes)
    body = bytearray()
    async for chunk in response.aiter_raw():
        body += chunk
        if len(body) > max_bytes:
            raise _too_large(response.status_code, max_bytes)
    return bytes(body)


def _too_large(status: int, max_bytes: int) -> OutboundFailed:
    return OutboundFailed(
        f"HTTP {status} answer is over {max_bytes:,} bytes (not read further)",
        kind=TOO_LARGE,
        sent=True,
        http_status=status,
    )


def _bounded_int(text: str) -> int:
    digits = text.lstrip("-")
    if len(digits) > MAX_INT_DIGITS:
        raise ValueError("an integer of more than 20 digits")
    return int(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("a number past the float range")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def json_body(answer: Answer) -> Any:
    """The answer's JSON, or `OutboundFailed` (`bad_json`) for anything past the bounds."""
    try:
        return json.loads(
            answer.body.decode("utf-8"),
            parse_int=_bounded_int,
            parse_float=_finite_float,
            parse_constant=_no_constant,
        )
    except RecursionError:
        reason = "JSON nested too deep"
    except UnicodeDecodeError:
        reason = "not UTF-8"
    except ValueError as exc:  # JSONDecodeError is one
        reason = "not JSON" if isinstance(exc, json.JSONDecodeError) else str(exc)
    raise OutboundFailed(
        f"HTTP {answer.status} answer: {reason}",
        kind=BAD_JSON,
        sent=True,
        http_status=answer.status,
    )
