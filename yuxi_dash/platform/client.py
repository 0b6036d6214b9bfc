"""The attached platform's compress endpoint over HTTP: one call, its outcome as our typed errors.

`PlatformClient.compress(thread_id, expected_checkpoint_id=...)` sends
``POST {YUXI_DASH_PLATFORM_URL}/api/chat/thread/{thread_id}/compress`` with httpx (explicit
connect and read timeouts), ``Authorization: Bearer <token>``, one ``X-Request-Id`` per
compress, a fresh ``Idempotency-Key`` per attempt and ``{"expected_checkpoint_id": ...}``.
- 200 is the body (status completed or no_op); 404 ThreadNotFound; 409 ThreadBusy
  (StaleState for stale_state); 422 CompressionUnsupported; 401/403 PlatformAuthFailed.
  None of these is retried.
- 502/503, or a connection failing before the request is sent: retried twice (exponential
  backoff with jitter, at least ``Retry-After``), then PlatformUnavailable.
- A timeout or a dropped connection after sending, and a 504: PlatformOutcomeUnknown, never
  re-sent (the platform may have summarized). A body off the contract: PlatformBadResponse.
Every attempt is reported to ``on_attempt`` (for the audit). The token never appears in a
message, a log line or a repr.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt
from tenacity.wait import wait_exponential_jitter

from yuxi_dash.errors import (
    CompressionUnsupported,
    PlatformAttemptFailed,
    PlatformAuthFailed,
    PlatformBadResponse,
    PlatformMisconfigured,
    PlatformOutcomeUnknown,
    PlatformUnavailable,
    StaleState,
    ThreadBusy,
    ThreadNotFound,
    YuxiDashError,
)
from yuxi_dash.settings import Settings

COMPRESS_PATH = "/api/chat/thread/{thread_id}/compress"
MAX_ATTEMPTS = 3  # the first call and at most two retries
MAX_WAIT_SECONDS = 30.0  # a Retry-After longer than this is cut to it
_MESSAGE_LIMIT = 300
_TOKEN_SETTINGS = "YUXI_DASH_PLATFORM_TOKEN or YUXI_DASH_PLATFORM_TOKEN_FILE"


@dataclass(frozen=True)
class Attempt:
    """One HTTP attempt, as the audit records it."""

    number: int
    request_id: str
    idempotency_key: str
    http_status: int | None
    code: str  # completed, no_op, or the error code it ended with
    latency_ms: float
    platform_ms: float | None  # the platform's own handling time (Server-Timing), when it says


def platform_label(url: str) -> str:
    """The platform as scheme://host:port, for messages and the audit (no path, user or query)."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}"


def _read_token(settings: Settings) -> str | None:
    if settings.platform_token is not None and settings.platform_token.get_secret_value().strip():
        return settings.platform_token.get_secret_value().strip()
    path = settings.platform_token_file
    if path is None:
        return None
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise PlatformMisconfigured(
            f"cannot read YUXI_DASH_PLATFORM_TOKEN_FILE ({type(exc).__name__})"
        ) from None
    if not token:
        raise PlatformMisconfigured("YUXI_DASH_PLATFORM_TOKEN_FILE is empty")
    return token


def _base_url(settings: Settings) -> str:
    url = (settings.platform_url or "").strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PlatformMisconfigured("YUXI_DASH_PLATFORM_URL must be an http(s) URL with a host")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise PlatformMisconfigured(
            "YUXI_DASH_PLATFORM_URL must not hold a user, password, query or fragment "
            f"(the token goes in {_TOKEN_SETTINGS})"
        )
    return url


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _server_timing(response: httpx.Response) -> float | None:
    """The ``dur`` of the first Server-Timing metric, in ms (the platform's own handling time)."""
    for part in response.headers.get("Server-Timing", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == "dur":
            try:
                return float(value)
            except ValueError:
                return None
    return None


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())[:_MESSAGE_LIMIT]


def _error_detail(response: httpx.Response) -> tuple[str | None, str | None, bool]:
    """(code, message, is_contract) of an error answer ``{"detail": {"code", "message"}}``."""
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None, None, False
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, dict):
        code = detail.get("code")
        message = detail.get("message")
        return (
            _one_line(code) if isinstance(code, str) else None,
            _one_line(message) if isinstance(message, str) else None,
            True,
        )
    if isinstance(detail, str):
        return None, _one_line(detail), True
    return None, None, False


class PlatformClient:
    """A pooled httpx client on the platform's compress endpoint (thread-safe; one per process)."""

    def __init__(
        self,
        settings: Settings,
        *,
        backoff_seconds: float = 0.5,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = _base_url(settings)
        self.label = platform_label(self.base_url)
        self.read_timeout = settings.platform_read_timeout_seconds
        token = _read_token(settings)
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._client = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(
                connect=settings.platform_connect_timeout_seconds,
                read=settings.platform_read_timeout_seconds,
                write=settings.platform_connect_timeout_seconds,
                pool=settings.platform_connect_timeout_seconds,
            ),
            limits=httpx.Limits(max_connections=8, max_keepalive_connections=8),
            follow_redirects=False,
            transport=transport,
        )
        self._backoff = wait_exponential_jitter(
            initial=backoff_seconds, max=8.0, jitter=backoff_seconds
        )

    def __repr__(self) -> str:
        return f"PlatformClient({self.label})"

    def close(self) -> None:
        self._client.close()

    def _wait(self, state: RetryCallState) -> float:
        base = self._backoff(state)
        outcome = state.outcome
        error = outcome.exception() if outcome is not None else None
        asked = error.retry_after if isinstance(error, PlatformAttemptFailed) else None
        return min(max(base, asked or 0.0), MAX_WAIT_SECONDS)

    def compress(
        self,
        thread_id: str,
        *,
        expected_checkpoint_id: str | None,
        request_id: str | None = None,
        on_attempt: Callable[[Attempt], None] | None = None,
    ) -> dict[str, Any]:
        """The platform's 200 body for compressing ``thread_id``; a typed error otherwise."""
        request_id = request_id or uuid.uuid4().hex
        path = COMPRESS_PATH.format(thread_id=quote(thread_id, safe=""))
        body = {"expected_checkpoint_id": expected_checkpoint_id}
        numbers = iter(range(1, MAX_ATTEMPTS + 1))

        def attempt() -> dict[str, Any]:
            number = next(numbers)
            key = uuid.uuid4().hex
            headers = {"Idempotency-Key": key, "X-Request-Id": request_id}
            started = time.perf_counter()
            status: int | None = None
            platform_ms: float | None = None
            code = "failed"
            try:
                try:
                    response = self._client.post(path, json=body, headers=headers)
                except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
                    code = "platform_unavailable"
                    raise PlatformAttemptFailed(f"cannot connect ({type(exc).__name__})") from None
                except httpx.TimeoutException:
                    code = PlatformOutcomeUnknown.code
                    raise PlatformOutcomeUnknown(
                        f"the platform did not answer within {self.read_timeout:g} s"
                    ) from None
                except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
                    code = PlatformOutcomeUnknown.code
                    raise PlatformOutcomeUnknown(
                        f"the connection dropped after the call was sent ({type(exc).__name__})"
                    ) from None
                except httpx.HTTPError as exc:
                    raise PlatformMisconfigured(
                        f"YUXI_DASH_PLATFORM_URL cannot be called ({type(exc).__name__})"
                    ) from None
                status = response.status_code
                platform_ms = _server_timing(response)
                result = self._outcome(response, thread_id)
                code = str(result["status"])
                return result
            except PlatformAttemptFailed:
                code = PlatformUnavailable.code
                raise
            except YuxiDashError as exc:
                code = exc.code
                raise
            finally:
                if on_attempt is not None:
                    on_attempt(
                        Attempt(
                            number=number,
                            request_id=request_id,
                            idempotency_key=key,
                            http_status=status,
                            code=code,
                            latency_ms=round((time.perf_counter() - started) * 1000, 3),
                            platform_ms=platform_ms,
                        )
                    )

        retrying = Retrying(
            stop=stop_after_attempt(MAX_ATTEMPTS),
            retry=retry_if_exception_type(PlatformAttemptFailed),
            wait=self._wait,
            reraise=True,
        )
        try:
            return retrying(attempt)
        except PlatformAttemptFailed as exc:
            raise PlatformUnavailable(
                f"platform {self.label} is unavailable after {MAX_ATTEMPTS} attempts: {exc.reason}"
            ) from None

    def _outcome(self, response: httpx.Response, thread_id: str) -> dict[str, Any]:
        status = response.status_code
        if status == 200:
            try:
                body = response.json()
            except (json.JSONDecodeError, UnicodeDecodeError):
                body = None
            if not isinstance(body, dict) or body.get("status") not in ("completed", "no_op"):
                raise PlatformBadResponse(
                    f"platform {self.label} answered 200 without the compress result's JSON "
                    f"({_content_type(response)})"
                )
            return body
        if status in (502, 503):
            raise PlatformAttemptFailed(f"HTTP {status}", retry_after=_retry_after(response))
        if status == 504:
            raise PlatformOutcomeUnknown(
                f"platform {self.label} answered 504 (a gateway gave up waiting for it)"
            )
        if status in (401, 403):
            raise PlatformAuthFailed(
                f"platform {self.label} refused the token (HTTP {status}); check {_TOKEN_SETTINGS}"
            )
        code, message, is_contract = _error_detail(response)
        said = f": {message}" if message else ""
        if status == 404:
            raise ThreadNotFound(f"platform {self.label} has no thread {thread_id}{said}")
        if status == 409:
            if code == StaleState.code:
                raise StaleState(f"thread {thread_id} moved on at the platform{said}")
            raise ThreadBusy(f"thread {thread_id} is busy at the platform{said}")
        if status == 422 and is_contract:  # not FastAPI's own list of body errors
            raise CompressionUnsupported(
                f"platform {self.label} cannot compress thread {thread_id}{said}"
            )
        raise PlatformBadResponse(
            f"platform {self.label} answered HTTP {status} ({_content_type(response)})"
            + (said if is_contract else "")
        )


def _content_type(response: httpx.Response) -> str:
    return _one_line(response.headers.get("Content-Type", "no content type"))[:60]


_lock = threading.Lock()
_clients: dict[tuple[Any, ...], PlatformClient] = {}


def platform_client(settings: Settings) -> PlatformClient:
    """The process's client for the configured platform (one pool per URL, token and timeouts)."""
    token = settings.platform_token.get_secret_value() if settings.platform_token else None
    key = (
        settings.platform_url,
        token,
        settings.platform_token_file,
        settings.platform_connect_timeout_seconds,
        settings.platform_read_timeout_seconds,
    )
    with _lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = PlatformClient(settings)
        return client


def close_platform_clients() -> None:
    """Close every client this process opened (tests)."""
    with _lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        client.close()
