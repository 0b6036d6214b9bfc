"""Alert rule kinds: `alert_rules.kind` and `alert_states.kind`.

A rule is of kind `pressure` (summary pressure per thread, every rule until now) or
`cited_evidence_lost` (the thread's newest compression record lost cited evidence). An
alert keeps its rule's kind, so a resolved notice of a deleted rule is sent under the
same alert name it fired under.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    for table_name in ("alert_rules", "alert_states"):
        with op.batch_alter_table(table_name) as table:
            table.add_column(
                sa.Column("kind", sa.String(length=32), server_default="pressure", nullable=False)
            )


def downgrade() -> None:
    for table_name in ("alert_states", "alert_rules"):
        with op.batch_alter_table(table_name) as table:
            table.drop_column("kind")
