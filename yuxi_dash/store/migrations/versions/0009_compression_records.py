"""Compression records: `compressions`, one row per compression we saw, with its ledger.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "compressions",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("thread_id", sa.String(length=128), nullable=False),
        sa.Column("event_key", sa.String(length=64), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("trigger", sa.String(length=16), nullable=False),
        sa.Column("actor", sa.String(length=255), nullable=True),
        sa.Column("origin", sa.String(length=16), nullable=False),
        sa.Column("agent_slug", sa.String(length=128), nullable=False),
        sa.Column("checkpoint_id", sa.String(length=128), nullable=True),
        sa.Column("before_tokens", sa.Integer(), nullable=False),
        sa.Column("after_tokens", sa.Integer(), nullable=False),
        sa.Column("compressed_messages", sa.Integer(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("history_file", sa.String(length=1024), nullable=True),
        sa.Column("history_sha256", sa.String(length=64), nullable=True),
        sa.Column("ledger", sa.JSON(), nullable=False),
        sa.Column("evidence_visible", sa.Integer(), nullable=False),
        sa.Column("evidence_recoverable", sa.Integer(), nullable=False),
        sa.Column("evidence_lost", sa.Integer(), nullable=False),
        sa.Column("cited_total", sa.Integer(), nullable=False),
        sa.Column("cited_visible", sa.Integer(), nullable=False),
        sa.Column("cited_lost", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["thread_id"],
            ["conversations.thread_id"],
            name=op.f("fk_compressions_thread_id_conversations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_compressions")),
        sa.UniqueConstraint(
            "thread_id", "event_key", name=op.f("uq_compressions_thread_id_event_key")
        ),
    )
    op.create_index("ix_compressions_thread_id_at", "compressions", ["thread_id", "at"])
    op.create_index("ix_compressions_at", "compressions", ["at"])


def downgrade() -> None:
    op.drop_index("ix_compressions_at", table_name="compressions")
    op.drop_index("ix_compressions_thread_id_at", table_name="compressions")
    op.drop_table("compressions")
