"""The measure of the alert rule kind ``cited_evidence_lost``: the cited evidence items a
thread's newest compression record lost (`store.compressions`, ``cited_lost``).

A thread's newest record is the one with no newer record of that thread (by ``at``, then
id): `newest_records` is that filter in SQL, for the evaluation pass to read only the
newest records at or above a rule's ``fire_at``; `newest_cited_lost` reads the live
measure of the threads that have alerts (the pass, the Alerts page, Alertmanager's
annotation). A thread with no record is left out: its measure is 0.
"""

from __future__ import annotations

from collections.abc import Collection

import sqlalchemy as sa
from sqlalchemy.orm import Session, aliased

from yuxi_dash.store.compressions import CompressionRecord


def newest_records() -> sa.ColumnElement[bool]:
    """The SQL filter for each thread's newest record: no newer record of its thread."""
    newer = aliased(CompressionRecord)
    record = CompressionRecord
    return ~sa.exists().where(
        newer.thread_id == record.thread_id,
        sa.or_(newer.at > record.at, sa.and_(newer.at == record.at, newer.id > record.id)),
    )


def newest_cited_lost(session: Session, thread_ids: Collection[str]) -> dict[str, int]:
    """``thread_id -> cited_lost`` of each named thread's newest record (none: left out)."""
    if not thread_ids:
        return {}
    record = CompressionRecord
    rows = session.execute(
        sa.select(record.thread_id, record.cited_lost).where(
            record.thread_id.in_(sorted(set(thread_ids))), newest_records()
        )
    )
    return {thread_id: int(lost) for thread_id, lost in rows}
