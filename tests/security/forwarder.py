"""A switchable TCP forwarder on loopback: one origin in front of several dashboard replicas.

A browser session (and Streamlit's auth cookie, which records the origin of
`redirect_uri`) belongs to one origin, `http://127.0.0.1:<port>`. Replicas
behind a load balancer share that origin; this stands in for the balancer:
every new connection goes to the current upstream, `switch()` moves new
connections to another replica and drops the open ones (as a failover would).
"""

from __future__ import annotations

import socket
import threading
from collections import Counter
from types import TracebackType


class Forwarder:
    """Forward 127.0.0.1:`port` to 127.0.0.1:`upstream`; `connections` counts per upstream."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.connections: Counter[int] = Counter()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, name="forwarder", daemon=True).start()

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def switch(self, upstream: int) -> None:
        """Send new connections to `upstream`; close every open one."""
        with self._lock:
            self.upstream = upstream
            sockets, self._open = self._open, set()
        for sock in sockets:
            _close(sock)

    def close(self) -> None:
        self._closed = True
        _close(self._listener)
        self.switch(self.upstream)

    def __enter__(self) -> Forwarder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                upstream = self.upstream
            try:
                server = socket.create_connection(("127.0.0.1", upstream), timeout=10)
            except OSError:
                _close(client)
                continue
            server.settimeout(None)
            with self._lock:
                self.connections[upstream] += 1
                self._open.update((client, server))
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        _close(source)
        _close(sink)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
