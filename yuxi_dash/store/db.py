"""Engines, sessions and migrations for the relational store.

One engine per database URL (cached, `pool_pre_ping` so a restarted server is
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
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

from yuxi_dash.settings import Settings, get_settings

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
SQLITE_BEGIN_OPTION = "yuxi_sqlite_begin"  # execution option: "IMMEDIATE" takes the write lock
SQLITE_BUSY_OPTION = "yuxi_sqlite_busy_ms"  # execution option: busy timeout for this transaction
_MAX_CACHED_ENGINES = 16
_lock = threading.RLock()
_engines: OrderedDict[tuple[str, float], sa.Engine] = OrderedDict()
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


def create_engine_for_url(url: str, *, busy_timeout_seconds: float = 5.0) -> sa.Engine:
    """A new engine (not cached, no migrations): the SQLite pragmas and begin handling included."""
    url = normalize_url(url)
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return sa.create_engine(url, pool_pre_ping=True, future=True, hide_parameters=True)

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
    """Apply migrations up to `revision` on the database at `url`."""
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
    """The cached engine for the configured database, migrated to head once per process."""
    settings = settings or get_settings()
    url = normalize_url(settings.database_url)
    key = (url, float(settings.lock_timeout_seconds))
    with _lock:
        engine = _engines.get(key)
        if engine is not None:
            _engines.move_to_end(key)
            return engine
        if url not in _migrated:
            upgrade(url)
            _migrated.add(url)
        engine = create_engine_for_url(url, busy_timeout_seconds=settings.lock_timeout_seconds)
        _engines[key] = engine
        while len(_engines) > _MAX_CACHED_ENGINES:
            _, old = _engines.popitem(last=False)
            old.dispose()
        return engine


def forget_engines() -> None:
    """Dispose every cached engine and forget which URLs were migrated (tests, `demo --reset`)."""
    with _lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()
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


@contextmanager
def locked_session(
    settings: Settings | None = None, *, wait_seconds: float | None = None
) -> Iterator[Session]:
    """Like `session_scope`, but on SQLite the transaction starts with BEGIN IMMEDIATE.

    That takes SQLite's database write lock before the first read, which is the
    SQLite equivalent of the service's `SELECT ... FOR UPDATE` on PostgreSQL.
    `wait_seconds` bounds the wait for that lock (default: settings.lock_timeout_seconds);
    running out raises sqlalchemy's OperationalError ("database is locked").
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
            yield session
    finally:
        session.close()
