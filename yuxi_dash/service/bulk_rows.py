"""Many rows in one statement: a bulk INSERT, a bulk UPDATE by primary key, rows to join on.

On PostgreSQL both send each column as ONE array parameter and read the rows
back with ``unnest`` (``INSERT … SELECT … FROM unnest(…)``,
``UPDATE … FROM unnest(…)``): the SQL text depends only on the table and
the column names, so it is built once, never compiled per row count, and the
driver can keep it prepared. Each array is cast to its column's type, so a
column that is NULL in every row is still typed. SQLite gets the same rows
through SQLAlchemy (a multi-row INSERT per `INSERT_ROWS`; an UPDATE by
primary key executed for every row).

Every row of one call must name the same columns. The column names come from
the table's own metadata, never from input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import Session

from yuxi_dash.store.db import is_sqlite

INSERT_ROWS = 500  # rows in one SQLite multi-row INSERT


def _names(table: sa.Table, rows: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    names = tuple(rows[0])
    for name in names:
        table.c[name]  # noqa: B018 - a KeyError for a column the table lacks, before any SQL
    return names


@cache
def _unnest(table: sa.Table, names: tuple[str, ...], dialect: Dialect) -> str:
    arrays = ", ".join(
        f"CAST(:{name} AS {table.c[name].type.compile(dialect=dialect)}[])" for name in names
    )
    return f"unnest({arrays}) AS given({', '.join(names)})"


def _arrays(
    table: sa.Table, names: Sequence[str], rows: Sequence[Mapping[str, Any]], dialect: Dialect
) -> dict[str, list[Any]]:
    """Each column's values as one list, through the column type's own bind processing."""
    arrays: dict[str, list[Any]] = {}
    for name in names:
        process = table.c[name].type.bind_processor(dialect)
        values = [row[name] for row in rows]
        arrays[name] = [process(v) for v in values] if process is not None else values
    return arrays


def insert_rows(session: Session, table: sa.Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert ``rows`` into ``table``, in their order (one statement on PostgreSQL)."""
    if not rows:
        return
    names = _names(table, rows)
    if is_sqlite(session):
        for start in range(0, len(rows), INSERT_ROWS):
            session.execute(sa.insert(table).values(list(rows[start : start + INSERT_ROWS])))
        return
    dialect = session.get_bind().dialect
    columns = ", ".join(names)
    # identifiers from the table's metadata (checked by `_names`), every value a parameter
    sql = f"INSERT INTO {table.name} ({columns}) SELECT {columns} FROM "  # noqa: S608
    sql += _unnest(table, names, dialect)
    session.execute(sa.text(sql), _arrays(table, names, rows, dialect))


def update_rows(session: Session, table: sa.Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """Update ``table``'s rows by their ``id`` to the other columns of ``rows`` (one statement)."""
    if not rows:
        return
    names = _names(table, rows)
    if "id" not in names:
        raise ValueError("update_rows needs each row's id")
    if is_sqlite(session):
        session.execute(
            sa.update(table).where(table.c.id == sa.bindparam("_id")),
            [{"_id": row["id"], **{k: v for k, v in row.items() if k != "id"}} for row in rows],
        )
        return
    dialect = session.get_bind().dialect
    sets = ", ".join(f"{name} = given.{name}" for name in names if name != "id")
    # identifiers from the table's metadata (checked by `_names`), every value a parameter
    sql = f"UPDATE {table.name} SET {sets} FROM {_unnest(table, names, dialect)}"  # noqa: S608
    sql += f" WHERE {table.name}.id = given.id"
    session.execute(sa.text(sql), _arrays(table, names, rows, dialect))


def given_rows(columns: Mapping[str, tuple[sa.types.TypeEngine[Any], Sequence[Any]]]) -> Any:
    """PostgreSQL: rows given as one array parameter per column, a table named ``given`` to join
    on (``unnest(…) AS given(…)``): the SQL does not depend on the row count."""
    arrays = [
        sa.bindparam(f"given_{name}", list(values), type_=ARRAY(type_))
        for name, (type_, values) in columns.items()
    ]
    return sa.func.unnest(*arrays).table_valued(*columns).render_derived(name="given")
