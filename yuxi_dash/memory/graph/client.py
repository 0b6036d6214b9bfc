"""The graph driver layer: every Cypher statement yuxi-dash sends goes through here.

- The user's graph is opened by name for every call (graphiti's shared driver rebinds on
  writes), so one user's view can never read another's.
- Reads use GRAPH.RO_QUERY (`ro_query`); every statement is parameterized and carries a
  per-query timeout (`settings.falkordb_query_timeout_ms`).
- "Max pending queries exceeded" is retried with ``base*2^attempt + uniform(0, base)`` (each
  wait capped at 2 s) up to the configured attempts; every other error fails at once. The
  final-failure log names the error, never the query parameters.
- A server that cannot be reached becomes one `MemoryUnavailable` line.

`queries_run` counts statements sent, so tests can prove a gated-off view sent none.
`get_client` hands out the process's client for a server and these settings; the resource
owner (`yuxi_dash.resources`) holds it and closes it at exit, or when `stop_server` stops it.
"""

from __future__ import annotations

import logging
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import redis
from falkordb import FalkorDB

from yuxi_dash.errors import MemoryQueryTimeout, MemoryUnavailable
from yuxi_dash.memory.graph.groups import GROUP_PREFIX
from yuxi_dash.memory.graph.server import ServerHandle, ensure_server
from yuxi_dash.resources import GRAPH_CHANGES, GRAPH_CLIENTS, get_resources, quiet_graphiti
from yuxi_dash.settings import Settings, get_settings

log = logging.getLogger("yuxi_dash.memory.graph.client")
_GLOB_SPECIAL = re.compile(r"([*?\[\]\\^])")  # special in a Redis MATCH pattern

BACKPRESSURE_MESSAGE = "Max pending queries exceeded"
MAX_BACKOFF_SECONDS = 2.0
UNBOUNDED_TIMEOUT_MS = 30 * 60 * 1000  # seeding and index rebuilds on big graphs
T = TypeVar("T")

Row = dict[str, Any]


def error_text(exc: BaseException) -> str:
    """The server's message (redis-py 8 may render ResponseError as 'server:ResponseError')."""
    if exc.args and isinstance(exc.args[0], str):
        return exc.args[0]
    return str(exc)


def is_backpressure(exc: BaseException) -> bool:
    return isinstance(exc, redis.ResponseError) and BACKPRESSURE_MESSAGE in error_text(exc)


def backoff_seconds(attempt: int, base: float, uniform: Callable[[float, float], float]) -> float:
    """Wait before retry number `attempt + 1` (attempt counts from 0), at most 2 s."""
    return min(MAX_BACKOFF_SECONDS, base * (2**attempt) + uniform(0.0, base))


def call_with_backpressure(
    call: Callable[[], T],
    *,
    max_attempts: int,
    base: float,
    sleep: Callable[[float], None] = time.sleep,
    uniform: Callable[[float, float], float] = random.uniform,
    what: str = "graph query",
) -> T:
    """Run `call`, retrying only FalkorDB's backpressure error."""
    attempt = 0
    while True:
        try:
            return call()
        except redis.ResponseError as exc:
            if not is_backpressure(exc):
                raise
            if attempt + 1 >= max_attempts:
                log.warning(
                    "%s failed after %d attempt(s): %s", what, attempt + 1, BACKPRESSURE_MESSAGE
                )
                raise
            sleep(backoff_seconds(attempt, base, uniform))
            attempt += 1


@dataclass
class QueryStats:
    """Counters for tests and the bench."""

    queries_run: int = 0
    retries: int = 0
    statements: list[str] = field(default_factory=list)


class GraphClient:
    """A FalkorDB connection plus the rules above; cheap to share across threads."""

    def __init__(
        self,
        db: FalkorDB,
        settings: Settings,
        *,
        handle: ServerHandle | None = None,
        sleep: Callable[[float], None] = time.sleep,
        uniform: Callable[[float, float], float] = random.uniform,
        record_statements: bool = False,
    ) -> None:
        self.db = db
        self.settings = settings
        self.handle = handle
        self._sleep = sleep
        self._uniform = uniform
        self._record = record_statements
        self._lock = threading.Lock()
        self.stats = QueryStats()

    @property
    def queries_run(self) -> int:
        return self.stats.queries_run

    # --- the one path every statement takes -------------------------------
    def _run(
        self,
        group_id: str,
        cypher: str,
        params: dict[str, Any] | None,
        *,
        read_only: bool,
        timeout_ms: int | None,
    ) -> tuple[list[str], list[list[Any]]]:
        if not group_id.startswith(GROUP_PREFIX):
            raise ValueError("graph names come from derive_group_id")
        graph = self.db.select_graph(group_id)
        timeout = self.settings.falkordb_query_timeout_ms if timeout_ms is None else timeout_ms
        timeout = timeout or UNBOUNDED_TIMEOUT_MS  # 0 = "no limit": explicit, above any default
        with self._lock:
            self.stats.queries_run += 1
            if self._record:
                self.stats.statements.append(cypher)

        def once() -> Any:
            if read_only:
                return graph.ro_query(cypher, params or None, timeout=timeout)
            return graph.query(cypher, params or None, timeout=timeout)

        def counted() -> Any:
            try:
                return once()
            except redis.ResponseError as exc:
                if is_backpressure(exc):
                    with self._lock:
                        self.stats.retries += 1
                raise

        try:
            result = call_with_backpressure(
                counted,
                max_attempts=self.settings.falkordb_query_max_attempts,
                base=self.settings.falkordb_query_backoff_base,
                sleep=self._sleep,
                uniform=self._uniform,
            )
        except redis.ResponseError as exc:
            text = error_text(exc)
            if "timed out" in text.lower():
                log.warning("graph query timed out after %s ms", timeout)
                raise MemoryQueryTimeout(
                    f"a memory query took longer than {timeout} ms and was stopped"
                ) from exc
            raise
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            raise MemoryUnavailable(
                f"FalkorDB is unavailable ({type(exc).__name__}); memory views are off until it is back"
            ) from exc
        header = [column[1] for column in result.header] if result.header else []
        return header, result.result_set

    def ro_rows(
        self,
        group_id: str,
        cypher: str,
        params: dict[str, Any] | None = None,
        *,
        timeout_ms: int | None = None,
    ) -> list[Row]:
        """A read-only query on the user's graph, as a list of {column: value}."""
        return _as_rows(*self._run(group_id, cypher, params, read_only=True, timeout_ms=timeout_ms))

    def ro_value(
        self, group_id: str, cypher: str, params: dict[str, Any] | None = None, **kw: Any
    ) -> Any:
        """The single value of a one-row, one-column read (None when no row)."""
        header, rows = self._run(group_id, cypher, params, read_only=True, **_timeout(kw))
        return rows[0][0] if rows else None

    def write(
        self,
        group_id: str,
        cypher: str,
        params: dict[str, Any] | None = None,
        *,
        timeout_ms: int | None = None,
    ) -> list[Row]:
        """A write statement (seeding, index repair); same retry and parameter rules."""
        return _as_rows(
            *self._run(group_id, cypher, params, read_only=False, timeout_ms=timeout_ms)
        )

    def explain(self, group_id: str, cypher: str, params: dict[str, Any] | None = None) -> str:
        """GRAPH.EXPLAIN of a statement (the bench prints these)."""
        return str(self.db.select_graph(group_id).explain(cypher, params))

    # --- keys and graphs ----------------------------------------------------
    def graph_exists(self, group_id: str) -> bool:
        try:
            return bool(self.db.connection.exists(group_id))
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            raise MemoryUnavailable(f"FalkorDB is unavailable ({type(exc).__name__})") from exc

    def list_graphs(self) -> list[str]:
        try:
            return sorted(self.db.list_graphs())
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            raise MemoryUnavailable(f"FalkorDB is unavailable ({type(exc).__name__})") from exc

    def delete_graph(self, group_id: str) -> None:
        if self.graph_exists(group_id):
            self.db.select_graph(group_id).delete()

    def close(self) -> None:
        try:
            self.db.connection.close()
            self.db.connection.connection_pool.disconnect()
        except Exception:  # noqa: BLE001 - closing must never raise
            log.debug("closing a FalkorDB client failed", exc_info=True)


def _as_rows(header: list[str], rows: list[list[Any]]) -> list[Row]:
    """A result set as a list of {column: value}."""
    return [dict(zip(header, row, strict=False)) for row in rows]


def _timeout(kw: dict[str, Any]) -> dict[str, Any]:
    return {"timeout_ms": kw.get("timeout_ms")}


def _connect(handle: ServerHandle) -> FalkorDB:
    kwargs = dict(handle.redis_kwargs())
    kwargs["socket_timeout"] = 60
    kwargs["socket_connect_timeout"] = 3
    return FalkorDB(**kwargs)


def _client_key(handle: ServerHandle, settings: Settings) -> tuple[Any, ...]:
    """Which server, and the settings a client applies to every statement."""
    return (
        handle.kind,
        str(handle.unix_socket),
        handle.host,
        handle.port,
        handle.pid,
        settings.falkordb_query_timeout_ms,
        settings.falkordb_query_max_attempts,
        settings.falkordb_query_backoff_base,
    )


def get_client(settings: Settings | None = None) -> GraphClient:
    """The process's client for the configured server (started lazily when embedded)."""
    settings = settings or get_settings()
    handle = ensure_server(settings)

    def connect() -> GraphClient:
        quiet_graphiti()
        try:
            db = _connect(handle)
            db.connection.ping()
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            raise MemoryUnavailable(
                f"cannot reach {handle.describe()} ({type(exc).__name__})"
            ) from exc
        return GraphClient(db, settings, handle=handle)

    return get_resources().acquire(
        GRAPH_CLIENTS, _client_key(handle, settings), connect, GraphClient.close
    )


def close_clients() -> None:
    """Close every client and graph change watcher this process holds (before the server is
    stopped; tests)."""
    get_resources().close_kind(GRAPH_CHANGES)
    get_resources().close_kind(GRAPH_CLIENTS)


def glob_escape(text: str) -> str:
    """`text` as a literal in a Redis MATCH pattern."""
    return _GLOB_SPECIAL.sub(r"\\\1", text)


def hits_connection(settings: Settings | None = None) -> redis.Redis:
    """Where ratification hit counters live: YUXI_DASH_REDIS_URL, else the FalkorDB server."""
    settings = settings or get_settings()
    # retry=None: redis-py 8 would otherwise re-send a timed-out INCR and count a hit twice.
    try:
        if settings.redis_url:
            conn = redis.Redis.from_url(settings.redis_url, socket_timeout=5, retry=None)
        else:
            handle = ensure_server(settings)
            conn = redis.Redis(**handle.redis_kwargs(), socket_timeout=5, retry=None)  # type: ignore[arg-type]
        conn.ping()
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        raise MemoryUnavailable(
            f"the ratification hit counters are unavailable ({type(exc).__name__})"
        ) from exc
    return conn
