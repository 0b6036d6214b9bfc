"""Leases instead of locks held across outside calls, and token expiry.

- `alert_channels.lease_until`, `alert_outbox.claimed_until`: a delivery claims its
  channel or outbox row in a short transaction, commits, posts, then records the outcome;
  another pass skips what is claimed until the lease runs out.
- `conversations.compress_lease_id` / `compress_lease_until`: a compress marks its thread
  in progress under the row lock before it calls the summarizer; another compress of the
  same thread is `thread_busy` at once; a lease past its time (a killed process) is void.
- `api_tokens.expires_at`: a service token may expire.
- `alert_rules.compressible_only`: a rule may leave out threads nobody can compress.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("alert_channels") as table:
        table.add_column(sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("alert_outbox") as table:
        table.add_column(sa.Column("claimed_until", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("conversations") as table:
        table.add_column(sa.Column("compress_lease_id", sa.String(length=32), nullable=True))
        table.add_column(
            sa.Column("compress_lease_until", sa.DateTime(timezone=True), nullable=True)
        )
    with op.batch_alter_table("api_tokens") as table:
        table.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("alert_rules") as table:
        table.add_column(
            sa.Column("compressible_only", sa.Boolean(), server_default=sa.true(), nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("alert_rules") as table:
        table.drop_column("compressible_only")
    with op.batch_alter_table("api_tokens") as table:
        table.drop_column("expires_at")
    with op.batch_alter_table("conversations") as table:
        table.drop_column("compress_lease_until")
        table.drop_column("compress_lease_id")
    with op.batch_alter_table("alert_outbox") as table:
        table.drop_column("claimed_until")
    with op.batch_alter_table("alert_channels") as table:
        table.drop_column("lease_until")
