"""Many rows in one statement: a bulk INSERT, an INSERT of new keys, a bulk UPDATE, rows to join on.

On PostgreSQL an INSERT is one ``COPY … FROM STDIN`` in the session's
transaction (psycopg formats the rows, the server reads them typed by their
columns); its errors are SQLAlchemy's, as for a statement. An UPDATE sends
each column as ONE array parameter and reads the rows back with ``unnest``
(``UPDATE … FROM unnest(…)``): the SQL depends only on the table and the
column names, so the driver can keep it prepared; each array is cast to its
column's type, so a column NULL in every row is still typed. Values go
through their column type's bind processing; on PostgreSQL a string longer
than its column is cut to it, a JSON value goes as JSON. SQLite gets the same
rows through SQLAlchemy (a multi-row INSERT per `INSERT_ROWS`; an UPDATE by
primary key per row). `insert_new_rows` skips a key the table holds (``ON CONFLICT DO NOTHING``).

Every row of one call names the same columns, from the table's own metadata.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any, cast

import psycopg
import sqlalchemy as sa
from psycopg.types.json import Json
from sqlalchemy.dialects import postgresql, sqlite
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
def _copy(table: sa.Table, names: tuple[str, ...], dialect: Dialect) -> str:
    """``COPY table (names) FROM STDIN``; identifiers from the table's metadata, quoted."""
    preparer = dialect.identifier_preparer
    columns = ", ".join(map(preparer.quote, names))
    return f"COPY {preparer.format_table(table)} ({columns}) FROM STDIN"


@cache
def _unnest(table: sa.Table, names: tuple[str, ...], dialect: Dialect) -> str:
    arrays = ", ".join(
        f"CAST(:{name} AS {table.c[name].type.compile(dialect=dialect)}[])" for name in names
    )
    return f"unnest({arrays}) AS given({', '.join(names)})"


def _processors(table: sa.Table, names: Sequence[str], dialect: Dialect) -> list[Any]:
    """Each column's bind processing (None: the value as it is); a string longer than its
    ``String(n)`` column is cut to it, as a ``varchar(n)`` cast cuts it; on PostgreSQL a
    ``JSON`` column's value as psycopg's `Json` (None is JSON ``null`` unless the column's
    ``none_as_null``, as SQLAlchemy writes it)."""
    processors = []
    for name in names:
        column_type = table.c[name].type
        process = column_type.bind_processor(dialect)
        if isinstance(column_type, sa.JSON) and dialect.name == "postgresql":
            process = _json(column_type)
        length = getattr(column_type, "length", None)
        if isinstance(column_type, sa.String) and length:
            process = _cut(process, length)
        processors.append(process)
    return processors


def _json(column_type: sa.JSON) -> Any:
    def as_json(value: Any) -> Any:
        if isinstance(value, sa.sql.elements.Null) or (value is None and column_type.none_as_null):
            return None  # SQL NULL
        return Json(None if value is sa.JSON.NULL else value)  # JSON.NULL: JSON null

    return as_json


def _cut(process: Any, length: int) -> Any:
    def cut(value: Any) -> Any:
        if isinstance(value, str) and len(value) > length:
            value = value[:length]
        return process(value) if process is not None else value

    return cut


def _arrays(
    table: sa.Table, names: Sequence[str], rows: Sequence[Mapping[str, Any]], dialect: Dialect
) -> dict[str, list[Any]]:
    """Each column's values as one list, through the column type's own bind processing."""
    arrays: dict[str, list[Any]] = {}
    for name, process in zip(names, _processors(table, names, dialect), strict=True):
        values = [row[name] for row in rows]
        arrays[name] = [process(v) for v in values] if process is not None else values
    return arrays


def insert_rows(session: Session, table: sa.Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert ``rows`` into ``table``, in their order (one COPY on PostgreSQL)."""
    if not rows:
        return
    names = _names(table, rows)
    if is_sqlite(session):
        for start in range(0, len(rows), INSERT_ROWS):
            session.execute(sa.insert(table).values(list(rows[start : start + INSERT_ROWS])))
        return
    session.flush()  # the ORM's pending rows first (a thread's row before rows that refer to it)
    dialect = session.get_bind().dialect
    processors = _processors(table, names, dialect)
    statement = _copy(table, names, dialect)
    driver = cast(psycopg.Connection[Any], session.connection().connection.driver_connection)
    try:
        with driver.cursor() as cursor, cursor.copy(statement) as copy:
            for row in rows:
                copy.write_row(
                    [
                        row[name] if process is None else process(row[name])
                        for name, process in zip(names, processors, strict=True)
                    ]
                )
    except psycopg.Error as exc:  # as SQLAlchemy raises it for a statement: IntegrityError, ...
        raise sa.exc.DBAPIError.instance(
            statement,
            None,
            exc,
            psycopg.Error,
            hide_parameters=True,
            connection_invalidated=driver.broken,
            dialect=dialect,
        ) from None


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


def insert_new_rows(
    session: Session, table: sa.Table, rows: Sequence[Mapping[str, Any]], key: str
) -> set[Any]:
    """The rows whose ``key`` the table does not hold, in one statement; returns the keys inserted.

    A row another transaction inserted meanwhile is kept as it is (``ON CONFLICT DO
    NOTHING``). On PostgreSQL the rows are one array parameter per column
    (``INSERT … SELECT … FROM unnest(…)``, the columns' defaults included), so the
    statement is the same for any count; SQLite gets a row of values each. Every row names
    the same columns; a column given as None is NULL (defaults fill the columns not named).
    """
    if not rows:
        return set()
    names = _names(table, rows)
    if is_sqlite(session):
        insert = sqlite.insert(table).on_conflict_do_nothing(index_elements=[key])
        return set(session.execute(insert.returning(table.c[key]), list(rows)).scalars())
    given = given_rows({name: (table.c[name].type, [row[name] for row in rows]) for name in names})
    statement = (
        postgresql.insert(table)
        .from_select(list(names), sa.select(*(given.c[name] for name in names)))
        .on_conflict_do_nothing(index_elements=[key])
        .returning(table.c[key])
    )
    return set(session.execute(statement).scalars())
