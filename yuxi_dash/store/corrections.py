"""The `memory_corrections` rows: add one, find one by its audit row, mark one undone, list
one user's for memory as of a moment (`user_corrections`: those after a moment, oldest first,
snapshots without their embeddings; `count_corrections` counts the others).

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


# A snapshot map (fact uuid -> edge or null) without each edge's `fact_embedding`, built by the
# database: a 1,536-dimension embedding is about 20 KB of JSON per edge, never needed here.
_STRIPPED = {
    "postgresql": """(SELECT coalesce(jsonb_object_agg(k, CASE WHEN jsonb_typeof(v) = 'object'
  THEN v - 'fact_embedding' ELSE v END), '{{}}'::jsonb)
  FROM jsonb_each(coalesce(memory_corrections."{column}"::jsonb, '{{}}'::jsonb)) AS t(k, v))""",
    "sqlite": """(SELECT json_group_object(key, CASE WHEN type = 'object'
  THEN json_remove(value, '$.fact_embedding') ELSE value END)
  FROM json_each(coalesce(memory_corrections."{column}", '{{}}')))""",
}
HISTORY_COLUMNS = ("id", "audit_id", "at", "actor", "action", "reason", "ticket", "fact_uuid")


def _snapshots(session: Session, column: str) -> Any:
    dialect = session.get_bind().dialect.name
    if dialect not in _STRIPPED:
        return getattr(MemoryCorrection, column)  # stripped in Python by the caller
    return sa.type_coerce(sa.literal_column(_STRIPPED[dialect].format(column=column)), sa.JSON)


def user_corrections(
    session: Session, user_id: str, *, after: datetime | None, limit: int
) -> list[dict[str, Any]]:
    """A user's first `limit` corrections and undos made after `after` (None: all), oldest
    first (time, then audit id): `HISTORY_COLUMNS`, `before` and `after` without embeddings."""
    query = sa.select(
        *(getattr(MemoryCorrection, c) for c in HISTORY_COLUMNS),
        _snapshots(session, "before").label("before"),
        _snapshots(session, "after").label("after"),
    ).where(MemoryCorrection.user_id == user_id)
    if after is not None:
        query = query.where(MemoryCorrection.at > after)
    query = query.order_by(MemoryCorrection.at, MemoryCorrection.audit_id).limit(limit)
    found = []
    for row in session.execute(query).mappings():
        item = dict(row)
        for key in ("before", "after"):
            snaps = item[key] or {}
            item[key] = {
                u: ({k: v for k, v in s.items() if k != "fact_embedding"} if s else None)
                for u, s in snaps.items()
            }
        found.append(item)
    return found


def count_corrections(
    session: Session, user_id: str, *, after: datetime | None = None, until: datetime | None = None
) -> int:
    """How many corrections and undos of the user were made after `after` and up to `until`."""
    query = sa.select(sa.func.count()).where(MemoryCorrection.user_id == user_id)
    if after is not None:
        query = query.where(MemoryCorrection.at > after)
    if until is not None:
        query = query.where(MemoryCorrection.at <= until)
    return int(session.scalar(query) or 0)
