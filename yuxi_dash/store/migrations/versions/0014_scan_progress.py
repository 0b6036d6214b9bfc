"""A scan's progress and its window's size: three columns of `scan_watermarks`.

``progress`` holds the running (or last) scan's projection: threads and
checkpoints done of those to do, when it started and last moved, and whether it
finished, for the Attached platform page. ``window_rows`` and ``table_rows`` are
the last scan's checkpoints in its window and the platform's ``checkpoints``
table size (the catalog's estimate): what the optional index would save. All
null for rows written before.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("scan_watermarks") as table:
        table.add_column(sa.Column("progress", sa.JSON(), nullable=True))
        table.add_column(sa.Column("window_rows", sa.BigInteger(), nullable=True))
        table.add_column(sa.Column("table_rows", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("scan_watermarks") as table:
        table.drop_column("table_rows")
        table.drop_column("window_rows")
        table.drop_column("progress")
