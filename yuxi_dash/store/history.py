"""Append-only records of the store: the never-compressed chat record and the audit log.

Every function takes a Session first and only reads: one thread's chat record
in sequence order, a user's latest chat messages across threads (oldest
first), and audit rows (newest first, filtered by actor, action, target,
outcome and time).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash.printable_record import Record
from yuxi_dash.store.models import AuditEntry, ChatMessage, Conversation


@dataclass(frozen=True)
class ChatRecordMessage(Record):
    thread_id: str
    sequence: int
    role: str
    content: str
    created_at: datetime


@dataclass(frozen=True)
class AuditRecord(Record):
    id: int
    at: datetime
    actor: str
    action: str
    target: str
    outcome: str
    detail: dict[str, Any]


def chat_message(row: ChatMessage) -> ChatRecordMessage:
    return ChatRecordMessage(
        thread_id=row.thread_id,
        sequence=row.sequence,
        role=row.role,
        content=row.content,
        created_at=row.created_at,
    )


def chat_record(session: Session, thread_id: str) -> list[ChatRecordMessage]:
    """The full, never-compressed chat record of a thread, in sequence order."""
    rows = session.scalars(
        sa.select(ChatMessage)
        .where(ChatMessage.thread_id == thread_id)
        .order_by(ChatMessage.sequence)
    )
    return [chat_message(r) for r in rows]


def user_chat_messages(
    session: Session, user_id: str, limit: int = 500, *, role: str | None = None
) -> list[ChatRecordMessage]:
    """The latest `limit` chat messages across a user's threads, oldest first."""
    query = (
        sa.select(ChatMessage)
        .join(Conversation, Conversation.thread_id == ChatMessage.thread_id)
        .where(Conversation.user_id == user_id)
        .order_by(ChatMessage.created_at.desc(), ChatMessage.id.desc())
        .limit(limit)
    )
    if role:
        query = query.where(ChatMessage.role == role)
    rows = list(session.scalars(query))
    rows.reverse()
    return [chat_message(r) for r in rows]


def list_audit(
    session: Session,
    *,
    actor: str | None = None,
    action: str | None = None,
    target: str | None = None,
    since: datetime | None = None,
    outcome: str | None = None,
    limit: int = 500,
) -> list[AuditRecord]:
    """Audit rows, newest first."""
    query = sa.select(AuditEntry).order_by(AuditEntry.at.desc(), AuditEntry.id.desc()).limit(limit)
    if actor:
        query = query.where(AuditEntry.actor == actor)
    if action:
        query = query.where(AuditEntry.action == action)
    if target:
        query = query.where(AuditEntry.target == target)
    if outcome:
        query = query.where(AuditEntry.outcome == outcome)
    if since is not None:
        query = query.where(AuditEntry.at >= since)
    return [
        AuditRecord(
            id=r.id,
            at=r.at,
            actor=r.actor,
            action=r.action,
            target=r.target,
            outcome=r.outcome,
            detail=dict(r.detail or {}),
        )
        for r in session.scalars(query)
    ]
