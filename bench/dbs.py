"""Throw-away PostgreSQL databases for the benchmarks: create one, drop it, name it for psycopg.

Shared by `bench/threads.py`, `bench/attach.py` (and `bench/pages.py` through
`bench.threads`): a database per run, made under the server's admin URL and
dropped at the end (its sessions terminated first).
"""

from __future__ import annotations

import uuid

import sqlalchemy as sa


def create_database(admin_url: str, prefix: str = "yuxi_bench") -> str:
    """A new empty database named ``<prefix>_<random>``; its SQLAlchemy URL."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return sa.engine.make_url(admin_url).set(database=name).render_as_string(False)


def drop_database(admin_url: str, url: str) -> None:
    """Drop the database of ``url`` (its open sessions terminated first)."""
    name = sa.engine.make_url(url).database
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(
            sa.text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = :n AND pid <> pg_backend_pid()"
            ),
            {"n": name},
        )
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}"'))
    admin.dispose()


def psycopg_conninfo(url: str) -> str:
    """``url`` as a plain ``postgresql://`` conninfo for psycopg (no SQLAlchemy driver name)."""
    return sa.engine.make_url(url).set(drivername="postgresql").render_as_string(False)
