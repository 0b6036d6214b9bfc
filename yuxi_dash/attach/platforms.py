"""What a scan asks the platform before it projects: which platform, its clock, its index.

`platform_identity` asks the platform's database, in one read-only query,
for its system identifier (``pg_control_system()``, the same for a cluster
and its physical replicas), its name and its ``now()``. A platform is known
by ``"<system identifier>/<database>"``; `check_platform` refuses a scan of
another platform than the last identified scan read (`PlatformChanged`,
audited, nothing done) unless the operator confirms it (audited too).
`clock_cap` is the largest checkpoint id a watermark may hold: the platform
database's clock plus `FUTURE_SKEW_SECONDS` (checkpoint ids are UUIDv6 dated
by the writer's clock, which may run ahead or be forged). `has_checkpoint_index`
asks the catalog whether ``checkpoints`` has an index led by ``checkpoint_id``:
without one the window query (`attach.scanner.CHANGED_THREADS_SQL`) reads the whole
table. The platform owns its tables: `CREATE_INDEX_STATEMENT` is for its owner to run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
import sqlalchemy as sa

from yuxi_dash.access.audit import record_audit
from yuxi_dash.attach.checkpoint_clock import TICKS_PER_SECOND, UUID_EPOCH_TICKS, floor_id
from yuxi_dash.attach.platform_store import PlatformStore, connect, unavailable
from yuxi_dash.errors import PlatformChanged
from yuxi_dash.settings import Settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import ScanWatermark

# the platform's identity and clock, read once per scan (a read-only role may run it)
PLATFORM_SQL = """
SELECT (SELECT system_identifier FROM pg_control_system())::text AS system_identifier,
    current_database() AS database, now() AS now
"""
FUTURE_SKEW_SECONDS = 300.0  # how far ahead of the platform database's clock an id may be dated
SCAN_ACTION = "attach_scan"


@dataclass(frozen=True)
class PlatformIdentity:
    """Which platform a scan reads (its database's system identifier and name) and its clock."""

    system_identifier: str
    database: str
    now: datetime

    @property
    def platform_id(self) -> str:
        return f"{self.system_identifier}/{self.database}"[:128]


def platform_identity(conninfo: str, store: PlatformStore | None = None) -> PlatformIdentity:
    """The platform's identity and ``now()`` (one read-only query)."""
    if store is not None:
        row = store.fetch(PLATFORM_SQL, {}, prepare=False)[0]
        values = (row["system_identifier"], row["database"], row["now"])
    else:
        try:
            with connect(conninfo) as conn, conn.cursor() as cursor:
                cursor.execute(PLATFORM_SQL)
                found = cursor.fetchone()
        except psycopg.Error as exc:
            raise unavailable(exc, conninfo) from None
        assert found is not None  # one row, always
        values = (found[0], found[1], found[2])
    return PlatformIdentity(str(values[0]), str(values[1]), values[2].astimezone(UTC))


def clock_cap(now: datetime, skew_seconds: float = FUTURE_SKEW_SECONDS) -> str:
    """The largest checkpoint id a watermark may hold: the platform's clock plus ``skew``."""
    ticks = int((now.timestamp() + skew_seconds) * TICKS_PER_SECOND) + UUID_EPOCH_TICKS
    return floor_id(ticks)


def expected_platform(settings: Settings) -> str | None:
    """The platform the last identified scan read (None before any did)."""
    with session_scope(settings) as session:
        return session.scalar(
            sa.select(ScanWatermark.platform_id)
            .where(ScanWatermark.platform_id.is_not(None))
            .order_by(ScanWatermark.scanned_at.desc())
            .limit(1)
        )


def check_platform(
    settings: Settings, source: str, identity: PlatformIdentity, *, accept: bool, actor: str
) -> bool:
    """PlatformChanged (audited) when this is another platform than the last scan's, unless
    ``accept``; True when it is another one and accepted (audited too)."""
    expected = expected_platform(settings)
    if expected is None or expected == identity.platform_id:
        return False
    detail = {"source": source, "expected": expected, "found": identity.platform_id}
    if not accept:
        error = PlatformChanged(
            f"{source} is platform {identity.platform_id}, not {expected} scanned before; "
            "nothing was projected or marked deleted (confirm with --accept-new-platform)"
        )
        record_audit(
            actor=actor,
            action=SCAN_ACTION,
            target=f"platform:{source}",
            outcome="refused",
            detail={**detail, "code": error.code},
            settings=settings,
        )
        raise error
    record_audit(
        actor=actor,
        action=SCAN_ACTION,
        target=f"platform:{source}",
        outcome="platform_changed",
        detail=detail,
        settings=settings,
    )
    return True


CREATE_INDEX_STATEMENT = (
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS checkpoints_checkpoint_id_idx "
    "ON checkpoints (checkpoint_id);"
)

# a valid index on the table whose first key column is the column
INDEX_SQL = """
SELECT EXISTS (
    SELECT 1 FROM pg_index i
    JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
    WHERE i.indrelid = to_regclass(%(table)s) AND i.indisvalid AND a.attname = %(column)s
) AS present
"""
_PARAMS = {"table": "checkpoints", "column": "checkpoint_id"}
# the catalog's estimate of the table's rows (-1 or 0 before the table was first analyzed)
TABLE_ROWS_SQL = """
SELECT c.reltuples::bigint AS estimate FROM pg_class c WHERE c.oid = to_regclass(%(table)s)
"""


def _fetch_one(conninfo: str, store: PlatformStore | None, sql: str) -> tuple[Any, ...] | None:
    """The first row of a catalog query, on ``store``'s pool or a read-only connection."""
    if store is not None:
        rows = store.fetch(sql, _PARAMS)
        return tuple(rows[0].values()) if rows else None
    try:
        with connect(conninfo) as conn, conn.cursor() as cursor:
            cursor.execute(sql, _PARAMS)
            row = cursor.fetchone()
    except psycopg.Error as exc:
        raise unavailable(exc, conninfo) from None
    return tuple(row) if row else None


def checkpoint_table_rows(conninfo: str, store: PlatformStore | None = None) -> int | None:
    """The catalog's estimate of the platform's ``checkpoints`` rows; None when it has none."""
    row = _fetch_one(conninfo, store, TABLE_ROWS_SQL)
    estimate = int(row[0]) if row and row[0] is not None else -1
    return estimate if estimate > 0 else None


def has_checkpoint_index(conninfo: str, store: PlatformStore | None = None) -> bool:
    """True when the platform's ``checkpoints`` has a valid index led by ``checkpoint_id``.

    Asked on ``store``'s pool when given, else on a read-only connection of its own.
    """
    row = _fetch_one(conninfo, store, INDEX_SQL)
    return bool(row and row[0])
