"""The audit log: who did what to which target, and how it ended.

`record_audit` is the one writer of `audit_log`. It writes in the caller's
session when given one (same transaction), otherwise in its own short
transaction, so a refused or failed attempt is recorded even when the work it
guarded was rolled back. `detail` is for ids, codes and counts only: keys that
could carry user content or query parameters are dropped before writing.

`record_audit_eventually` is for refusals that happen while another writer
holds the database (SQLite has one writer at a time): when the write lock
cannot be had now, the row is handed to a background writer that retries
until the lock is free, so even a "thread is locked" refusal is recorded.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
from typing import Any

from sqlalchemy.orm import Session

from yuxi_dash.settings import Settings

log = logging.getLogger(__name__)

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
    log.info("audit %s %s", action, outcome)  # the target names a user or thread: not logged
    return entry_id


_RETRY_SECONDS = 120.0
_EXIT_WAIT_SECONDS = 15.0
_pending: queue.Queue[tuple[dict[str, Any], Settings | None, float]] = queue.Queue()
_writer_lock = threading.Lock()
_writer: threading.Thread | None = None


def _is_locked(exc: BaseException) -> bool:
    return (
        "locked" in str(exc).lower()
        or getattr(getattr(exc, "orig", None), "sqlstate", "") == "55P03"
    )


def _drain() -> None:
    while True:
        fields, settings, give_up_at = _pending.get()
        try:
            while True:
                try:
                    record_audit(**fields, settings=settings)
                    break
                except Exception as exc:  # noqa: BLE001 - retried, then logged without detail
                    if not _is_locked(exc) or time.monotonic() > give_up_at:
                        log.error("audit row for %s could not be written", fields.get("action"))
                        break
                    time.sleep(0.05)
        finally:
            _pending.task_done()


def record_audit_eventually(
    *,
    actor: str,
    action: str,
    target: str,
    outcome: str,
    detail: dict[str, Any] | None = None,
    settings: Settings | None = None,
) -> None:
    """Write now if possible; if the database is write-locked, retry in the background."""
    global _writer
    fields = {
        "actor": actor,
        "action": action,
        "target": target,
        "outcome": outcome,
        "detail": sanitize_detail(detail),
    }
    try:
        record_audit(**fields, settings=settings)
        return
    except Exception as exc:
        if not _is_locked(exc):
            raise
    with _writer_lock:
        if _writer is None or not _writer.is_alive():
            _writer = threading.Thread(target=_drain, name="audit-retry", daemon=True)
            _writer.start()
            atexit.register(wait_for_pending_audit, _EXIT_WAIT_SECONDS)  # a CLI run exits soon
    _pending.put((fields, settings, time.monotonic() + _RETRY_SECONDS))


def wait_for_pending_audit(timeout: float = 30.0) -> bool:
    """Block until every deferred audit row is written (True) or `timeout` passes (False)."""
    deadline = time.monotonic() + timeout
    while _pending.unfinished_tasks:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
