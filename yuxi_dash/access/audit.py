"""The audit log: who did what to which target, and how it ended.

`record_audit` writes one row of `audit_log`, in the caller's session (same transaction) or its
own short one, so a refused or failed attempt is recorded even when its work was rolled back;
`audit_rows` builds many by the same rules (the caller writes them at once); `complete_audit`
finishes a "pending" row. Rules:
- `detail` holds ids, codes and counts only: keys that could carry user content or query
  parameters are dropped before writing.
- `record_audit_eventually` hands a row to a background writer when the write lock cannot be
  had now (SQLite), so a "thread is locked" refusal is recorded too; the resource owner
  (`yuxi_dash.resources`) starts it and drains it at exit.
- `audited_refusals` makes every typed refusal of an entry point one audit row.
- Every string is made storable first (a NUL becomes the four characters backslash, x, 0, 0;
  a lone surrogate its escape), then clipped to its column; a non-finite float its name.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy.orm import Session

from yuxi_dash.errors import YuxiDashError
from yuxi_dash.resources import AUDIT_WRITER, get_resources
from yuxi_dash.settings import Settings
from yuxi_dash.store.db import is_lock_failure, session_scope
from yuxi_dash.store.models import AuditEntry, utcnow

log = logging.getLogger(__name__)

_FORBIDDEN_DETAIL_KEYS = frozenset(
    {"content", "text", "message", "messages", "query", "params", "parameters", "payload", "body"}
)
_MAX_DETAIL_STRING = 500
_MAX_DETAIL_DEPTH = 8


def thread_target(thread_id: str) -> str:
    """The audit `target` of a thread."""
    return f"thread:{thread_id}"


def storable(value: str, limit: int | None = None) -> str:
    """`value` with NUL bytes and lone surrogates escaped, then clipped to `limit` characters."""
    if "\x00" in value:
        value = value.replace("\x00", "\\x00")
    value = value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value if limit is None else value[:limit]


def _clean(value: Any, depth: int = 0) -> Any:
    if depth >= _MAX_DETAIL_DEPTH:
        return "..."
    if isinstance(value, dict):
        return {
            storable(str(k), _MAX_DETAIL_STRING): _clean(v, depth + 1)
            for k, v in value.items()
            if str(k).lower() not in _FORBIDDEN_DETAIL_KEYS
        }
    if isinstance(value, list | tuple):
        return [_clean(v, depth + 1) for v in value[:50]]
    if isinstance(value, str):
        return storable(value, _MAX_DETAIL_STRING)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    return storable(str(value), _MAX_DETAIL_STRING)


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

    entry = AuditEntry(
        actor=storable(str(actor), 256),
        action=storable(str(action), 64),
        target=storable(str(target), 256),
        outcome=storable(str(outcome), 32),
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


def audit_rows(
    *, actor: str, action: str, outcome: str, rows: list[tuple[str, dict[str, Any]]]
) -> list[dict[str, Any]]:
    """The `audit_log` rows of many (target, detail) pairs, by the rules of `record_audit`, for
    a caller that writes them at once in its own transaction (the projection's refusals: one
    ``COPY``, `service.bulk_rows`)."""
    now = utcnow()
    return [
        {
            "at": now,
            "actor": storable(str(actor), 256),
            "action": storable(str(action), 64),
            "target": storable(str(target), 256),
            "outcome": storable(str(outcome), 32),
            "detail": sanitize_detail(detail),
        }
        for target, detail in rows
    ]


def complete_audit(
    entry_id: int, *, outcome: str, detail: dict[str, Any] | None, settings: Settings | None
) -> bool:
    """Finish a row written before its work ran (outcome "pending"): set the outcome and merge
    ``detail`` into what it holds, sanitized the same way. False when no such row exists."""

    with session_scope(settings) as session:
        entry = session.get(AuditEntry, entry_id)
        if entry is None:
            return False
        action = entry.action
        entry.outcome = storable(str(outcome), 32)
        entry.detail = sanitize_detail({**(entry.detail or {}), **(detail or {})})
    log.info("audit %s %s", action, outcome)
    return True


_RETRY_SECONDS = 120.0
_EXIT_WAIT_SECONDS = 15.0
# A deferred row, or None: the writer's signal to stop.
_pending: queue.Queue[tuple[dict[str, Any], Settings | None, float] | None] = queue.Queue()


def _drain() -> None:
    while True:
        item = _pending.get()
        try:
            if item is None:
                return
            fields, settings, give_up_at = item
            while True:
                try:
                    record_audit(**fields, settings=settings)
                    break
                except Exception as exc:  # noqa: BLE001 - retried, then logged without detail
                    if not is_lock_failure(exc) or time.monotonic() > give_up_at:
                        log.error("audit row for %s could not be written", fields.get("action"))
                        break
                    time.sleep(0.05)
        finally:
            _pending.task_done()


def _start_writer() -> threading.Thread:
    writer = threading.Thread(target=_drain, name="audit-retry", daemon=True)
    writer.start()
    return writer


def _stop_writer(writer: threading.Thread) -> None:
    """Let the deferred rows land (a CLI run exits soon after a refusal), then end the thread.

    The wait is bounded; rows still blocked by then are left to the daemon thread.
    """
    if not writer.is_alive():
        return
    wait_for_pending_audit(_EXIT_WAIT_SECONDS)
    _pending.put(None)
    writer.join(timeout=1.0)


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
    fields: dict[str, Any] = {
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
        if not is_lock_failure(exc):
            raise
    # The writer is the resource owner's: started on first need, drained and stopped at exit.
    owner = get_resources()
    writer = owner.acquire(AUDIT_WRITER, None, _start_writer, _stop_writer)
    if not writer.is_alive():  # stopped by a close since: a new one
        owner.release(AUDIT_WRITER, None)
        owner.acquire(AUDIT_WRITER, None, _start_writer, _stop_writer)
    _pending.put((fields, settings, time.monotonic() + _RETRY_SECONDS))


def wait_for_pending_audit(timeout: float = 30.0) -> bool:
    """Block until every deferred audit row is written (True) or `timeout` passes (False)."""
    deadline = time.monotonic() + timeout
    while _pending.unfinished_tasks:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@contextmanager
def audited_refusals(
    *,
    actor: str,
    action: str,
    target: str,
    detail: dict[str, Any] | None = None,
    settings: Settings | None = None,
) -> Iterator[None]:
    """Every typed refusal raised inside is one audit row (outcome refused, or failed for 5xx).

    The row is written after the block's own transaction ended (eventually, if
    the database is write-locked); an audit hiccup never hides the refusal.
    """

    try:
        yield
    except YuxiDashError as exc:
        try:
            record_audit_eventually(
                actor=actor,
                action=action,
                target=target,
                outcome="refused" if exc.status_code < 500 else "failed",
                detail={**(detail or {}), "code": exc.code},
                settings=settings,
            )
        except Exception:  # noqa: BLE001 - the refusal must reach the caller, not the hiccup
            log.error("audit row for a refused %s could not be written", action)
        raise
