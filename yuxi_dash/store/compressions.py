"""The compression records: one row per compression we saw, and the reads of them.

A `CompressionRecord` is written once per summarization event of a thread (unique on the
thread and `event_key`, a SHA-256 of the event's cutoff, history file and summary): by our
core's manual compress in its own transaction, and by the projection when a checkpoint
carries a new event (our agent middleware's automatic compressions, the attached
platform's). Scanning a thread again writes nothing twice. It keeps when, automatic or
manual and by whom, tokens before and after, the messages summarized, the summary text, the
history file and its SHA-256, and the evidence ledger (`compression.evidence_ledger`) with
its counts kept beside it for the fleet's figures. A failed or refused compress writes none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, Session, mapped_column

from yuxi_dash.printable_record import Record
from yuxi_dash.store.models import Base, BigId, UTCDateTime, utcnow

TRIGGER_AUTOMATIC = "automatic"
TRIGGER_MANUAL = "manual"


class CompressionRecord(Base):
    """One compression of one thread, and what it kept in view, left recoverable or lost."""

    __tablename__ = "compressions"
    __table_args__ = (
        sa.UniqueConstraint("thread_id", "event_key"),
        sa.Index("ix_compressions_thread_id_at", "thread_id", "at"),
        sa.Index("ix_compressions_at", "at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    thread_id: Mapped[str] = mapped_column(
        sa.String(128), sa.ForeignKey("conversations.thread_id", ondelete="CASCADE")
    )
    event_key: Mapped[str] = mapped_column(sa.String(64))
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    trigger: Mapped[str] = mapped_column(sa.String(16))  # automatic | manual
    actor: Mapped[str | None] = mapped_column(sa.String(255), nullable=True)
    origin: Mapped[str] = mapped_column(sa.String(16))  # `store.origin.origin_name`
    agent_slug: Mapped[str] = mapped_column(sa.String(128))
    checkpoint_id: Mapped[str | None] = mapped_column(sa.String(128), nullable=True)
    before_tokens: Mapped[int] = mapped_column(sa.Integer)
    after_tokens: Mapped[int] = mapped_column(sa.Integer)
    compressed_messages: Mapped[int] = mapped_column(sa.Integer)
    summary: Mapped[str] = mapped_column(sa.Text)
    history_file: Mapped[str | None] = mapped_column(sa.String(1024), nullable=True)
    history_sha256: Mapped[str | None] = mapped_column(sa.String(64), nullable=True)
    ledger: Mapped[dict[str, Any]] = mapped_column(sa.JSON)
    evidence_visible: Mapped[int] = mapped_column(sa.Integer, default=0)
    evidence_recoverable: Mapped[int] = mapped_column(sa.Integer, default=0)
    evidence_lost: Mapped[int] = mapped_column(sa.Integer, default=0)
    cited_total: Mapped[int] = mapped_column(sa.Integer, default=0)
    cited_visible: Mapped[int] = mapped_column(sa.Integer, default=0)
    cited_lost: Mapped[int] = mapped_column(sa.Integer, default=0)


@dataclass(frozen=True)
class CompressionView(Record):
    """A compression record as the CLI, the API and the pages show it."""

    id: int
    thread_id: str
    at: datetime
    trigger: str
    actor: str | None
    origin: str
    agent_slug: str
    checkpoint_id: str | None
    before_tokens: int
    after_tokens: int
    compressed_messages: int
    summary: str
    history_file: str | None
    history_sha256: str | None
    ledger: dict[str, Any]

    @classmethod
    def of(cls, row: CompressionRecord) -> CompressionView:
        return cls(
            id=row.id,
            thread_id=row.thread_id,
            at=row.at,
            trigger=row.trigger,
            actor=row.actor,
            origin=row.origin,
            agent_slug=row.agent_slug,
            checkpoint_id=row.checkpoint_id,
            before_tokens=row.before_tokens,
            after_tokens=row.after_tokens,
            compressed_messages=row.compressed_messages,
            summary=row.summary,
            history_file=row.history_file,
            history_sha256=row.history_sha256,
            ledger=dict(row.ledger or {}),
        )


def list_compressions(
    session: Session, thread_id: str | None = None, *, limit: int = 100, offset: int = 0
) -> list[CompressionView]:
    """The records, newest first (of one thread when ``thread_id`` is given)."""
    query = sa.select(CompressionRecord)
    if thread_id is not None:
        query = query.where(CompressionRecord.thread_id == thread_id)
    query = (
        query.order_by(CompressionRecord.at.desc(), CompressionRecord.id.desc())
        .limit(max(0, int(limit)))
        .offset(max(0, int(offset)))
    )
    return [CompressionView.of(row) for row in session.scalars(query)]


def count_compressions(session: Session, thread_id: str | None = None) -> int:
    query = sa.select(sa.func.count()).select_from(CompressionRecord)
    if thread_id is not None:
        query = query.where(CompressionRecord.thread_id == thread_id)
    return int(session.scalar(query) or 0)


def mark_manual(session: Session, thread_id: str, checkpoint_id: str | None, actor: str) -> int:
    """Say who asked for the compression recorded at ``checkpoint_id`` (a platform compress
    we sent, recorded by the projection that showed it); the rows changed."""
    if checkpoint_id is None:
        return 0
    result = session.execute(
        sa.update(CompressionRecord)
        .where(
            CompressionRecord.thread_id == thread_id,
            CompressionRecord.checkpoint_id == checkpoint_id,
        )
        .values(trigger=TRIGGER_MANUAL, actor=actor)
    )
    return int(getattr(result, "rowcount", 0) or 0)


def insert_records(session: Session, rows: Sequence[dict[str, Any]]) -> int:
    """Insert the records not written yet (the same event twice is one row); the rows added."""
    if not rows:
        return 0
    keys = {(row["thread_id"], row["event_key"]) for row in rows}
    held = set(
        session.execute(
            sa.select(CompressionRecord.thread_id, CompressionRecord.event_key).where(
                CompressionRecord.thread_id.in_(sorted({t for t, _ in keys})),
                CompressionRecord.event_key.in_(sorted({k for _, k in keys})),
            )
        ).all()
    )
    fresh: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        key = (row["thread_id"], row["event_key"])
        if key not in held and key not in fresh:
            fresh[key] = row
    if fresh:
        session.execute(sa.insert(CompressionRecord), list(fresh.values()))
    return len(fresh)
