"""Compressing an attached platform's thread: through the platform's endpoint, never here.

`compress_on_platform` is what `sources.compress_thread_context` runs for an attached
thread when ``YUXI_DASH_PLATFORM_URL`` is set (docs/architecture.md, "A platform compress").
- First the refusals we can decide ourselves: the operator role, the thread (404 / deleted /
  another user's), the stale click (the checkpoint the operator saw against the platform
  checkpointer's newest: 409 stale_state). That newest is sent as ``expected_checkpoint_id``.
- Nothing is locked on our side while the call runs; only its audit row is written.
- On 200 the thread is projected again at once (`attach.refresh`), before the next scan.
- A lost answer (platform_outcome_unknown), or a 200 we cannot read (compressed_not_projected),
  is never a second call: the newest checkpoint is read again, the error says if a summary landed.
- Every HTTP attempt is one audit row (action ``compress``), written "pending" before it is
  sent and completed when it ends (HTTP status, code, latency, pressure after); a refusal
  before any call is one row too. A 422 is remembered per agent (`store.origin`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from yuxi_dash import validation
from yuxi_dash.access.audit import (
    complete_audit,
    record_audit,
    record_audit_eventually,
    thread_target,
)
from yuxi_dash.access.roles import Actor, Role, require_role
from yuxi_dash.attach.platform_store import platform_store
from yuxi_dash.attach.refresh import newest_checkpoint_id, reproject_thread
from yuxi_dash.compression.state_format import SUMMARIZATION_EVENT_KEY
from yuxi_dash.errors import (
    CompressedNotProjected,
    CompressionUnsupported,
    PlatformAuthFailed,
    PlatformBadResponse,
    PlatformOutcomeUnknown,
    PlatformUnavailable,
    StaleState,
    ThreadBusy,
    ThreadDeleted,
    ThreadNotFound,
    YuxiDashError,
)
from yuxi_dash.platform.client import Attempt, platform_client
from yuxi_dash.settings import Settings
from yuxi_dash.store.checkpointer import ThreadCheckpoint, checkpoint_of
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Conversation
from yuxi_dash.store.origin import COMPRESS_ACTION

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlatformCompressed:
    """What the platform did, in the fields of our `CompressResult`."""

    thread_id: str
    status: str
    before_tokens: int
    after_tokens: int
    compressed_messages: int
    file_path: str | None
    reason: str | None
    checkpoint_id: str | None
    request_id: str | None = None
    attempts: list[Attempt] = field(default_factory=list)


def _pressure(settings: Settings, thread_id: str) -> float | None:
    with session_scope(settings) as session:
        value = session.scalar(
            sa.select(Conversation.summary_pressure_ratio).where(
                Conversation.thread_id == thread_id
            )
        )
    return round(float(value), 6) if value is not None else None


def _summary_event(checkpoint: ThreadCheckpoint | None) -> Any:
    return checkpoint.values.get(SUMMARIZATION_EVENT_KEY) if checkpoint is not None else None


# what an attempt's row says as soon as the attempt ends (the compress's end may refine it)
_ATTEMPT_OUTCOMES = {
    "completed": "completed",
    "no_op": "no_op",
    PlatformOutcomeUnknown.code: "unknown",
    CompressedNotProjected.code: "unknown",
    PlatformUnavailable.code: "failed",
    PlatformAuthFailed.code: "failed",
    PlatformBadResponse.code: "failed",
    ThreadNotFound.code: "refused",
    StaleState.code: "refused",
    ThreadBusy.code: "refused",
    CompressionUnsupported.code: "refused",
}


class _Audit:
    """The rows of one compress: one per attempt, written "pending" before the attempt is sent
    and completed when it ends, the last one again when the compress ends; or one refusal."""

    def __init__(self, actor: Actor, thread_id: str, settings: Settings, base: dict[str, Any]):
        self.actor = actor
        self.target = thread_target(thread_id)
        self.settings = settings
        self.base = base
        self.attempts: list[Attempt] = []
        self._rows: dict[int, int | None] = {}  # attempt number -> its row's id

    def start(self, number: int, request_id: str, idempotency_key: str) -> None:
        """The attempt's row, before anything is sent (raises: no call goes out unaudited)."""
        self._rows[number] = record_audit(
            actor=self.actor.id,
            action=COMPRESS_ACTION,
            target=self.target,
            outcome="pending",
            detail={
                **self.base,
                "attempt": number,
                "request_id": request_id,
                "idempotency_key": idempotency_key,
            },
            settings=self.settings,
        )

    def end(self, attempt: Attempt) -> None:
        """The attempt ended: its row says how, at once."""
        self.attempts.append(attempt)
        self._complete(attempt, _ATTEMPT_OUTCOMES.get(attempt.code, "failed"), {})

    def write(self, outcome: str, code: str, *, extra: dict[str, Any] | None = None) -> None:
        """The compress ended: the last attempt's row gets the outcome (or one refusal row)."""
        if self.attempts:
            self._complete(self.attempts[-1], outcome, extra or {})
            return
        self._insert(outcome, {**self.base, **(extra or {}), "code": code})

    def _complete(self, attempt: Attempt, outcome: str, extra: dict[str, Any]) -> None:
        detail = {
            **self.base,
            **extra,
            "attempt": attempt.number,
            "request_id": attempt.request_id,
            "idempotency_key": attempt.idempotency_key,
            "http_status": attempt.http_status,
            "code": attempt.code,
            "latency_ms": attempt.latency_ms,
            "platform_ms": attempt.platform_ms,
        }
        entry_id = self._rows.get(attempt.number)
        try:
            if entry_id is not None and complete_audit(
                entry_id, outcome=outcome, detail=detail, settings=self.settings
            ):
                return
        except Exception:  # noqa: BLE001 - a row of its own instead, below
            log.warning("could not complete the pending audit row of a platform compress attempt")
        self._rows[attempt.number] = None  # a later completion inserts too: a row, never none
        self._insert(outcome, detail)

    def _insert(self, outcome: str, detail: dict[str, Any]) -> None:
        try:
            record_audit_eventually(
                actor=self.actor.id,
                action=COMPRESS_ACTION,
                target=self.target,
                outcome=outcome,
                detail=detail,
                settings=self.settings,
            )
        except Exception:  # the attempt's own outcome must reach the caller
            log.exception("could not write the audit row for a platform compress attempt")


def _outcome_of(exc: YuxiDashError) -> str:
    if isinstance(exc, PlatformOutcomeUnknown):
        return "unknown"
    return "refused" if exc.status_code < 500 else "failed"


@dataclass(frozen=True)
class AttachedRow:
    """The row of an attached thread as the seam read it (detached from any session)."""

    thread_id: str
    user_id: str
    agent_slug: str
    status: str
    summary_pressure_ratio: float | None


def compress_on_platform(
    thread: AttachedRow,
    *,
    actor: Actor,
    expected_checkpoint_id: str | None,
    user_id: str | None,
    settings: Settings,
    caller_ids: Mapping[str, str] | None = None,
) -> PlatformCompressed:
    """Compress an attached thread through its platform (see the module's steps).

    `caller_ids` are extra audit detail (our API caller's ids, `caller_<key>`).
    """
    thread_id = thread.thread_id
    client = None
    base: dict[str, Any] = {
        "role": actor.role.label,
        "via": actor.via,
        "platform": None,
        **(caller_ids or {}),
    }
    if expected_checkpoint_id is not None:
        base["expected_checkpoint_id"] = expected_checkpoint_id
    audit = _Audit(actor, thread_id, settings, base)
    try:
        validation.thread_id(thread_id)
        validation.optional_identifier(user_id, "user id")
        validation.optional_identifier(expected_checkpoint_id, "expected checkpoint id")
        require_role(actor, Role.OPERATOR, action="compressing a thread")
        client = platform_client(settings)
        base["platform"] = client.label
        if user_id is not None and thread.user_id != user_id:
            raise ThreadNotFound(f"thread {thread_id} not found")
        if thread.status == "deleted":
            raise ThreadDeleted(f"thread {thread_id} is deleted")
        base["agent"] = thread.agent_slug
        before_pressure = thread.summary_pressure_ratio
        base["pressure_before"] = round(before_pressure, 6) if before_pressure is not None else None
        seen = newest_checkpoint_id(settings, thread_id)
        if expected_checkpoint_id is not None and seen != expected_checkpoint_id:
            raise StaleState(
                f"thread {thread_id} has a newer state at the platform than the one you saw; "
                "reload before compressing"
            )
        body = client.compress(
            thread_id,
            expected_checkpoint_id=seen,
            before_attempt=audit.start,
            on_attempt=audit.end,
        )
    except CompressedNotProjected as exc:  # a 200 we could not read: it may have compressed
        landed = _after_lost_answer(settings, thread_id, seen, audit)
        audit.write("unknown", exc.code, extra={"summary_landed": bool(landed)})
        raise CompressedNotProjected(
            f"{exc.message}. Thread {thread_id}: {_landed_state(landed)}",
            summary_landed=bool(landed),
            checkpoint_id=landed,
        ) from None
    except PlatformOutcomeUnknown as exc:
        landed = _after_lost_answer(settings, thread_id, seen, audit)
        audit.write("unknown", exc.code, extra={"summary_landed": bool(landed)})
        raise PlatformOutcomeUnknown(
            f"{exc.message}; the call was not sent again. Thread {thread_id}: "
            f"{_landed_state(landed)}",
            summary_landed=bool(landed),
            checkpoint_id=landed,
        ) from None
    except YuxiDashError as exc:
        extra = (
            {"unsupported_agent": base.get("agent")}
            if isinstance(exc, CompressionUnsupported)
            else None
        )
        audit.write(_outcome_of(exc), exc.code, extra=extra)
        raise
    except Exception as exc:
        audit.write("failed", type(exc).__name__)
        raise
    status = str(body["status"])
    try:
        latest = reproject_thread(settings, thread_id)
        after = _pressure(settings, thread_id)
    except Exception as exc:  # the platform did compress: say so, and audit it
        audit.write(status, status, extra={"not_projected": type(exc).__name__})
        raise CompressedNotProjected(
            f"the platform compressed thread {thread_id} ({status}), but showing it here failed "
            f"({type(exc).__name__}); the next attach scan shows it. Do not compress it again."
        ) from None
    audit.write(status, status, extra={"pressure_after": after})
    return PlatformCompressed(
        thread_id=thread_id,
        status=status,
        before_tokens=body["before_tokens"],
        after_tokens=body["after_tokens"],
        compressed_messages=body["compressed_messages"],
        file_path=body["file_path"],
        reason=body["reason"],
        checkpoint_id=latest or seen,
        request_id=audit.attempts[-1].request_id if audit.attempts else None,
        attempts=list(audit.attempts),
    )


def _landed_state(landed: str | None) -> str:
    if landed:
        return f"a new summary landed (checkpoint {landed})"
    return "no new summary has landed so far; reload later to see whether it does"


def _after_lost_answer(
    settings: Settings, thread_id: str, seen: str | None, audit: _Audit
) -> str | None:
    """The newest checkpoint id when a new summary landed since ``seen`` (projected), else None."""
    store = platform_store(settings)
    try:
        latest = store.latest(thread_id)
        if latest is None or latest.checkpoint_id == seen:
            return None
        config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        config["configurable"]["checkpoint_id"] = seen
        before = checkpoint_of(thread_id, store.graph.get_state(config)) if seen else None
    except Exception as exc:  # noqa: BLE001 - the report is best effort; the error stands
        log.warning("could not re-read a thread after a lost answer (%s)", type(exc).__name__)
        return None
    event = _summary_event(latest)
    if event is None or event == _summary_event(before):
        return None
    try:
        reproject_thread(settings, thread_id)
        audit.base["pressure_after"] = _pressure(settings, thread_id)
    except YuxiDashError:
        pass  # the next scan projects it
    return latest.checkpoint_id
