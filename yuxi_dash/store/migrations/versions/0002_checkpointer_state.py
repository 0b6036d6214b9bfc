"""Thread state moves to a LangGraph checkpointer; projection columns; scan watermarks.

Each `thread_states` row becomes the first checkpoint of its thread (written
through the checkpoint store's state graph, in deepagents' format), its id is
recorded on the conversation, and the table goes. Threads that already have a
checkpoint are left as they are, so a re-run after a failure is safe.
`chat_messages.message_id` ties a chat row to the state message it records;
`conversations.origin` says whether the dashboard or an attached platform owns
a thread; `scan_watermarks` holds how far a projection has read.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from langchain_core.messages import messages_from_dict

from yuxi_dash.compression.state_format import event_from_summary
from yuxi_dash.compression.thread_state import SummaryEvent
from yuxi_dash.store.checkpointer import open_checkpoint_store

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_LEGACY = sa.table(
    "thread_states",
    sa.column("thread_id", sa.String),
    sa.column("messages", sa.JSON),
    sa.column("summary", sa.JSON),
    sa.column("history_session_id", sa.String),
    sa.column("token_usage", sa.JSON),
)
_CONVERSATIONS = sa.table(
    "conversations", sa.column("thread_id", sa.String), sa.column("checkpoint_id", sa.String)
)


def _legacy_values(row: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "messages": list(messages_from_dict(row.messages or [])),
        "token_usage": dict(row.token_usage or {}),
    }
    if row.summary:
        values["_summarization_event"] = event_from_summary(SummaryEvent.from_dict(row.summary))
    if row.history_session_id:
        values["_summarization_session_id"] = row.history_session_id
    return values


def _move_legacy_states(bind: sa.Connection) -> None:
    rows = bind.execute(sa.select(_LEGACY)).all()
    if not rows:
        return
    store = open_checkpoint_store(bind.engine.url.render_as_string(hide_password=False))
    try:
        for row in rows:
            latest = store.latest(row.thread_id)
            if latest is None:
                latest = store.write(
                    row.thread_id, _legacy_values(row), expected_checkpoint_id=None
                )
            bind.execute(
                sa.update(_CONVERSATIONS)
                .where(_CONVERSATIONS.c.thread_id == row.thread_id)
                .values(checkpoint_id=latest.checkpoint_id)
            )
    finally:
        store.close()


def upgrade() -> None:
    with op.batch_alter_table("conversations") as batch:
        batch.add_column(sa.Column("checkpoint_id", sa.String(length=64), nullable=True))
        batch.add_column(
            sa.Column("origin", sa.String(length=16), nullable=False, server_default="dashboard")
        )
    with op.batch_alter_table("chat_messages") as batch:
        batch.add_column(sa.Column("message_id", sa.String(length=128), nullable=True))
        batch.create_unique_constraint(
            op.f("uq_chat_messages_thread_id_message_id"), ["thread_id", "message_id"]
        )
    op.create_table(
        "scan_watermarks",
        sa.Column("source", sa.String(length=128), nullable=False),
        sa.Column("checkpoint_id", sa.String(length=64), nullable=False),
        sa.Column("scanned_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("threads", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("source", name=op.f("pk_scan_watermarks")),
    )
    _move_legacy_states(op.get_bind())
    op.drop_table("thread_states")


def downgrade() -> None:
    # The checkpoints stay in the checkpointer's own tables; 0001's state table comes back empty.
    op.create_table(
        "thread_states",
        sa.Column("thread_id", sa.String(length=128), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("messages", sa.JSON(), nullable=False),
        sa.Column("summary", sa.JSON(), nullable=True),
        sa.Column("history_session_id", sa.String(length=128), nullable=False),
        sa.Column("token_usage", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["thread_id"],
            ["conversations.thread_id"],
            name=op.f("fk_thread_states_thread_id_conversations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("thread_id", name=op.f("pk_thread_states")),
    )
    op.drop_table("scan_watermarks")
    with op.batch_alter_table("chat_messages") as batch:
        batch.drop_constraint(op.f("uq_chat_messages_thread_id_message_id"), type_="unique")
        batch.drop_column("message_id")
    with op.batch_alter_table("conversations") as batch:
        batch.drop_column("origin")
        batch.drop_column("checkpoint_id")
