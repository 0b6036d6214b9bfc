"""The chat-record reads behind a fact's provenance: which message an episode came from.

Two parameterized reads on `chat_messages` joined to the user's own
`conversations` (so a match can never come from another user's thread):
messages whose text contains a given passage, and messages of a thread (or all
the user's threads) written within a window around a moment. Both take `until`:
a message written after it (after the fact it would explain) is never returned.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash.store.models import ChatMessage, Conversation

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
