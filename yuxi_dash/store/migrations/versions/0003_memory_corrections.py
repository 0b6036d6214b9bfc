"""Memory corrections: each correction of a user's graph with the exact edges before and after.

`memory_corrections` holds one row per retract, supersede, restore, reject or
undo: the touched facts' full snapshots before and after, the reason and ticket,
the Redis hit count cleared, and the audit row it belongs to (`audit_id`, unique).
An undone correction names the audit row of its undo.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "memory_corrections",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("audit_id", _BIG_ID, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=256), nullable=False),
        sa.Column("user_id", sa.String(length=128), nullable=False),
        sa.Column("group_id", sa.String(length=160), nullable=False),
        sa.Column("fact_uuid", sa.String(length=64), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("ticket", sa.String(length=64), nullable=True),
        sa.Column("before", sa.JSON(), nullable=False),
        sa.Column("after", sa.JSON(), nullable=False),
        sa.Column("hits_before", sa.Integer(), nullable=False),
        sa.Column("undoes_id", sa.String(length=36), nullable=True),
        sa.Column("undone_by_audit_id", _BIG_ID, nullable=True),
        sa.Column("undone_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["audit_id"],
            ["audit_log.id"],
            name=op.f("fk_memory_corrections_audit_id_audit_log"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memory_corrections")),
        sa.UniqueConstraint("audit_id", name=op.f("uq_memory_corrections_audit_id")),
    )
    op.create_index("ix_memory_corrections_user_id", "memory_corrections", ["user_id"])
    op.create_index("ix_memory_corrections_fact_uuid", "memory_corrections", ["fact_uuid"])


def downgrade() -> None:
    op.drop_index("ix_memory_corrections_fact_uuid", table_name="memory_corrections")
    op.drop_index("ix_memory_corrections_user_id", table_name="memory_corrections")
    op.drop_table("memory_corrections")
