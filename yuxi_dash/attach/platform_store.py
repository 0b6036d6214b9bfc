"""The attached platform's checkpointer, read-only: its store, its label, its audited reads.

``YUXI_DASH_ATTACH_CHECKPOINTER`` names the platform's LangGraph PostgreSQL checkpointer. It
is a secret (it may carry a password): it is never logged, printed or stored; `source_label`
(host, port and database) is shown and stored instead. The platform owns those tables: its
store is opened without the saver's ``setup()`` (a read-only role could not run it), every
transaction on it is read-only, and statements have a timeout. Its blobs are read with the
allow-list of `store.checkpoint_serde`: a checkpoint naming another type is
`CheckpointRefused` for its thread, quarantined and audited (`attach.quarantine`) by the
scan, or by a page's or the CLI's read through `sources.thread_store`.

`audited_platform_store` is where an attached thread's state is read from for a page or
the CLI; `sources.thread_store` picks it for an attached thread and our own store for
every other one.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from yuxi_dash.attach.quarantine import refused_read
from yuxi_dash.errors import AttachUnavailable, CheckpointRefused, ThreadAttached
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.checkpointer import CheckpointStore, ThreadCheckpoint, open_postgres_store

STATEMENT_TIMEOUT_MS = 60_000  # one read of the platform's tables; the page and scan give up then
CONNECT_TIMEOUT_SECONDS = 10
_LABEL_LIMIT = 128  # scan_watermarks.source is VARCHAR(128)


def attach_conninfo(settings: Settings | None = None) -> str:
    """The platform's conninfo for psycopg (``postgresql://...``); AttachUnavailable when unset."""
    settings = settings or get_settings()
    secret = settings.attach_checkpointer
    value = secret.get_secret_value().strip() if secret is not None else ""
    if not value:
        raise AttachUnavailable("no platform is attached: YUXI_DASH_ATTACH_CHECKPOINTER is not set")
    for prefix in ("postgresql+psycopg://", "postgresql+psycopg2://", "postgres://"):
        if value.startswith(prefix):
            value = "postgresql://" + value[len(prefix) :]
    try:
        conninfo_to_dict(value)
    except psycopg.ProgrammingError:
        raise AttachUnavailable(
            "YUXI_DASH_ATTACH_CHECKPOINTER is not a PostgreSQL connection string"
        ) from None
    return value


def source_label(conninfo: str) -> str:
    """A name for the platform that holds no secret: ``host:port/database``."""
    parts = conninfo_to_dict(conninfo)
    host = str(parts.get("host") or parts.get("hostaddr") or "localhost")
    port = str(parts.get("port") or "5432")
    database = str(parts.get("dbname") or parts.get("user") or "postgres")
    return f"{host}:{port}/{database}"[:_LABEL_LIMIT]


def scrub(text: str, conninfo: str) -> str:
    """``text`` without the conninfo or its password, on one line (for errors and logs)."""
    password = str(conninfo_to_dict(conninfo).get("password") or "")
    line = " ".join(str(text).split())
    for secret in (conninfo, password):
        if secret:
            line = line.replace(secret, "***")
    return line[:200]


def unavailable(exc: BaseException, conninfo: str) -> AttachUnavailable:
    """The platform failing as one typed error naming its label, never its URL or password."""
    reason = scrub(str(exc).strip().splitlines()[0] if str(exc).strip() else "", conninfo)
    detail = f"{type(exc).__name__}: {reason}" if reason else type(exc).__name__
    return AttachUnavailable(f"attached checkpointer {source_label(conninfo)} failed ({detail})")


def connect(conninfo: str) -> psycopg.Connection:
    """One read-only connection to the platform with the statement timeout (for the scan query)."""
    try:
        return psycopg.connect(
            conninfo,
            autocommit=True,
            connect_timeout=CONNECT_TIMEOUT_SECONDS,
            options=(
                f"-c default_transaction_read_only=on -c statement_timeout={STATEMENT_TIMEOUT_MS}"
            ),
        )
    except psycopg.Error as exc:
        raise unavailable(exc, conninfo) from None


def refused(thread_id: str, exc: CheckpointRefused) -> CheckpointRefused:
    """The refusal naming the platform thread it is for."""
    return CheckpointRefused(f"thread {thread_id}: {exc.message}", **exc.detail)


class PlatformStore(CheckpointStore):
    """A read-only store on the platform: its failures are AttachUnavailable, writes refused."""

    def __init__(self, conninfo: str) -> None:
        inner = open_postgres_store(
            conninfo, setup=False, read_only=True, statement_timeout_ms=STATEMENT_TIMEOUT_MS
        )
        super().__init__(inner.saver, close=inner.close)
        self._conninfo = conninfo

    def latest(self, thread_id: str) -> ThreadCheckpoint | None:
        try:
            return super().latest(thread_id)
        except psycopg.Error as exc:
            raise unavailable(exc, self._conninfo) from None
        except CheckpointRefused as exc:
            raise refused(thread_id, exc) from None

    def history(
        self, thread_id: str, *, limit: int | None = None, before: str | None = None
    ) -> Iterator[ThreadCheckpoint]:
        try:
            yield from super().history(thread_id, limit=limit, before=before)
        except psycopg.Error as exc:
            raise unavailable(exc, self._conninfo) from None
        except CheckpointRefused as exc:
            raise refused(thread_id, exc) from None

    def fetch(
        self,
        sql: str,
        params: Mapping[str, Any],
        *,
        prepare: bool | None = None,
        binary: bool = False,
    ) -> list[dict[str, Any]]:
        """Rows of one read-only query on the platform (the store's pool, its timeout).

        ``prepare=False`` plans it for its parameters every time (never a
        server-side prepared statement with a generic plan). ``binary=True``
        has the server send the rows in binary (``bytea`` as its bytes, not
        twice as many hex digits).
        """
        pool = getattr(self.saver, "conn", None)
        if not isinstance(pool, ConnectionPool):  # pragma: no cover - open_postgres_store pools
            raise AttachUnavailable("the attached checkpointer store has no connection pool")
        try:
            with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cursor:
                cursor.execute(sql, params, prepare=prepare, binary=binary)
                return list(cursor.fetchall())
        except psycopg.Error as exc:
            raise unavailable(exc, self._conninfo) from None

    def write(
        self,
        thread_id: str,
        update: Mapping[str, Any],
        *,
        expected_checkpoint_id: str | None,
    ) -> ThreadCheckpoint:
        raise ThreadAttached(
            f"thread {thread_id} belongs to the attached platform, which owns its state; "
            "nothing is written there from here"
        )


_lock = threading.Lock()
_stores: dict[str, CheckpointStore] = {}


def platform_store(settings: Settings | None = None) -> CheckpointStore:
    """The process's read-only store on the attached platform's checkpointer (opened once)."""
    conninfo = attach_conninfo(settings)
    with _lock:
        store = _stores.get(conninfo)
        if store is None:
            store = _stores[conninfo] = PlatformStore(conninfo)
        return store


def opened_platform_store(conninfo: str) -> PlatformStore | None:
    """The store `platform_store` already opened on this platform in this process, else None.

    The scan asks its window query on that store's pool (no new connection per
    scan of a long-running loop); before the first scan it connects once instead.
    """
    with _lock:
        store = _stores.get(conninfo)
    return store if isinstance(store, PlatformStore) else None


def close_platform_stores() -> None:
    """Close every platform store this process opened (tests, and at exit)."""
    with _lock:
        stores = list(_stores.values())
        _stores.clear()
    for store in stores:
        store.close()


atexit.register(close_platform_stores)


class AuditedReads(CheckpointStore):
    """The platform store for a page's or the CLI's read: a refused checkpoint is quarantined."""

    def __init__(
        self, store: CheckpointStore, settings: Settings | None, checkpoint_id: str | None
    ) -> None:
        self.saver = store.saver  # the same saver and graph: nothing compiled again
        self.graph = store.graph
        self._close = None
        self._store = store
        self._settings = settings
        self._checkpoint_id = checkpoint_id  # the one we projected (None: never)

    def _refused(self, thread_id: str, exc: CheckpointRefused) -> None:
        source = source_label(attach_conninfo(self._settings))
        refused_read(self._settings, source, thread_id, self._checkpoint_id, exc)

    def latest(self, thread_id: str) -> ThreadCheckpoint | None:
        try:
            return self._store.latest(thread_id)
        except CheckpointRefused as exc:
            self._refused(thread_id, exc)
            raise

    def history(
        self, thread_id: str, *, limit: int | None = None, before: str | None = None
    ) -> Iterator[ThreadCheckpoint]:
        try:
            yield from self._store.history(thread_id, limit=limit, before=before)
        except CheckpointRefused as exc:
            self._refused(thread_id, exc)
            raise

    def write(
        self, thread_id: str, update: Mapping[str, Any], *, expected_checkpoint_id: str | None
    ) -> ThreadCheckpoint:
        return self._store.write(thread_id, update, expected_checkpoint_id=expected_checkpoint_id)


def audited_platform_store(
    thread_id: str, checkpoint_id: str | None, settings: Settings | None = None
) -> CheckpointStore:
    """The platform's store for reading an attached thread's state (`AuditedReads`);
    ``checkpoint_id`` is the one we projected it up to (None: never).

    A platform checkpoint outside the allow-list is `CheckpointRefused` there,
    audited and the thread quarantined (`attach.quarantine`).
    """
    try:
        return AuditedReads(platform_store(settings), settings, checkpoint_id)
    except AttachUnavailable as exc:
        raise AttachUnavailable(
            f"thread {thread_id} belongs to the attached platform: {exc.message}"
        ) from None
