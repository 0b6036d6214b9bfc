"""The attached platform's compress endpoint over HTTP: one call, its outcome as our typed errors.

`PlatformClient.compress(thread_id, expected_checkpoint_id=...)` sends ``POST {URL}/api/chat/
thread/{thread_id}/compress`` through `outbound.post`: one total deadline for the whole call,
every attempt and wait included (``YUXI_DASH_PLATFORM_DEADLINE_SECONDS``), a 1 MiB answer cap,
``Authorization: Bearer <token>``, one ``X-Request-Id``, a fresh ``Idempotency-Key`` per attempt.
- 200 with the contract's JSON is the result (numbers bounded, text cut). A 200 we cannot read
  is `CompressedNotProjected`: the platform may have compressed; never compress again.
- 404 ThreadNotFound; 409 ThreadBusy (StaleState); 422 CompressionUnsupported; 401/403
  PlatformAuthFailed; any other answer PlatformBadResponse. None of these is retried.
- 502/503, or a call that never reached the platform: retried twice (backoff with jitter, at
  least ``Retry-After``, each wait cut to the time left), then PlatformUnavailable.
- The deadline or a dropped connection after sending, and 504: PlatformOutcomeUnknown, never re-sent.
Each attempt is announced before it is sent and reported when it ends (for the audit). Platform
text in a message is redacted and escaped (`outside_text`); the token is in no message or repr.
"""

from __future__ import annotations

import ipaddress
import json
import math
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote, urlsplit

from yuxi_dash import outbound
from yuxi_dash.errors import (
    CompressedNotProjected,
    CompressionUnsupported,
    OutboundFailed,
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
from yuxi_dash.outside_text import safe_line, secrets_of
from yuxi_dash.settings import Settings

COMPRESS_PATH = "/api/chat/thread/{thread_id}/compress"
MAX_ATTEMPTS = 3  # the first call and at most two retries
MAX_WAIT_SECONDS = 30.0  # a Retry-After longer than this is cut to it
MAX_BACKOFF_SECONDS = 8.0
MIN_ATTEMPT_SECONDS = 0.05  # less time left than this: no further attempt
MAX_COUNT = 10**12  # a token or message count past this is not one
_TEXT_LIMIT = 500
_TOKEN_SETTINGS = "YUXI_DASH_PLATFORM_TOKEN or YUXI_DASH_PLATFORM_TOKEN_FILE"
_DEADLINE_SETTING = "YUXI_DASH_PLATFORM_DEADLINE_SECONDS"
_INSECURE_SETTING = "YUXI_DASH_PLATFORM_ALLOW_INSECURE_HTTP"
RESCAN = "do not compress again; re-scan (`yuxi-dash attach scan`) to see what it did"

# before_attempt(number, request_id, idempotency_key): called before an attempt is sent
BeforeAttempt = Callable[[int, str, str], None]


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
        token = path.read_text(encoding="utf-8-sig").strip()  # a BOM is not part of it
    except (OSError, UnicodeDecodeError) as exc:
        raise PlatformMisconfigured(
            f"cannot read YUXI_DASH_PLATFORM_TOKEN_FILE ({type(exc).__name__})"
        ) from None
    if not token:
        raise PlatformMisconfigured("YUXI_DASH_PLATFORM_TOKEN_FILE is empty")
    if not token.isascii() or not token.isprintable():
        raise PlatformMisconfigured(
            "YUXI_DASH_PLATFORM_TOKEN_FILE holds characters a header cannot carry"
        )
    return token


def is_loopback(host: str) -> bool:
    """True for localhost, 127.0.0.0/8 and ::1 (an IPv4-mapped one too)."""
    name = host.strip().rstrip(".").lower()
    if name == "localhost":  # a name under .localhost is left to a resolver: not trusted
        return True
    try:
        address = ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


def _base_url(settings: Settings) -> str:
    url = (settings.platform_url or "").strip().rstrip("/")
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        raise PlatformMisconfigured("YUXI_DASH_PLATFORM_URL is not a URL") from None
    if parts.scheme not in ("http", "https") or not host:
        raise PlatformMisconfigured("YUXI_DASH_PLATFORM_URL must be an http(s) URL with a host")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise PlatformMisconfigured(
            "YUXI_DASH_PLATFORM_URL must not hold a user, password, query or fragment "
            f"(the token goes in {_TOKEN_SETTINGS})"
        )
    if (
        parts.scheme == "http"
        and not is_loopback(host)
        and not settings.platform_allow_insecure_http
    ):
        raise PlatformMisconfigured(
            f"YUXI_DASH_PLATFORM_URL is http:// on {safe_line(host, limit=100)}, which is not "
            "loopback: the token would cross the network unencrypted. Use https://, or set "
            f"{_INSECURE_SETTING}=true to accept that"
        )
    return url


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("Retry-After")
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


def _server_timing(headers: Mapping[str, str]) -> float | None:
    """The ``dur`` of the first Server-Timing metric, in ms (the platform's own handling time)."""
    for part in headers.get("Server-Timing", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == "dur":
            try:
                ms = float(value)
            except ValueError:
                return None
            return ms if math.isfinite(ms) and ms >= 0 else None
    return None


def _count(value: Any) -> int:
    """A count from the platform: a plain int in 0..MAX_COUNT, else 0 (not said)."""
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT
    return value if ok else 0


class PlatformClient:
    """The configured platform's compress endpoint (thread-safe; each call its own connection)."""

    def __init__(self, settings: Settings, *, backoff_seconds: float = 0.5) -> None:
        self.base_url = _base_url(settings)
        self.label = platform_label(self.base_url)
        self.deadline = settings.platform_deadline_seconds
        self.connect_timeout = settings.platform_connect_timeout_seconds
        token = _read_token(settings)
        self._headers = {"Accept": "application/json", "Content-Type": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._secrets = tuple({*secrets_of(settings), *([token] if token else [])})
        self._backoff = backoff_seconds

    def __repr__(self) -> str:
        return f"PlatformClient({self.label})"

    def close(self) -> None:
        """Nothing held open: each call opens and closes its own connection."""

    def said(self, text: object, limit: int = 300) -> str:
        """Text the platform sent, as we may show it: redacted, escaped, cut."""
        return safe_line(text, secrets=self._secrets, limit=limit)

    def _wait(self, retry: int, failure: PlatformAttemptFailed | None) -> float:
        base = min(self._backoff * 2 ** (retry - 1), MAX_BACKOFF_SECONDS)
        base += random.uniform(0, self._backoff)  # noqa: S311 - jitter, not a secret
        asked = failure.retry_after if failure is not None else None
        return min(max(base, asked or 0.0), MAX_WAIT_SECONDS)

    def compress(
        self,
        thread_id: str,
        *,
        expected_checkpoint_id: str | None,
        request_id: str | None = None,
        before_attempt: BeforeAttempt | None = None,
        on_attempt: Callable[[Attempt], None] | None = None,
    ) -> dict[str, Any]:
        """The platform's 200 body for compressing ``thread_id`` (cleaned); a typed error else.

        The body's keys: status, before_tokens, after_tokens, compressed_messages, file_path,
        reason, checkpoint_id.
        """
        request_id = request_id or uuid.uuid4().hex
        url = self.base_url + COMPRESS_PATH.format(thread_id=quote(thread_id, safe=""))
        content = json.dumps({"expected_checkpoint_id": expected_checkpoint_id}).encode()
        ends_at = time.monotonic() + self.deadline
        failure: PlatformAttemptFailed | None = None
        made = 0
        for number in range(1, MAX_ATTEMPTS + 1):
            if number > 1:
                time.sleep(
                    max(0.0, min(self._wait(number - 1, failure), ends_at - time.monotonic()))
                )
                if ends_at - time.monotonic() < MIN_ATTEMPT_SECONDS:
                    break
            made = number
            try:
                return self._attempt(
                    number, url, content, thread_id, request_id, ends_at, before_attempt, on_attempt
                )
            except PlatformAttemptFailed as exc:
                failure = exc
        reason = failure.reason if failure is not None else "no attempt"
        within = (
            f" within the {self.deadline:g} s deadline ({_DEADLINE_SETTING})"
            if made < MAX_ATTEMPTS
            else ""
        )
        raise PlatformUnavailable(
            f"platform {self.label} is unavailable after {made} attempt"
            f"{'s' if made != 1 else ''}{within}: {reason}"
        )

    def _attempt(
        self,
        number: int,
        url: str,
        content: bytes,
        thread_id: str,
        request_id: str,
        ends_at: float,
        before_attempt: BeforeAttempt | None,
        on_attempt: Callable[[Attempt], None] | None,
    ) -> dict[str, Any]:
        key = uuid.uuid4().hex
        if before_attempt is not None:
            before_attempt(number, request_id, key)
        started = time.perf_counter()
        status: int | None = None
        platform_ms: float | None = None
        code = "failed"
        try:
            try:
                answer = outbound.post(
                    url,
                    content=content,
                    headers={**self._headers, "Idempotency-Key": key, "X-Request-Id": request_id},
                    deadline_seconds=max(ends_at - time.monotonic(), MIN_ATTEMPT_SECONDS),
                    connect_timeout_seconds=self.connect_timeout,
                )
            except OutboundFailed as exc:
                status = exc.http_status
                raise self._failed(exc, thread_id) from None
            status = answer.status
            platform_ms = _server_timing(answer.headers)
            result = self._outcome(answer, thread_id)
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

    def _failed(self, exc: OutboundFailed, thread_id: str) -> YuxiDashError:
        """Our typed error for a call `outbound` could not finish."""
        reason = self.said(exc.reason)
        not_sent = exc.kind in (outbound.DEADLINE, outbound.DROPPED) and not exc.sent
        if exc.kind == outbound.CONNECT or not_sent:
            return PlatformAttemptFailed(reason)
        if exc.http_status == 200:  # the platform said it did it: its answer is what failed
            return self._unreadable(thread_id, reason)
        if exc.kind == outbound.DEADLINE:
            return PlatformOutcomeUnknown(
                f"platform {self.label} gave no whole answer within the {self.deadline:g} s "
                f"deadline ({_DEADLINE_SETTING})"
            )
        if exc.http_status is None and exc.sent:  # dropped, or an answer we cannot frame
            return PlatformOutcomeUnknown(
                f"the connection to platform {self.label} failed after the call was sent ({reason})"
            )
        if exc.http_status is None:
            return PlatformMisconfigured(f"YUXI_DASH_PLATFORM_URL cannot be called ({reason})")
        return PlatformBadResponse(
            f"platform {self.label} answered HTTP {exc.http_status}, unread ({reason})"
        )

    def _unreadable(self, thread_id: str, reason: str) -> CompressedNotProjected:
        return CompressedNotProjected(
            f"platform {self.label} answered 200 but its answer could not be read ({reason}): "
            f"it may have compressed thread {thread_id}; {RESCAN}",
            unreadable=True,
        )

    def _outcome(self, answer: outbound.Answer, thread_id: str) -> dict[str, Any]:
        status = answer.status
        if status == 200:
            try:
                body = outbound.json_body(answer)
            except OutboundFailed as exc:
                raise self._unreadable(thread_id, self.said(exc.reason)) from None
            if not isinstance(body, dict):
                raise self._unreadable(thread_id, "not a JSON object")
            if body.get("status") not in ("completed", "no_op"):
                raise self._unreadable(thread_id, "its status is neither completed nor no_op")
            return self._result(body)
        if status in (502, 503):
            raise PlatformAttemptFailed(f"HTTP {status}", retry_after=_retry_after(answer.headers))
        if status == 504:
            raise PlatformOutcomeUnknown(
                f"platform {self.label} answered 504 (a gateway gave up waiting for it)"
            )
        if status in (401, 403):
            raise PlatformAuthFailed(
                f"platform {self.label} refused the token (HTTP {status}); check {_TOKEN_SETTINGS}"
            )
        code, message, is_contract = self._error_detail(answer)
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
            f"platform {self.label} answered HTTP {status} ({self._content_type(answer)})"
            + (said if is_contract else "")
        )

    def _result(self, body: dict[str, Any]) -> dict[str, Any]:
        """The 200 body's fields, each checked: counts bounded, text redacted, escaped, cut."""

        def text(key: str, limit: int = _TEXT_LIMIT) -> str | None:
            value = body.get(key)
            if not isinstance(value, str) or not value.strip():
                return None
            return self.said(value.strip(), limit=limit)

        return {
            "status": str(body["status"]),
            "before_tokens": _count(body.get("before_tokens")),
            "after_tokens": _count(body.get("after_tokens")),
            "compressed_messages": _count(body.get("compressed_messages")),
            "file_path": text("file_path"),
            "reason": text("reason"),
            "checkpoint_id": text("checkpoint_id", 128),
        }

    def _error_detail(self, answer: outbound.Answer) -> tuple[str | None, str | None, bool]:
        """(code, message, is_contract) of an error answer ``{"detail": {"code", "message"}}``."""
        try:
            body = outbound.json_body(answer)
        except OutboundFailed:
            return None, None, False
        detail = body.get("detail") if isinstance(body, dict) else None
        if isinstance(detail, dict):
            code = detail.get("code")
            message = detail.get("message")
            return (
                code[:64] if isinstance(code, str) else None,
                self.said(message.strip())
                if isinstance(message, str) and message.strip()
                else None,
                True,
            )
        if isinstance(detail, str) and detail.strip():
            return None, self.said(detail.strip()), True
        return None, None, False

    def _content_type(self, answer: outbound.Answer) -> str:
        return self.said(answer.headers.get("Content-Type", "no content type"), limit=60)


_lock = threading.Lock()
_clients: dict[tuple[Any, ...], PlatformClient] = {}


def platform_client(settings: Settings) -> PlatformClient:
    """The process's client for the configured platform (one per URL, token, secrets, limits)."""
    token = settings.platform_token.get_secret_value() if settings.platform_token else None
    key = (
        settings.platform_url,
        token,
        settings.platform_token_file,
        settings.platform_connect_timeout_seconds,
        settings.platform_deadline_seconds,
        settings.platform_allow_insecure_http,
        secrets_of(settings),
    )
    with _lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = PlatformClient(settings)
        return client


def close_platform_clients() -> None:
    """Forget every client this process made (tests change the settings between calls)."""
    with _lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        client.close()
