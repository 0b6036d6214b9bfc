"""The audit log: who did what to which target, and how it ended.

`record_audit` is the one writer of `audit_log`. It writes in the caller's
session when given one (same transaction), otherwise in its own short
transaction, so a refused or failed attempt is recorded even when the work it
guarded was rolled back. `detail` is for ids, codes and counts only: keys that
could carry user content or query parameters are dropped before writing.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy.orm import Session

from yuxi_dash.settings import Settings

log = logging.getLogger(__name__)

OUTCOMES = ("completed", "no_op", "refused", "failed", "ok", "viewed")
_FORBIDDEN_DETAIL_KEYS = frozenset(
    {"content", "text", "message", "messages", "query", "params", "parameters", "payload", "body"}
)
_MAX_DETAIL_STRING = 500


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            str(k): _clean(v)
            for k, v in value.items()
            if str(k).lower() not in _FORBIDDEN_DETAIL_KEYS
        }
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value][:50]
    if isinstance(value, str):
        return value[:_MAX_DETAIL_STRING]
    if value is None or isinstance(value, bool | int | float):
        return value
    return str(value)[:_MAX_DETAIL_STRING]


def sanitize_detail(detail: dict[str, Any] | None) -> dict[str, Any]:
    """Only ids, codes and numbers survive: content-like keys are dropped, strings clipped."""
    return _clean(dict(detail or {}))


def record_audit(
    *,
    actor: str,
    action: str,
    target: str,
    outcome: str,
    detail: dict[str, Any] | None = None,
    session: Session | None = None,
    settings: Settings | None = None,
) -> int | None:
    """Append one audit row; returns its id (None when written in the caller's unflushed session)."""
    from yuxi_dash.store.db import session_scope
    from yuxi_dash.store.models import AuditEntry

    entry = AuditEntry(
        actor=actor[:256],
        action=action[:64],
        target=target[:256],
        outcome=outcome[:32],
        detail=sanitize_detail(detail),
    )
    if session is not None:
        session.add(entry)
        session.flush()
        return entry.id
    with session_scope(settings) as own:
        own.add(entry)
        own.flush()
        entry_id = entry.id
    log.info("audit %s %s -> %s", action, outcome, target)
    return entry_id
