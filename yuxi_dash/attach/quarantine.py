"""The attach quarantine: platform threads a scan could not project, and flagged ones.

A thread whose projection raises a typed per-thread refusal (a `YuxiDashError`
not in `TRANSIENT`: an id our tables cannot hold, NUL text, impossible usage,
a checkpoint naming a type outside `store.checkpoint_serde`'s allow-list:
``checkpoint_refused``) or fails in a way only it does is **quarantined**: one
`attach_quarantine` row (source, SHA-256 of its exact id, its id made
printable, its newest checkpoint, the error's code and reason) and one audit
row; the scan moves past it. A page's or the CLI's read the allow-list refuses
(`refused_read`) is audited each time and quarantines the thread too. Scans
skip it while its newest checkpoint is the one quarantined; a thread that
projects leaves the quarantine. A thread projected with a warning (newest
checkpoint dated past the platform's clock) is **flagged**. Outside strings
are stored escaped (`printable`) and shown literally.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa

from yuxi_dash.access.audit import record_audit, record_audit_eventually
from yuxi_dash.errors import (
    CheckpointRefused,
    StaleState,
    StoreUnavailable,
    ThreadBusy,
    WorkdirUnavailable,
)
from yuxi_dash.printable_record import Record
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AttachQuarantine, utcnow

log = logging.getLogger(__name__)

QUARANTINED = "quarantined"
FLAGGED = "flagged"
SCAN_ACTOR = "system:attach-scan"
READ_ACTOR = "system:attach-read"  # a page's or the CLI's read of a platform thread
AUDIT_ACTION = "attach_quarantine"
# typed errors that are about the moment, not the thread: retried, never quarantined
TRANSIENT: tuple[type[Exception], ...] = (
    ThreadBusy,
    StaleState,
    StoreUnavailable,
    WorkdirUnavailable,
)
_LABEL = 200
_CHUNK = 500


def printable(value: str, limit: int = _LABEL) -> str:
    """An outside string with every control character escaped (``\\n``, ``\\x1b``), cut."""
    out = "".join(
        c
        if c.isprintable() and not 0xD800 <= ord(c) <= 0xDFFF
        else c.encode("unicode_escape", "backslashreplace").decode("ascii")
        for c in value
    )
    return out if len(out) <= limit else out[: limit - 1] + "…"


def thread_key(thread_id: str) -> str:
    """The SHA-256 of the exact thread id (what the quarantine is keyed by)."""
    return hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Problem:
    """One thread a scan quarantined or flagged (the exact id and checkpoint, for keys)."""

    thread_id: str
    checkpoint_id: str
    code: str
    reason: str
    detail: dict[str, str] = field(default_factory=dict)  # more for its audit row (a type)


@dataclass(frozen=True)
class QuarantineEntry(Record):
    """One `attach_quarantine` row as the status shows it (strings already printable)."""

    source: str
    thread: str
    checkpoint_id: str
    action: str
    code: str
    reason: str
    first_seen_at: datetime
    last_seen_at: datetime


def held(settings: Settings, source: str, action: str) -> dict[str, str]:
    """thread key -> the checkpoint it was quarantined (or flagged) at, for ``source``."""
    with session_scope(settings) as session:
        rows = session.execute(
            sa.select(AttachQuarantine.thread_key, AttachQuarantine.checkpoint_id).where(
                AttachQuarantine.source == source, AttachQuarantine.action == action
            )
        )
        return {key: checkpoint for key, checkpoint in rows}


def record(
    settings: Settings,
    source: str,
    problems: Iterable[Problem],
    action: str,
    *,
    audit: bool = True,
) -> int:
    """Store each problem (one row per thread and action) and audit the new or moved ones."""
    added = 0
    now = utcnow()
    with session_scope(settings) as session:
        for problem in problems:
            key = thread_key(problem.thread_id)
            checkpoint = printable(problem.checkpoint_id, 64)
            row = session.scalar(
                sa.select(AttachQuarantine).where(
                    AttachQuarantine.source == source,
                    AttachQuarantine.thread_key == key,
                    AttachQuarantine.action == action,
                )
            )
            if row is not None and (row.checkpoint_id, row.code) == (checkpoint, problem.code):
                row.last_seen_at = now
                continue  # already recorded and audited at this checkpoint
            if row is None:
                row = AttachQuarantine(
                    source=source, thread_key=key, action=action, first_seen_at=now
                )
                session.add(row)
            row.thread_label = printable(problem.thread_id)
            row.checkpoint_id = checkpoint
            row.code = problem.code[:64]
            row.reason = printable(problem.reason, 500)
            row.last_seen_at = now
            added += 1
            if not audit:
                continue
            record_audit(
                actor=SCAN_ACTOR,
                action=AUDIT_ACTION,
                target=f"thread:{row.thread_label}"[:256],
                outcome="refused" if action == QUARANTINED else "flagged",
                detail={
                    **problem.detail,
                    "code": row.code,
                    "source": source,
                    "checkpoint_id": checkpoint,
                    "via": "scan",
                },
                session=session,
            )
    return added


def refused_read(
    settings: Settings | None,
    source: str,
    thread_id: str,
    checkpoint_id: str | None,
    error: CheckpointRefused,
) -> None:
    """A page's or the CLI's read refused by the allow-list: audited, and the thread quarantined.

    The audit row is written even while the database is write-locked (in the
    background); the quarantine row is best effort (the refusal itself reaches
    the reader either way).
    """
    kind = str(error.detail.get("type", "?"))
    record_audit_eventually(
        actor=READ_ACTOR,
        action=AUDIT_ACTION,
        target=f"thread:{printable(thread_id)}"[:256],
        outcome="refused",
        detail={"code": error.code, "type": kind, "source": source, "via": "read"},
        settings=settings,
    )
    problem = Problem(thread_id, checkpoint_id or "", error.code, error.message, {"type": kind})
    try:
        record(settings or get_settings(), source, [problem], QUARANTINED, audit=False)
    except Exception as exc:  # noqa: BLE001 - the refusal must reach the reader, not the hiccup
        log.warning("attach: quarantining a refused read failed (%s)", type(exc).__name__)


def lift(settings: Settings, source: str, thread_ids: Iterable[str], action: str) -> int:
    """Take these threads out of the quarantine (or unflag them); returns the rows removed."""
    keys = sorted({thread_key(t) for t in thread_ids})
    removed = 0
    with session_scope(settings) as session:
        for start in range(0, len(keys), _CHUNK):
            result = session.execute(
                sa.delete(AttachQuarantine).where(
                    AttachQuarantine.source == source,
                    AttachQuarantine.action == action,
                    AttachQuarantine.thread_key.in_(keys[start : start + _CHUNK]),
                )
            )
            removed += int(getattr(result, "rowcount", 0) or 0)
    return removed


def entries(
    settings: Settings, source: str | None = None, *, limit: int = 200
) -> list[QuarantineEntry]:
    """The quarantined and flagged threads (of ``source``, or every source), newest first."""
    query = sa.select(AttachQuarantine).order_by(
        AttachQuarantine.last_seen_at.desc(), AttachQuarantine.id.desc()
    )
    if source is not None:
        query = query.where(AttachQuarantine.source == source)
    with session_scope(settings) as session:
        return [
            QuarantineEntry(
                source=row.source,
                thread=row.thread_label,
                checkpoint_id=row.checkpoint_id,
                action=row.action,
                code=row.code,
                reason=row.reason,
                first_seen_at=row.first_seen_at,
                last_seen_at=row.last_seen_at,
            )
            for row in session.scalars(query.limit(limit))
        ]
