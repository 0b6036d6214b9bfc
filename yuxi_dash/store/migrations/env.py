"""Alembic environment: migrates the URL (or connection) handed in by yuxi_dash.store.db."""

from __future__ import annotations

from alembic import context
from alembic.runtime.environment import NameFilterParentNames, NameFilterType

from yuxi_dash.errors import StoreUnavailable
from yuxi_dash.store import compressions as _compressions  # noqa: F401 - registers its table
from yuxi_dash.store.db import create_engine_for_url
from yuxi_dash.store.models import Base

config = context.config
target_metadata = Base.metadata


# The LangGraph checkpointer keeps its own tables in our PostgreSQL database; its
# `setup()` owns them, so autogenerate must neither create nor drop them.
CHECKPOINTER_TABLES = frozenset(
    {"checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations"}
)


def _ours(name: str | None, type_: NameFilterType, parent_names: NameFilterParentNames) -> bool:
    table = name if type_ == "table" else parent_names.get("table_name")
    return table not in CHECKPOINTER_TABLES


def _run(connection) -> None:  # noqa: ANN001 - alembic hands us a Connection
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_name=_ours,
    )
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            # two processes starting at once: one migrates, the other waits and finds head
            connection.exec_driver_sql("SELECT pg_advisory_xact_lock(730115)")
        context.run_migrations()


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = config.get_main_option("sqlalchemy.url")
    if url is None:  # yuxi_dash.store.db always sets it; alembic run by hand might not
        raise StoreUnavailable("no sqlalchemy.url to migrate: run migrations through yuxi-dash")
    engine = create_engine_for_url(url)
    try:
        with engine.begin() as conn:
            _run(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
