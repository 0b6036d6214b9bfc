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


def has_checkpoint_index(conninfo: str, store: PlatformStore | None = None) -> bool:
    """True when the platform's ``checkpoints`` has a valid index led by ``checkpoint_id``.

    Asked on ``store``'s pool when given, else on a read-only connection of its own.
    """
    if store is not None:
        return bool(store.fetch(INDEX_SQL, _PARAMS)[0]["present"])
    try:
        with connect(conninfo) as conn, conn.cursor() as cursor:
            cursor.execute(INDEX_SQL, _PARAMS)
            row = cursor.fetchone()
    except psycopg.Error as exc:
        raise unavailable(exc, conninfo) from None
    return bool(row and row[0])
