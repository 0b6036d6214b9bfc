"""Bulk corrections: `memory_corrections.batch_audit_id`.

A correction made as part of a bulk correction (the retract of a user's
assistant-only facts) names the bulk's parent audit row, so the whole bulk
can be found, and undone, in one step. Null for a correction made alone.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("memory_corrections") as table:
        table.add_column(sa.Column("batch_audit_id", _BIG_ID, nullable=True))
        table.create_index("ix_memory_corrections_batch_audit_id", ["batch_audit_id"])


def downgrade() -> None:
    with op.batch_alter_table("memory_corrections") as table:
        table.drop_index("ix_memory_corrections_batch_audit_id")
        table.drop_column("batch_audit_id")
