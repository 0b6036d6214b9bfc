"""Platform checkpoints refused by the allow-list: each refusal audited, the refused threads listed.

A platform checkpoint that names a type outside `store.checkpoint_serde`'s
allow-list is `CheckpointRefused` for its thread: nothing it names is called,
the thread is not projected, and the rest of the scan goes on.
`record_refusal` writes its audit row (action `REFUSED_ACTION`, target the
thread, outcome ``refused``, detail: the code, the type it named as
`checkpoint_serde.type_name` shows it, and who was reading: ``scan`` or
``read``); it is written after the thread's row lock is released (the scan)
or outside any transaction (a page or CLI read), and waits in the background
when the database is write-locked.

`refused_threads` lists, from our own tables, the threads whose last refusal
is newer than their projection (the platform has not written a checkpoint we
could read since): what `yuxi-dash attach status` shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from yuxi_dash.audit import record_audit_eventually, thread_target
from yuxi_dash.errors import CheckpointRefused
from yuxi_dash.records import Record
from yuxi_dash.settings import Settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AuditEntry, Conversation

REFUSED_ACTION = "attach.checkpoint_refused"
ACTOR = "attach"
SHOWN = 20
_TARGET_PREFIX = thread_target("")


@dataclass(frozen=True)
class RefusedThread(Record):
    """A thread whose checkpoint was refused and not projected since."""

    thread_id: str
    refused_at: datetime
    type: str  # the type the checkpoint named (`checkpoint_serde.type_name`)
    via: str  # scan or read


def record_refusal(
    thread_id: str, error: CheckpointRefused, *, via: str, settings: Settings | None = None
) -> None:
    """The audit row of one refused read of a platform thread."""
    record_audit_eventually(
        actor=ACTOR,
        action=REFUSED_ACTION,
        target=thread_target(thread_id),
        outcome="refused",
        detail={"code": error.code, "type": str(error.detail.get("type", "?")), "via": via},
        settings=settings,
    )


def refused_threads(settings: Settings | None = None, *, limit: int = SHOWN) -> list[RefusedThread]:
    """The threads refused since their last projection, the most recent refusal first."""
    last = (
        sa.select(AuditEntry.target, sa.func.max(AuditEntry.id).label("last_id"))
        .where(AuditEntry.action == REFUSED_ACTION)
        .group_by(AuditEntry.target)
        .subquery()
    )
    with session_scope(settings) as session:
        rows = session.execute(
            sa.select(AuditEntry, Conversation.updated_at)
            .join(last, AuditEntry.id == last.c.last_id)
            .outerjoin(
                Conversation,
                Conversation.thread_id
                == sa.func.substr(AuditEntry.target, len(_TARGET_PREFIX) + 1),
            )
            .order_by(AuditEntry.id.desc())
        ).all()
    found: list[RefusedThread] = []
    for entry, projected_at in rows:
        if projected_at is not None and projected_at > entry.at:
            continue  # projected again since: the platform wrote a checkpoint we could read
        detail = entry.detail or {}
        found.append(
            RefusedThread(
                thread_id=entry.target[len(_TARGET_PREFIX) :],
                refused_at=entry.at,
                type=str(detail.get("type", "?")),
                via=str(detail.get("via", "?")),
            )
        )
        if len(found) >= limit:
            break
    return found
