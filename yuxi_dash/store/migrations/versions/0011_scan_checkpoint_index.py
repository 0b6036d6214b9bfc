"""Attach scan cost: `scan_watermarks.checkpoint_index` and `window_query_ms`.

The last scan of a source records whether the platform's ``checkpoints`` table
had an index led by ``checkpoint_id`` (None: not read yet) and how many
milliseconds that scan's window query took (`attach.platforms`).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("scan_watermarks") as table:
        table.add_column(sa.Column("checkpoint_index", sa.Boolean(), nullable=True))
        table.add_column(sa.Column("window_query_ms", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("scan_watermarks") as table:
        table.drop_column("window_query_ms")
        table.drop_column("checkpoint_index")
