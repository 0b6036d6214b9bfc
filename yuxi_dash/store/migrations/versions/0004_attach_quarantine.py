"""Attach scan: the platform each attached thread came from, and the quarantine.

`conversations.platform_id` and `scan_watermarks.platform_id` record which
platform (its database's system identifier and name) a thread was projected
from and a source was last scanned as. `attach_quarantine` holds the platform
threads a scan could not project (``quarantined``) or projected with a warning
(``flagged``: a checkpoint dated ahead of the platform database's clock), one
row per source, thread and action, with the reason's code.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.add_column("conversations", sa.Column("platform_id", sa.String(length=128), nullable=True))
    op.add_column("scan_watermarks", sa.Column("platform_id", sa.String(length=128), nullable=True))
    op.create_table(
        "attach_quarantine",
        sa.Column("id", _BIG_ID, autoincrement=True, nullable=False),
        sa.Column("source", sa.String(length=128), nullable=False),
        sa.Column("thread_key", sa.String(length=64), nullable=False),
        sa.Column("thread_label", sa.String(length=256), nullable=False),
        sa.Column("checkpoint_id", sa.String(length=64), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("code", sa.String(length=64), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("first_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_attach_quarantine")),
        sa.UniqueConstraint(
            "source",
            "thread_key",
            "action",
            name=op.f("uq_attach_quarantine_source_thread_key_action"),
        ),
    )


def downgrade() -> None:
    op.drop_table("attach_quarantine")
    with op.batch_alter_table("scan_watermarks") as batch:
        batch.drop_column("platform_id")
    with op.batch_alter_table("conversations") as batch:
        batch.drop_column("platform_id")
