"""Engines, sessions and migrations for the relational store.

One engine per database URL and lock timeout (owned by `yuxi_dash.resources`,
created on first use and disposed at exit; `pool_pre_ping` so a restarted server is
reconnected; `hide_parameters` so a database error that reaches a log never
carries a statement's parameters, which hold thread ids, user ids and content).
SQLite gets foreign keys, WAL and a busy timeout on every
connection, and takes its transactions from us (`BEGIN` / `BEGIN IMMEDIATE`)
rather than from the driver, so a writer can take the database write lock up
front (`locked_session`). `get_engine` applies pending Alembic migrations once
per process per URL; `upgrade(url)` / `downgrade(url, rev)` do it explicitly.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

from yuxi_dash.resources import SQL_ENGINES, get_resources
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.checkpointer import close_checkpoint_stores, open_checkpoint_store

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
SQLITE_BEGIN_OPTION = "yuxi_sqlite_begin"  # execution option: "IMMEDIATE" takes the write lock
SQLITE_BUSY_OPTION = "yuxi_sqlite_busy_ms"  # execution option: busy timeout for this transaction
_MAX_CACHED_ENGINES = 16
_lock = threading.RLock()  # guards `_migrated`
_migrated: set[str] = set()


def normalize_url(url: str) -> str:
    """Use psycopg 3 for bare `postgresql://` / `postgres://` URLs."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    return url


def is_sqlite(url_or_engine: str | sa.Engine | sa.Connection | Session) -> bool:
    if isinstance(url_or_engine, Session):
        bind = url_or_engine.get_bind()
        return bind.dialect.name == "sqlite"
    if isinstance(url_or_engine, sa.Engine | sa.Connection):
        return url_or_engine.dialect.name == "sqlite"
    return sa.engine.make_url(normalize_url(url_or_engine)).get_backend_name() == "sqlite"


CONNECT_TIMEOUT = 10  # seconds to open a PostgreSQL connection, unless the URL says otherwise


def create_engine_for_url(url: str, *, busy_timeout_seconds: float = 5.0) -> sa.Engine:
    """A new engine (not cached, no migrations): the SQLite pragmas and begin handling included."""
    url = normalize_url(url)
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() != "sqlite":
        # a server that takes the connection and never answers must not hold a page: a deadline
        waits = {} if "connect_timeout" in parsed.query else {"connect_timeout": CONNECT_TIMEOUT}
        return sa.create_engine(
            url, pool_pre_ping=True, future=True, hide_parameters=True, connect_args=waits
        )

    database = parsed.database
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = sa.create_engine(
        url,
        pool_pre_ping=True,
        hide_parameters=True,
        connect_args={"check_same_thread": False, "timeout": busy_timeout_seconds},
    )
    busy_ms = int(busy_timeout_seconds * 1000)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves (see _on_begin)
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:
        options = conn.get_execution_options()
        wait_ms = int(options.get(SQLITE_BUSY_OPTION, busy_ms))
        conn.exec_driver_sql(f"PRAGMA busy_timeout={wait_ms}")
        mode = options.get(SQLITE_BEGIN_OPTION)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if mode == "IMMEDIATE" else "BEGIN")

    return engine


def _alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", normalize_url(url).replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Apply migrations up to `revision` on the database at `url`, then set up its checkpointer.

    The checkpointer's tables are the saver's own (its `setup()` creates and
    migrates them); every migration step runs it, so a store is never used unset.
    """
    # First, outside any transaction of ours: PostgreSQL's saver builds indexes
    # CONCURRENTLY, which waits for every open transaction, the migration's included.
    open_checkpoint_store(normalize_url(url)).close()
    engine = create_engine_for_url(url)
    try:
        with engine.begin() as connection:
            config = _alembic_config(url)
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
    finally:
        engine.dispose()


def downgrade(url: str, revision: str = "base") -> None:
    """Revert migrations down to `revision` (default: an empty database)."""
    engine = create_engine_for_url(url)
    try:
        with engine.begin() as connection:
            config = _alembic_config(url)
            config.attributes["connection"] = connection
            command.downgrade(config, revision)
    finally:
        engine.dispose()


def current_revision(url: str) -> str | None:
    """The revision the database at `url` is at (None when never migrated)."""
    from alembic.runtime.migration import MigrationContext

    engine = create_engine_for_url(url)
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()


def get_engine(settings: Settings | None = None) -> sa.Engine:
    """The process's engine for the configured database, migrated to head once per process."""
    settings = settings or get_settings()
    url = normalize_url(settings.database_url)
    key = (url, float(settings.lock_timeout_seconds))
    owner = get_resources()
    engine: sa.Engine | None = owner.peek(SQL_ENGINES, key)
    if engine is not None:
        return engine

    def create() -> sa.Engine:
        with _lock:
            if url not in _migrated:
                upgrade(url)
                _migrated.add(url)
        return create_engine_for_url(url, busy_timeout_seconds=settings.lock_timeout_seconds)

    engine = owner.acquire(SQL_ENGINES, key, create, _dispose)
    for old in owner.keys(SQL_ENGINES)[:-_MAX_CACHED_ENGINES]:  # the oldest beyond the cap
        if old != key:
            owner.release(SQL_ENGINES, old)
    return engine


def _dispose(engine: sa.Engine) -> None:
    engine.dispose()


def forget_engines() -> None:
    """Dispose every engine and checkpoint store and forget which URLs were migrated.

    For tests and `db reset`: the next engine must not assume the old schema.
    """
    close_checkpoint_stores()
    get_resources().close_kind(SQL_ENGINES)
    with _lock:
        _migrated.clear()


def session_factory(settings: Settings | None = None) -> sessionmaker[Session]:
    return sessionmaker(bind=get_engine(settings), expire_on_commit=False)


@contextmanager
def session_scope(settings: Settings | None = None) -> Iterator[Session]:
    """A session in one transaction: commit on success, roll back on any error."""
    session = session_factory(settings)()
    try:
        with session.begin():
            yield session
    finally:
        session.close()


def is_lock_failure(exc: BaseException) -> bool:
    """True when a database error means "the lock could not be had in time".

    PostgreSQL: SQLSTATE 55P03 lock_not_available (`lock_timeout` ran out).
    SQLite: "database is locked" / "database table is locked" (the busy timeout
    ran out). Works on sqlalchemy's wrapper (its `orig`) and on the driver's error.
    """
    orig = getattr(exc, "orig", None) or exc
    sqlstate = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if sqlstate == "55P03":
        return True
    text = str(orig).lower()
    return "database is locked" in text or "database table is locked" in text


@contextmanager
def locked_session(
    settings: Settings | None = None, *, wait_seconds: float | None = None
) -> Iterator[Session]:
    """Like `session_scope`, but on SQLite the transaction starts with BEGIN IMMEDIATE.

    That takes SQLite's database write lock before the first read, which is the
    SQLite equivalent of the service's `SELECT ... FOR UPDATE` on PostgreSQL.
    `wait_seconds` bounds the wait for that lock (default: settings.lock_timeout_seconds);
    given explicitly, it also bounds every lock wait of the transaction on PostgreSQL
    (`lock_timeout`, local to the transaction). Running out raises sqlalchemy's
    OperationalError ("database is locked" / "lock timeout"; `is_lock_failure`).
    """
    settings = settings or get_settings()
    session = session_factory(settings)()
    try:
        with session.begin():
            if is_sqlite(session):
                options: dict[str, Any] = {SQLITE_BEGIN_OPTION: "IMMEDIATE"}
                if wait_seconds is not None:
                    options[SQLITE_BUSY_OPTION] = max(0, int(wait_seconds * 1000))
                session.connection(execution_options=options)
            elif wait_seconds is not None:
                session.execute(
                    sa.text("SELECT set_config('lock_timeout', :timeout, true)"),
                    {"timeout": f"{max(1, int(wait_seconds * 1000))}ms"},
                )
            yield session
    finally:
        session.close()
