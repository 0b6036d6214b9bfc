"""Manual compression of our own thread: `compress_own_thread`.

A compress runs in three phases: checks, a read and a lease on the thread under its
lock, the summary with no lock, the writes under the lock again (only while the lease
is its own). The protocol: docs/architecture.md, "A compress click (the lock protocol)".
Callers reach it through `sources.compress_thread_context`; an attached platform's
thread that reaches it (no endpoint set) is refused, 422 thread_attached, audited.

Rules:
- Every attempt leaves one audit row: completed, no_op, refused (with the error
  code) or failed, with what was caught up, swept, left or adopted. A completed one
  also leaves its compression record (`service.compression_records`), in its transaction.
- One summary per thread at a time: a second compress is thread_busy at once. Every
  ending clears the attempt's own lease; a failure writes nothing else, and the files
  of an attempt that fails are swept (`service.unindexed_files`). `on_step`: phase-3 steps.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import psycopg
import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash import validation
from yuxi_dash.access.audit import record_audit, record_audit_eventually
from yuxi_dash.access.roles import Actor, Role, require_role
from yuxi_dash.alerts.hooks import after_usage_write
from yuxi_dash.compression import (
    PreparedSummary,
    Summarizer,
    get_summarizer,
    prepare_summary,
    write_summary,
)
from yuxi_dash.compression.state_format import TOKEN_USAGE_KEY, state_update
from yuxi_dash.errors import (
    CompressionUnsupported,
    StaleState,
    StoreUnavailable,
    SummarizerFailed,
    ThreadAttached,
    ThreadBusy,
    YuxiDashError,
)
from yuxi_dash.files.workdir import Workdir
from yuxi_dash.printable_record import Record
from yuxi_dash.service.compression_records import compression_row
from yuxi_dash.service.locking import (
    clear_compress_lease,
    compress_lease_seconds,
    release_compress_lease,
    require_agent,
    require_compress_lease,
    require_idle,
    require_thread,
    take_compress_lease,
    thread_lock,
    thread_target,
)
from yuxi_dash.service.projection import catch_up
from yuxi_dash.service.unindexed_files import (
    created_files,
    hold_files_shared,
    sweep_created,
    unindexed,
)
from yuxi_dash.service.usage_writes import apply_usage, index_saved_files, merged_token_usage
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.checkpointer import CheckpointStore
from yuxi_dash.store.compressions import TRIGGER_MANUAL, insert_records
from yuxi_dash.store.db import is_lock_failure
from yuxi_dash.store.models import Agent, Conversation, utcnow
from yuxi_dash.store.origin import COMPRESS_ACTION, is_attached
from yuxi_dash.store.thread_store import (
    StoredState,
    locked_store,
    state_store,
)
from yuxi_dash.usage import UsageSnapshot, summary_trigger_tokens

log = logging.getLogger(__name__)

# the phase-3 steps `on_step` is told of, in order (each under the lock)
STEP_FILES_WRITTEN = "files_written"
STEP_CHECKPOINT_WRITTEN = "checkpoint_written"
STEP_PROJECTED = "projected"  # the projection and the audit row too; the commit is next
StepHook = Callable[[str], None]
AuditIn = Callable[[Session, "CompressResult"], None]  # writes the audit row in that session


@dataclass(frozen=True)
class CompressResult(Record):
    """What a manual compression did (the CLI's and the page's result)."""

    thread_id: str
    status: str  # completed | no_op
    before_tokens: int
    after_tokens: int
    compressed_messages: int
    file_path: str | None
    reason: str | None
    checkpoint_id: str | None  # the thread's newest checkpoint after the attempt


def compress_own_thread(
    thread_id: str,
    *,
    actor: Actor,
    expected_checkpoint_id: str | None = None,
    user_id: str | None = None,
    settings: Settings | None = None,
    summarizer: Summarizer | None = None,
    on_step: StepHook | None = None,
    caller_ids: Mapping[str, str] | None = None,
) -> CompressResult:
    """Summarize a thread's history now, under the conversation row lock.

    `user_id`, when given, is an ownership guard: a thread of another user is 404.
    `expected_checkpoint_id` is the checkpoint the operator saw: a thread whose
    newest checkpoint is another one is 409 stale_state. `on_step` is called with
    each phase-3 step's name while the lock is held (a seam for tests).
    `caller_ids` (the API caller's `request_id`, `idempotency_key`) go into the
    audit row's detail.
    """
    settings = settings or get_settings()
    target = thread_target(thread_id)
    audit_detail: dict[str, Any] = {
        "role": actor.role.label,
        "via": actor.via,
        **(caller_ids or {}),
    }
    notes: dict[str, Any] = {}  # what the attempt repaired, swept, left or adopted

    def audit_in(session: Session, result: CompressResult) -> None:
        """The completed attempt's audit row, in the transaction that writes the summary."""
        record_audit(
            actor=actor.id,
            action=COMPRESS_ACTION,
            target=target,
            outcome=result.status,
            detail=_result_detail({**audit_detail, **notes}, result),
            session=session,
        )

    if expected_checkpoint_id is not None:
        audit_detail["expected_checkpoint_id"] = expected_checkpoint_id
    try:
        validation.thread_id(thread_id)
        validation.optional_identifier(user_id, "user id")
        validation.optional_identifier(expected_checkpoint_id, "expected checkpoint id")
        require_role(actor, Role.OPERATOR, action="compressing a thread")
        result = _compress_locked(
            thread_id,
            actor_id=actor.id,
            expected_checkpoint_id=expected_checkpoint_id,
            user_id=user_id,
            settings=settings,
            summarizer=summarizer,
            on_step=on_step,
            notes=notes,
            audit_in=audit_in,
        )
    except SummarizerFailed as exc:
        detail = {**audit_detail, **notes, "code": exc.code}
        _audit_safely(actor.id, target, "failed", detail, settings)
        raise
    except YuxiDashError as exc:
        outcome = (
            "refused" if exc.status_code < 500 or exc.code == "workdir_unavailable" else "failed"
        )
        _audit_safely(
            actor.id, target, outcome, {**audit_detail, **notes, "code": exc.code}, settings
        )
        raise
    except Exception as exc:
        detail = {**audit_detail, **notes, "error": type(exc).__name__}
        _audit_safely(actor.id, target, "failed", detail, settings)
        raise
    audit_detail.update(notes)
    if result.status != "completed":  # a completed one is audited in its own transaction
        _audit_safely(
            actor.id, target, result.status, _result_detail(audit_detail, result), settings
        )
    after_usage_write(settings, thread_id)  # alerts: a compress moves the thread's pressure
    return result


def _result_detail(detail: dict[str, Any], result: CompressResult) -> dict[str, Any]:
    """The audit detail of an attempt that ended with a result (completed or no_op)."""
    return {
        **detail,
        "checkpoint_id": result.checkpoint_id,
        "before_tokens": result.before_tokens,
        "after_tokens": result.after_tokens,
        "compressed_messages": result.compressed_messages,
        "reason": result.reason,
        "file_path": result.file_path,
    }


def _audit_safely(
    actor: str, target: str, outcome: str, detail: dict[str, Any], settings: Settings
) -> None:
    try:
        record_audit_eventually(
            actor=actor,
            action=COMPRESS_ACTION,
            target=target,
            outcome=outcome,
            detail=detail,
            settings=settings,
        )
    except Exception:  # the attempt's own error must reach the caller, not an audit hiccup
        log.exception("could not write the audit row for a compress attempt")


@dataclass(frozen=True)
class _CompressPlan:
    """What phase 1 of a compress read under the lock: the state and the agent's settings,
    and the lease it took on the thread."""

    stored: StoredState
    lease_id: str
    actor_id: str  # who asked: the compression record's actor
    keep_messages: int
    tool_result_token_limit: int
    context_window: int
    summary_threshold: int


def _check_compressible(
    session: Session,
    conv: Conversation | None,
    thread_id: str,
    *,
    user_id: str | None,
) -> tuple[Conversation, Agent]:
    """The refusals a compress checks under the lock, in order: 404, 422 attached, 409 busy,
    404 agent, 422 unsupported; the thread's row and its agent."""
    conv = require_thread(conv, thread_id, user_id=user_id)
    if is_attached(conv.origin):
        raise ThreadAttached(
            f"thread {thread_id} belongs to the attached platform, which owns its lock; "
            "compress it there"
        )
    require_idle(session, thread_id)
    agent = require_agent(session, conv.agent_slug)
    if not agent.compression_capable:
        raise CompressionUnsupported(f"agent {agent.slug} does not support context compression")
    return conv, agent


def _compress_locked(
    thread_id: str,
    *,
    actor_id: str,
    expected_checkpoint_id: str | None,
    user_id: str | None,
    settings: Settings,
    summarizer: Summarizer | None,
    on_step: StepHook | None,
    notes: dict[str, Any],
    audit_in: AuditIn,
) -> CompressResult:
    """A compress in three phases, so the platform's intake never waits for a model.

    1. Under the row lock: the refusals (another compress's live lease is 409
       thread_busy), the expected checkpoint, the projection caught up, read the
       state, take the lease; release.
    2. No lock held: plan the offloads and call the summarizer (seconds to minutes).
    3. Under the row lock again (`_write_locked`), only while the lease is its own;
       the lease is cleared there. Any other ending clears it (`release_compress_lease`).
    """
    store = state_store(settings)
    with thread_lock(thread_id, settings=settings) as (session, conv):
        conv, agent = _check_compressible(session, conv, thread_id, user_id=user_id)
        void_lease = conv.compress_lease_id is not None  # not live, or taking it raises
        lease_id = take_compress_lease(conv, seconds=compress_lease_seconds(settings))
        locked = locked_store(session, store)
        latest = locked.latest(thread_id)
        stored = StoredState.of(latest) if latest else StoredState.empty(thread_id)
        if expected_checkpoint_id is not None and stored.checkpoint_id != expected_checkpoint_id:
            raise StaleState(
                f"thread {thread_id} has a newer state than the one you saw; "
                "reload before compressing"
            )
        _note_caught_up(notes, catch_up(session, conv, locked, settings))
        plan = _CompressPlan(
            stored=stored,
            lease_id=lease_id,
            actor_id=actor_id,
            keep_messages=agent.summary_keep_messages,
            tool_result_token_limit=agent.summary_tool_result_token_limit,
            context_window=agent.context_window,
            summary_threshold=agent.summary_threshold,
        )
        if void_lease:  # a killed compress's, past its time
            notes["void_lease_taken_over"] = True
    written = False
    try:
        result = _summarize_and_write(
            thread_id,
            plan,
            user_id=user_id,
            store=store,
            settings=settings,
            summarizer=summarizer,
            on_step=on_step or _no_step,
            notes=notes,
            audit_in=audit_in,
        )
        written = result.status == "completed"  # phase 3 committed and cleared the lease
        return result
    finally:
        if not written and not release_compress_lease(thread_id, lease_id, settings=settings):
            notes["lease_left"] = True  # it runs out at its time


def _summarize_and_write(
    thread_id: str,
    plan: _CompressPlan,
    *,
    user_id: str | None,
    store: CheckpointStore,
    settings: Settings,
    summarizer: Summarizer | None,
    on_step: StepHook,
    notes: dict[str, Any],
    audit_in: AuditIn,
) -> CompressResult:
    """Phases 2 and 3, holding the lease phase 1 took (no row lock across the summarizer)."""
    workdir = Workdir(settings.workdir)
    workdir.ensure_writable()
    prepared = prepare_summary(
        plan.stored.state,
        workdir=workdir,
        summarizer=summarizer or get_summarizer(settings),
        keep_messages=plan.keep_messages,
        tool_result_token_limit=plan.tool_result_token_limit,
    )
    if prepared.cutoff is None:
        outcome = write_summary(prepared, workdir=workdir)  # the no_op: writes nothing
        return CompressResult(
            thread_id=thread_id,
            status=outcome.status,
            before_tokens=outcome.before_tokens,
            after_tokens=outcome.after_tokens,
            compressed_messages=outcome.compressed_messages,
            file_path=outcome.file_path,
            reason=outcome.reason,
            checkpoint_id=plan.stored.checkpoint_id,
        )
    created: list[str] = []
    try:
        return _write_locked(
            thread_id,
            plan,
            prepared,
            user_id=user_id,
            store=store,
            workdir=workdir,
            settings=settings,
            on_step=on_step,
            notes=notes,
            created=created,
            audit_in=audit_in,
        )
    except (psycopg.OperationalError, sa.exc.OperationalError) as exc:
        if is_lock_failure(exc):  # a lock wait of the checkpoint write itself ran out
            raise ThreadBusy(
                f"thread {thread_id} is locked by another operation; try again shortly",
                reason="locked",
            ) from exc
        raise StoreUnavailable(
            f"the database connection holding thread {thread_id}'s lock was lost; "
            "nothing was written, compress again"
        ) from exc
    finally:
        if created:  # the attempt did not commit
            notes.update(sweep_created(thread_id, created, workdir=workdir, settings=settings))


def _no_step(step: str) -> None:
    return None


def _note_caught_up(notes: dict[str, Any], caught_up: dict[str, Any] | None) -> None:
    if caught_up is not None:
        notes["caught_up"] = caught_up


def _write_locked(
    thread_id: str,
    plan: _CompressPlan,
    prepared: PreparedSummary,
    *,
    user_id: str | None,
    store: CheckpointStore,
    workdir: Workdir,
    settings: Settings,
    on_step: StepHook,
    notes: dict[str, Any],
    created: list[str],
    audit_in: AuditIn,
) -> CompressResult:
    """Phase 3: still idle, the lease still its own and still at the checkpoint phase 1 read
    (else 409 thread_busy / stale_state, nothing written); then the files, the new checkpoint
    and its projection, the lease cleared, all in the lock's transaction. ``created`` gets
    the files this attempt creates."""
    with thread_lock(thread_id, settings=settings) as (session, conv):
        conv, _agent = _check_compressible(session, conv, thread_id, user_id=user_id)
        require_compress_lease(conv, plan.lease_id)
        hold_files_shared(session)  # no workdir sweep decides until this commits
        locked = locked_store(session, store)
        latest = locked.latest(thread_id)
        if (latest.checkpoint_id if latest else None) != plan.stored.checkpoint_id:
            raise StaleState(
                f"thread {thread_id} moved on while its summary was being written; "
                "nothing was written, reload and compress again"
            )
        _note_caught_up(notes, catch_up(session, conv, locked, settings))
        missing, present = created_files(workdir, prepared.pending)
        adopted = unindexed(session, present)
        if adopted:  # left by an attempt that never committed: indexed by this one
            notes["adopted_files"] = adopted
        created.extend(missing)
        outcome = write_summary(
            prepared,
            workdir=workdir,
            summary_evidence_budget_tokens=settings.summary_evidence_budget_tokens,
        )
        on_step(STEP_FILES_WRITTEN)
        now = utcnow()
        figures = UsageSnapshot(
            llm_input_tokens=outcome.after_tokens,
            next_llm_input_tokens=outcome.after_tokens,
            context_window=plan.context_window,
            summary_trigger_tokens=summary_trigger_tokens(plan.summary_threshold),
            summary_active=outcome.state.summary_active(),
        )
        compression = {
            "source": "manual_compression",
            "at": now.isoformat(),
            "before_tokens": outcome.before_tokens,
            "after_tokens": outcome.after_tokens,
            "compressed_messages": outcome.compressed_messages,
            "file_path": outcome.file_path,
        }
        update = state_update(plan.stored.state, outcome.state)
        update[TOKEN_USAGE_KEY] = {
            **merged_token_usage(plan.stored.token_usage, compression=compression, figures=figures),
            "source": "manual_compression",
            "measured_at": now.isoformat(),
        }
        written = locked.write(thread_id, update, expected_checkpoint_id=plan.stored.checkpoint_id)
        if locked is store:  # SQLite: the checkpoint's own file committed; it names the files
            created.clear()  # (a catch-up indexes them), so they are no leftovers
        on_step(STEP_CHECKPOINT_WRITTEN)
        # the projection of this checkpoint, exactly: the usage it measured, the files it saved
        apply_usage(session, conv, figures, source="manual_compression", measured_at=now)
        index_saved_files(session, thread_id, outcome.saved_files)
        record = compression_row(
            thread_id=thread_id,
            agent_slug=conv.agent_slug,
            origin=conv.origin,
            before=plan.stored.state,
            after=outcome.state,
            at=now,
            checkpoint_id=written.checkpoint_id,
            workdir=workdir,
            trigger=TRIGGER_MANUAL,
            actor=plan.actor_id,
            tokens=(outcome.before_tokens, outcome.after_tokens),
            ledger=outcome.ledger,
        )
        insert_records(session, [record] if record is not None else [])
        conv.checkpoint_id = written.checkpoint_id
        clear_compress_lease(conv)
        result = CompressResult(
            thread_id=thread_id,
            status="completed",
            before_tokens=outcome.before_tokens,
            after_tokens=outcome.after_tokens,
            compressed_messages=outcome.compressed_messages,
            file_path=outcome.file_path,
            reason=outcome.reason,
            checkpoint_id=written.checkpoint_id,
        )
        audit_in(session, result)
        session.flush()
        on_step(STEP_PROJECTED)
    created.clear()  # committed: every file it wrote is indexed
    return result
