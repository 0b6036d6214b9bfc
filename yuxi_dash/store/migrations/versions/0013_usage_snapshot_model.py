"""Model calls name their model: `usage_snapshots.model` and `usage_snapshots.output_tokens`.

The model name and the output tokens a provider reported for a call (the
middleware's ``token_usage``), so a call is priced by its model and its real
output. Both null when not reported, and for rows written before.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("usage_snapshots") as table:
        table.add_column(sa.Column("model", sa.String(128), nullable=True))
        table.add_column(sa.Column("output_tokens", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("usage_snapshots") as table:
        table.drop_column("output_tokens")
        table.drop_column("model")
