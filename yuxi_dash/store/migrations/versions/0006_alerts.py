"""Alerts: rules, per-(rule, thread) states, the webhook outbox, channel health, scan timings.

`alert_rules` holds the pressure rules; `alert_states` one row per (rule,
thread) that is pending, firing or recently resolved; `alert_outbox` one row
per webhook notice, written in the transaction of the state change it tells;
`alert_channels` each delivery channel's failures and pause; `scan_timings`
the last attach scan's duration per source (read by /metrics).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_AT = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "alert_rules",
        sa.Column("id", _BIG_ID, autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("scope", sa.String(length=16), nullable=False),
        sa.Column("agent_slug", sa.String(length=128), nullable=True),
        sa.Column("fire_at", sa.Float(), nullable=False),
        sa.Column("clear_at", sa.Float(), nullable=False),
        sa.Column("for_seconds", sa.Integer(), nullable=False),
        sa.Column("severity", sa.String(length=16), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("created_at", _AT, nullable=False),
        sa.Column("updated_at", _AT, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_rules")),
        sa.UniqueConstraint("name", name=op.f("uq_alert_rules_name")),
    )
    op.create_table(
        "alert_states",
        sa.Column("id", _BIG_ID, autoincrement=True, nullable=False),
        sa.Column("rule_id", _BIG_ID, nullable=True),
        sa.Column("rule_name", sa.String(length=128), nullable=False),
        sa.Column("severity", sa.String(length=16), nullable=False),
        sa.Column("thread_id", sa.String(length=128), nullable=False),
        sa.Column("agent_slug", sa.String(length=128), nullable=False),
        sa.Column("platform", sa.String(length=16), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("pressure", sa.Float(), nullable=False),
        sa.Column("threshold_tokens", sa.Integer(), nullable=False),
        sa.Column("fire_at", sa.Float(), nullable=False),
        sa.Column("clear_at", sa.Float(), nullable=False),
        sa.Column("episode", sa.Integer(), nullable=False),
        sa.Column("pending_since", _AT, nullable=True),
        sa.Column("firing_since", _AT, nullable=True),
        sa.Column("resolved_at", _AT, nullable=True),
        sa.Column("changed_at", _AT, nullable=False),
        sa.ForeignKeyConstraint(
            ["rule_id"],
            ["alert_rules.id"],
            name=op.f("fk_alert_states_rule_id_alert_rules"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_states")),
        sa.UniqueConstraint("rule_id", "thread_id", name=op.f("uq_alert_states_rule_id_thread_id")),
    )
    op.create_index("ix_alert_states_state_changed_at", "alert_states", ["state", "changed_at"])
    op.create_table(
        "alert_outbox",
        sa.Column("id", _BIG_ID, autoincrement=True, nullable=False),
        sa.Column("event_id", sa.String(length=64), nullable=False),
        sa.Column("channel", sa.String(length=32), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("thread_id", sa.String(length=128), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("created_at", _AT, nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", _AT, nullable=False),
        sa.Column("sent_at", _AT, nullable=True),
        sa.Column("last_error", sa.String(length=256), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_outbox")),
        sa.UniqueConstraint("event_id", name=op.f("uq_alert_outbox_event_id")),
    )
    op.create_index("ix_alert_outbox_sent_at_id", "alert_outbox", ["sent_at", "id"])
    op.create_table(
        "alert_channels",
        sa.Column("channel", sa.String(length=32), nullable=False),
        sa.Column("consecutive_failures", sa.Integer(), nullable=False),
        sa.Column("failures_total", sa.Integer(), nullable=False),
        sa.Column("sent_total", sa.Integer(), nullable=False),
        sa.Column("paused_at", _AT, nullable=True),
        sa.Column("last_error", sa.String(length=256), nullable=True),
        sa.Column("last_success_at", _AT, nullable=True),
        sa.PrimaryKeyConstraint("channel", name=op.f("pk_alert_channels")),
    )
    op.create_table(
        "scan_timings",
        sa.Column("source", sa.String(length=128), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("finished_at", _AT, nullable=False),
        sa.Column("projected", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("source", name=op.f("pk_scan_timings")),
    )


def downgrade() -> None:
    op.drop_table("scan_timings")
    op.drop_table("alert_channels")
    op.drop_index("ix_alert_outbox_sent_at_id", table_name="alert_outbox")
    op.drop_table("alert_outbox")
    op.drop_index("ix_alert_states_state_changed_at", table_name="alert_states")
    op.drop_table("alert_states")
    op.drop_table("alert_rules")
