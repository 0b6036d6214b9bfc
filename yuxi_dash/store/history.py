"""Append-only records of the store: the never-compressed chat record and the audit log.

Every function takes a Session first and only reads: one thread's chat record
in sequence order, a user's latest chat messages across threads (oldest
first), and audit rows (newest first, filtered by actor, action, target,
outcome and time). The reads behind a fact's provenance join `chat_messages` to the
user's own `conversations` (a match never comes from another user's thread):
messages holding a passage, and messages written near a moment; both take `until`,
and never return a message written after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
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


MAX_CANDIDATES = 50
MAX_PASSAGE_CHARS = 500


def _row(message: ChatMessage) -> dict[str, Any]:
    return {
        "thread_id": message.thread_id,
        "sequence": message.sequence,
        "role": message.role,
        "content": message.content,
        "created_at": message.created_at,
    }


def _users_messages(user_id: str) -> sa.Select[ChatMessage]:
    return (
        sa.select(ChatMessage)
        .join(Conversation, Conversation.thread_id == ChatMessage.thread_id)
        .where(Conversation.user_id == user_id, Conversation.deleted_at.is_(None))
    )


def _until(query: sa.Select[Any], until: datetime | None) -> sa.Select[Any]:
    return query if until is None else query.where(ChatMessage.created_at <= until)


def messages_containing(
    session: Session,
    user_id: str,
    passage: str,
    *,
    until: datetime | None = None,
    limit: int = MAX_CANDIDATES,
) -> list[dict[str, Any]]:
    """The user's chat messages whose text contains `passage` (case-insensitive, literal),
    written at or before `until` when given."""
    passage = passage.strip()[:MAX_PASSAGE_CHARS]
    if not passage:
        return []
    query = _users_messages(user_id).where(
        sa.func.lower(ChatMessage.content).contains(passage.lower(), autoescape=True)
    )
    query = _until(query, until).order_by(ChatMessage.created_at, ChatMessage.id).limit(limit)
    return [_row(m) for m in session.scalars(query)]


def messages_near(
    session: Session,
    user_id: str,
    moment: datetime,
    *,
    thread_id: str | None = None,
    window: timedelta = timedelta(days=1),
    until: datetime | None = None,
    limit: int = 200,
) -> list[dict[str, Any]]:
    """The user's messages within `window` of `moment` (in one thread when given), written at
    or before `until` when given."""
    query = _users_messages(user_id).where(
        ChatMessage.created_at >= moment - window, ChatMessage.created_at <= moment + window
    )
    if thread_id is not None:
        query = query.where(ChatMessage.thread_id == thread_id)
    query = _until(query, until).order_by(ChatMessage.created_at, ChatMessage.id).limit(limit)
    return [_row(m) for m in session.scalars(query)]


def thread_exists(session: Session, user_id: str, thread_id: str) -> bool:
    """Whether `thread_id` is one of the user's threads."""
    found = session.scalar(
        sa.select(sa.func.count())
        .select_from(Conversation)
        .where(Conversation.thread_id == thread_id, Conversation.user_id == user_id)
    )
    return bool(found)
