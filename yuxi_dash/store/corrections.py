"""The `memory_corrections` rows: add one, find one by its audit row, mark one undone, list.

Only `yuxi_dash.memory.support.corrections` writes here, in the same transaction as the
correction's audit row. `mark_undone` is a compare-and-set (only a row not yet
undone is marked), so two undos racing each other cannot both win.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash.store.models import MemoryCorrection


def correction_dict(row: MemoryCorrection) -> dict[str, Any]:
    return {
        "id": row.id,
        "audit_id": row.audit_id,
        "at": row.at.isoformat() if row.at else None,
        "actor": row.actor,
        "user_id": row.user_id,
        "group_id": row.group_id,
        "fact_uuid": row.fact_uuid,
        "action": row.action,
        "reason": row.reason,
        "ticket": row.ticket,
        "before": row.before,
        "after": row.after,
        "hits_before": row.hits_before,
        "undoes_id": row.undoes_id,
        "undone_by_audit_id": row.undone_by_audit_id,
        "undone_at": row.undone_at.isoformat() if row.undone_at else None,
    }


def add_correction(session: Session, **fields: Any) -> MemoryCorrection:
    row = MemoryCorrection(**fields)
    session.add(row)
    session.flush()
    return row


def by_audit_id(session: Session, audit_id: int) -> MemoryCorrection | None:
    return session.scalar(sa.select(MemoryCorrection).where(MemoryCorrection.audit_id == audit_id))


def by_id(session: Session, correction_id: str) -> MemoryCorrection | None:
    return session.get(MemoryCorrection, correction_id)


def mark_undone(session: Session, correction_id: str, audit_id: int, at: datetime) -> bool:
    """Mark the correction undone by `audit_id`; False when it already was."""
    result = session.execute(
        sa.update(MemoryCorrection)
        .where(MemoryCorrection.id == correction_id, MemoryCorrection.undone_by_audit_id.is_(None))
        .values(undone_by_audit_id=audit_id, undone_at=at)
        .execution_options(synchronize_session=False)
    )
    return bool(getattr(result, "rowcount", 0))
