"""Typed errors shared by the service, CLI and pages.

Every error a caller may act on is a subclass of :class:`YuxiDashError` with a
stable ``code`` (machine-readable), an HTTP-like ``status_code`` and the CLI
``exit_code`` (0 ok, 1 failure, 2 usage or invalid input, 3 not found, 4 busy,
5 unsupported, 6 gated off). The message is one line an operator can act on;
it never carries user data beyond the ids the caller passed in.

This module is the one place for errors: every exception class in `yuxi_dash`
is defined here and derives from `YuxiDashError` (tests/test_errors.py checks).
"""

from __future__ import annotations

from typing import Any, ClassVar


class YuxiDashError(Exception):
    """Base class: one clear line, a stable code, a status and an exit code."""

    code: ClassVar[str] = "internal_error"
    status_code: ClassVar[int] = 500
    exit_code: ClassVar[int] = 1

    def __init__(self, message: str, **detail: Any) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "status": self.status_code, "message": self.message}


class InvalidInput(YuxiDashError):
    code = "invalid_input"
    status_code = 400
    exit_code = 2


class PathRefused(InvalidInput):
    """A path that would leave the workdir (or is otherwise not ours to open)."""

    code = "path_refused"


class Unauthorized(YuxiDashError):
    """No credential, or one we do not know or that was revoked (the HTTP API's bearer token)."""

    code = "unauthorized"
    status_code = 401
    exit_code = 1


class Forbidden(YuxiDashError):
    code = "forbidden"
    status_code = 403
    exit_code = 1


class NotFound(YuxiDashError):
    code = "not_found"
    status_code = 404
    exit_code = 3


class ThreadNotFound(NotFound):
    code = "thread_not_found"


class ThreadDeleted(ThreadNotFound):
    """The thread exists but was deleted (soft): still 404 and exit 3, with its own code."""

    code = "thread_deleted"


class AgentNotFound(NotFound):
    code = "agent_not_found"


class UserNotFound(NotFound):
    code = "user_not_found"


class ToolResultNotFound(NotFound):
    code = "tool_result_not_found"


class ApiTokenNotFound(NotFound):
    code = "api_token_not_found"


class IdempotencyInProgress(YuxiDashError):
    """The API's first call with this Idempotency-Key has not answered yet: not run twice."""

    code = "idempotency_in_progress"
    status_code = 409
    exit_code = 4


class IdempotencyKeyReused(InvalidInput):
    """This Idempotency-Key was first sent with another request (thread or checkpoint)."""

    code = "idempotency_key_reused"
    status_code = 422


class ThreadBusy(YuxiDashError):
    code = "thread_busy"
    status_code = 409
    exit_code = 4


class StaleState(YuxiDashError):
    code = "stale_state"
    status_code = 409
    exit_code = 4


class CompressionUnsupported(YuxiDashError):
    code = "compression_unsupported"
    status_code = 422
    exit_code = 5


class ThreadAttached(CompressionUnsupported):
    """The thread belongs to an attached platform, which owns its lock: never compressed here."""

    code = "thread_attached"


class MemoryGatedOff(YuxiDashError):
    code = "memory_gated_off"
    status_code = 403
    exit_code = 6


class SummarizerFailed(YuxiDashError):
    """The summarizer raised or returned nothing usable; nothing was written."""

    code = "summarizer_failed"
    status_code = 502
    exit_code = 1


class WorkdirUnavailable(YuxiDashError):
    code = "workdir_unavailable"
    status_code = 503
    exit_code = 1


class MemoryUnavailable(YuxiDashError):
    """The FalkorDB server cannot be reached (or keeps refusing)."""

    code = "memory_unavailable"
    status_code = 503
    exit_code = 1


class MemoryQueryTimeout(MemoryUnavailable):
    """A memory query ran past the per-query timeout and was stopped by the server."""

    code = "memory_query_timeout"
    status_code = 504


class StoreUnavailable(YuxiDashError):
    """The relational database cannot be reached (or refused to run the operation)."""

    code = "store_unavailable"
    status_code = 503
    exit_code = 1


class AttachUnavailable(StoreUnavailable):
    """The attached platform's checkpointer is not configured, cannot be reached or refused."""

    code = "attach_unavailable"


class CheckpointRefused(YuxiDashError):
    """A checkpoint names a type outside the allow-list (`store.checkpoint_serde`): not read."""

    code = "checkpoint_refused"
    status_code = 422


class PlatformMisconfigured(YuxiDashError):
    """The platform client's settings are unusable (URL, token file): check the named setting."""

    code = "platform_misconfigured"
    status_code = 500
    exit_code = 1


class PlatformAuthFailed(PlatformMisconfigured):
    """The platform answered 401 or 403: the token is wrong or lacks the right; never retried."""

    code = "platform_auth_failed"
    status_code = 502


class PlatformUnavailable(YuxiDashError):
    """The platform could not be reached or answered 502/503, after the retries."""

    code = "platform_unavailable"
    status_code = 503
    exit_code = 1


class PlatformOutcomeUnknown(YuxiDashError):
    """The call was sent but no answer came in time: it may have compressed; never re-sent."""

    code = "platform_outcome_unknown"
    status_code = 504
    exit_code = 1


class PlatformBadResponse(YuxiDashError):
    """The platform answered something that is not the contract's JSON (a proxy's page, say)."""

    code = "platform_bad_response"
    status_code = 502
    exit_code = 1


class CompressedNotProjected(YuxiDashError):
    """The platform compressed the thread (or answered 200 with an answer we cannot read, so it
    may have), but showing it here failed: never compress again; the next scan shows it."""

    code = "compressed_not_projected"
    status_code = 503
    exit_code = 1


class ImpossibleUsage(InvalidInput):
    """A checkpoint's ``token_usage`` states figures no model call can have (refused, never drawn)."""

    code = "impossible_usage"


class PlatformChanged(YuxiDashError):
    """The attached checkpointer is another platform than the one scanned before (unconfirmed)."""

    code = "platform_changed"
    status_code = 409
    exit_code = 1


class TrackingRefused(MemoryUnavailable):
    """The server refused the change watcher's handshake (CLIENT, SUBSCRIBE, CLIENT TRACKING)."""

    code = "memory_tracking_refused"


# --- memory support: corrections (memory/support/corrections.py) and forget ---------------------
class InvalidFactUuid(InvalidInput):
    code = "invalid_fact_uuid"


class ReasonRequired(InvalidInput):
    code = "reason_required"


class InvalidTicket(InvalidInput):
    code = "invalid_ticket"


class FactNotFound(NotFound):
    code = "fact_not_found"


class CorrectionNotFound(NotFound):
    code = "correction_not_found"


class CorrectionConflict(YuxiDashError):
    """The fact is not in a state this action applies to; nothing was changed."""

    code = "correction_conflict"
    status_code = 409
    exit_code = 4


class AlreadyInvalidated(CorrectionConflict):
    code = "already_invalidated"


class NotInvalidated(CorrectionConflict):
    code = "not_invalidated"


class NotTentative(CorrectionConflict):
    code = "not_tentative"


class FactBusy(CorrectionConflict):
    """Another correction of the same fact holds its lock past the lock timeout."""

    code = "fact_busy"


class AlreadyUndone(CorrectionConflict):
    code = "already_undone"


class NotUndoable(CorrectionConflict):
    code = "not_undoable"


class StaleFact(StaleState):
    """The fact changed since the correction: undoing it would overwrite someone's change."""

    code = "stale_fact"


class NotYourCorrection(Forbidden):
    """Another operator's correction: only its author, or an admin with a reason, undoes it."""

    code = "not_your_correction"


class IndexDrift(CorrectionConflict):
    code = "index_drift"


class ConfirmationMismatch(InvalidInput):
    """The typed confirmation is not exactly the user id."""

    code = "confirmation_mismatch"


class InvalidMoment(InvalidInput):
    """A moment that is not ISO 8601 (e.g. `--before` of a bulk retract)."""

    code = "invalid_moment"


class PreviewStale(CorrectionConflict):
    """The facts a bulk correction would change are no longer the set its preview showed."""

    code = "preview_stale"


class BulkTooLarge(InvalidInput):
    """A bulk correction over more facts than one may change at once."""

    code = "bulk_too_large"


class BulkIncomplete(YuxiDashError):
    """A bulk correction failed and putting back what it had done failed too; the message
    names the parent audit row whose undo finishes the job."""

    code = "bulk_incomplete"
    status_code = 500
    exit_code = 1


class ForgetIncomplete(YuxiDashError):
    """The check after deleting found something left."""

    code = "forget_incomplete"
    status_code = 500
    exit_code = 1


class SweepHeld(YuxiDashError):
    """The workdir sweep stopped before removing anything; its message is the reason (reported, not raised)."""

    code = "sweep_held"


class AlertRuleNotFound(NotFound):
    code = "alert_rule_not_found"


class DeliveryFailed(YuxiDashError):
    """One attempt at an alert channel failed (its message names the status or error type only)."""

    code = "alert_delivery_failed"
    status_code = 502


class PlatformAttemptFailed(YuxiDashError):
    """One platform call failed before the platform handled it: retried, then `PlatformUnavailable`."""

    code = "platform_attempt_failed"
    status_code = 503

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class OutboundFailed(YuxiDashError):
    """A call to an outside server ended without a usable answer (`outbound`); its ``kind``
    says how, ``sent`` whether the server may have acted. Callers map it to their own code."""

    code = "outbound_failed"
    status_code = 502

    def __init__(
        self, reason: str, *, kind: str, sent: bool, http_status: int | None = None
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind
        self.sent = sent
        self.http_status = http_status


class InvalidPricesFile(YuxiDashError):
    """The prices file (`YUXI_DASH_MODEL_PRICES`) cannot be read or is not the documented JSON."""

    code = "invalid_prices_file"
    status_code = 500
    exit_code = 2
