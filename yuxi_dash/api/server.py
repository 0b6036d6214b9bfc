"""How `yuxi-dash api serve` runs uvicorn: `server_config()` and the header-read timeout.

uvicorn has no timeout for reading a request's headers (`timeout_keep_alive`
starts only after a response), so a client sending a header byte now and then
held a connection forever (a slowloris: HAZARDS item 18).
`HeaderTimeoutProtocol` is uvicorn's h11 protocol plus one timer: armed when
a connection opens and when a response ends (the next request may start),
cancelled once a request's headers are complete. When it fires first, the
connection is closed. `server_config` forces that protocol (never httptools),
caps open connections (`limit_concurrency`, beyond it a request is 503), the
idle keep-alive wait and the size of an unfinished header block.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from yuxi_dash.settings import Settings

KEEP_ALIVE_SECONDS = 5  # an idle connection between requests (uvicorn's default)
MAX_HEADER_BYTES = 16 * 1024  # an unfinished request line plus headers (h11's default: 16 KiB)


class HeaderTimeoutProtocol(H11Protocol):
    """uvicorn's h11 protocol that closes a connection whose request headers come too slowly."""

    header_timeout_seconds: float = 10.0  # set per server by `protocol_class`
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:  # a request's headers are in (or it ended)
            self._cancel_header_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.conn.their_state is h11.IDLE:  # waiting for the next request's headers
            self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)

    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        if not self.transport.is_closing():
            self._header_timer = self.loop.call_later(
                self.header_timeout_seconds, self._header_timeout
            )

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_timeout(self) -> None:
        self._header_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


def protocol_class(header_timeout_seconds: float) -> type[HeaderTimeoutProtocol]:
    """`HeaderTimeoutProtocol` with this timeout (uvicorn builds the protocol from a class)."""
    return type(
        "HeaderTimeoutProtocol",
        (HeaderTimeoutProtocol,),
        {"header_timeout_seconds": float(header_timeout_seconds)},
    )


def server_config(app: Any, *, host: str, port: int, settings: Settings) -> uvicorn.Config:
    """The uvicorn config of the API: our h11 protocol, the limits, no access log."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol_class(settings.api_header_timeout_seconds),
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        limit_concurrency=settings.api_max_connections,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        log_level="warning",
        access_log=False,  # a path names a thread
        server_header=False,
    )
