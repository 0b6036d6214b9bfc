"""Which `serve` replica runs a background job: a PostgreSQL session-level advisory lock.

With several replicas on one PostgreSQL store, `Leadership.lead()` is True on
one of them at a time for a given key. The leader holds `pg_try_advisory_lock(key)`
on a connection of its own (autocommit, outside the engine's pool) for as long
as it leads; the others try again on their next turn. A leader that stops
(`release()`), dies or loses its connection loses the lock with its session,
and the next try of another replica takes it. Before each run the leader
checks that its session is still alive; if it is not, it sits one turn out and
then competes again. The caller passes the key (`lock_key`) and a label that
names the job in log lines. An advisory lock belongs to one database, so
dashboards on other databases of the same server never contend. SQLite serves
one process (one `serve`), so there `lead()` is always True and no lock is taken.
"""

from __future__ import annotations

import hashlib
import logging

import sqlalchemy as sa

from yuxi_dash.settings import Settings
from yuxi_dash.store.db import is_sqlite, normalize_url

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_SECONDS = 5


def lock_key(seed: str) -> int:
    """A fixed signed 64-bit key from a seed: every replica of every version asks for the same lock."""
    return int.from_bytes(hashlib.sha256(seed.encode()).digest()[:8], "big", signed=True)


class Leadership:
    """One replica's lock for one job: `lead()` before each run, `release()` when it stops."""

    def __init__(self, settings: Settings, *, key: int, label: str) -> None:
        self.key = key
        self.label = label  # names the job in log lines
        self.url = normalize_url(settings.database_url)
        self.needs_lock = not is_sqlite(self.url)
        self._engine: sa.Engine | None = None
        self._conn: sa.Connection | None = None
        self.backend_pid: int | None = None  # the PostgreSQL session holding the lock
        self.unavailable = False  # the last try could not reach the database

    @property
    def holding(self) -> bool:
        return self._conn is not None

    def lead(self) -> bool:
        """True when this replica may run the job now: it holds the lock (taking it if free)."""
        if not self.needs_lock:
            return True
        if self._conn is not None:
            if self._alive():
                return True
            log.warning("%s: lost the lock's connection; competing again", self.label)
            self._drop()
            return False  # sit this turn out: a replica that kept its session goes first
        return self._try_take()

    def _alive(self) -> bool:
        assert self._conn is not None
        try:
            self._conn.execute(sa.text("SELECT 1"))
        except sa.exc.DBAPIError:
            return False
        return True

    def _try_take(self) -> bool:
        try:
            if self._engine is None:
                self._engine = sa.create_engine(
                    self.url,
                    poolclass=sa.pool.NullPool,
                    isolation_level="AUTOCOMMIT",
                    hide_parameters=True,
                    connect_args={"connect_timeout": CONNECT_TIMEOUT_SECONDS},
                )
            conn = self._engine.connect()
        except sa.exc.DBAPIError:
            log.warning("%s: the database is unavailable; not running", self.label)
            self.unavailable = True
            return False
        self.unavailable = False
        try:
            taken = bool(
                conn.execute(
                    sa.text("SELECT pg_try_advisory_lock(:key)"), {"key": self.key}
                ).scalar()
            )
            pid = conn.execute(sa.text("SELECT pg_backend_pid()")).scalar()
        except sa.exc.DBAPIError:
            conn.close()
            return False
        if not taken:
            conn.close()
            return False
        self._conn, self.backend_pid = conn, int(pid or 0)
        return True

    def release(self) -> None:
        """Give up the lock (if held) and close its connection; another replica takes over."""
        if self._conn is not None:
            try:
                self._conn.execute(sa.text("SELECT pg_advisory_unlock(:key)"), {"key": self.key})
            except sa.exc.DBAPIError:
                pass  # the session is gone, and the lock with it
        self._drop()
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    def _drop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except sa.exc.DBAPIError:
                pass
        self._conn, self.backend_pid = None, None
