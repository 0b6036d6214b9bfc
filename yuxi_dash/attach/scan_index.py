"""Whether the platform's ``checkpoints`` table has the index that keeps a scan's cost flat.

A scan's window query (`attach.scanner.CHANGED_THREADS_SQL`) filters on
``checkpoint_id``. LangGraph's saver keys ``checkpoints`` by
``(thread_id, checkpoint_ns, checkpoint_id)``, so without an index led by
``checkpoint_id`` that query reads the whole table, and its cost grows with the
platform. `has_checkpoint_index` asks the platform's catalog once per scan
(read-only, parameterized, under the store's statement timeout). The table is
the one the scan reads: ``checkpoints`` on the connection's search path (the
saver's schema). The platform owns its tables: nothing is created here;
`CREATE_INDEX_STATEMENT` is the one statement its owner can run.
"""

from __future__ import annotations

from typing import Any

import psycopg

from yuxi_dash.attach.platform_store import PlatformStore, connect, unavailable

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
