"""The platform's intake and the run lifecycle, under the same row lock a compress takes.

`enqueue_request` is intake: a user message goes to the chat record at once
and a request waits in the thread's FIFO. `dispatch_next_request` starts the
oldest queued request as a running run (never while another run of the thread
is not final); `cancel_request` takes a queued one out; `start_run` starts a
run that did not come from the queue (a resume, a subagent); `finish_run`
moves a run to a final status. A thread with a running run, a queued request
or an interrupted run waiting to resume is busy, and a compress refuses it.

Every typed refusal of these calls is one audit row with the actor
"platform"; successes are not audited.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash import validation
from yuxi_dash.access.audit import audited_refusals
from yuxi_dash.alerts.hooks import after_usage_write
from yuxi_dash.errors import InvalidInput, NotFound
from yuxi_dash.printable_record import Record
from yuxi_dash.service.locking import require_thread, thread_lock, thread_target
from yuxi_dash.service.usage_writes import append_chat
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import (
    FINAL_RUN_STATUSES,
    NON_FINAL_RUN_STATUSES,
    RUN_TYPES,
    AgentRun,
    RunRequest,
    utcnow,
)

_RowT = TypeVar("_RowT", RunRequest, AgentRun)
PLATFORM_ACTOR = "platform"  # who the audit log records for intake and run-lifecycle refusals
INTAKE_ACTION = "intake"


@dataclass(frozen=True)
class RequestInfo(Record):
    id: int
    thread_id: str
    run_type: str
    status: str
    created_at: datetime


@dataclass(frozen=True)
class RunInfo(Record):
    id: int
    thread_id: str
    run_type: str
    status: str
    request_id: int | None
    payload: dict[str, Any] = field(default_factory=dict)


def _request_info(request: RunRequest) -> RequestInfo:
    return RequestInfo(
        request.id, request.thread_id, request.run_type, request.status, request.created_at
    )


def _run_info(run: AgentRun, request: RunRequest | None = None) -> RunInfo:
    payload = dict(request.payload or {}) if request is not None else {}
    return RunInfo(run.id, run.thread_id, run.run_type, run.status, run.request_id, payload)


def _begin_run(
    session: Session, thread_id: str, run_type: str, request: RunRequest | None
) -> RunInfo:
    """A new running run of the thread (dispatching `request` when one is given), flushed."""
    now = utcnow()
    if request is not None:
        request.status = "dispatched"
        request.dispatched_at = now
    run = AgentRun(
        thread_id=thread_id,
        request_id=None if request is None else request.id,
        run_type=run_type,
        status="running",
        created_at=now,
        started_at=now,
    )
    session.add(run)
    session.flush()
    return _run_info(run, request)


def _platform_refusals(
    action: str, target: str, settings: Settings | None
) -> AbstractContextManager[None]:
    """Audit every typed refusal of an intake or run-lifecycle call (successes are not audited)."""
    return audited_refusals(actor=PLATFORM_ACTOR, action=action, target=target, settings=settings)


def enqueue_request(
    thread_id: str,
    *,
    content: str | None = None,
    run_type: str = "chat",
    payload: dict[str, Any] | None = None,
    settings: Settings | None = None,
    wait_seconds: float | None = None,
) -> RequestInfo:
    """Intake: queue a run request under the same row lock a compress holds.

    A user message (`content`) goes to the chat record at once; the request
    waits in the per-thread FIFO until `dispatch_next_request`. A refusal (bad
    input, unknown or deleted thread, busy) is audited; nothing is written.
    """
    with _platform_refusals(INTAKE_ACTION, thread_target(thread_id), settings):
        validation.thread_id(thread_id)
        if content is not None:
            validation.text(content, "content")
        if payload is not None:
            validation.json_document(payload, "payload")
        if run_type not in RUN_TYPES:
            raise InvalidInput(f"unknown run type {run_type!r}")
        return _enqueue_locked(
            thread_id,
            content=content,
            run_type=run_type,
            payload=payload,
            settings=settings,
            wait_seconds=wait_seconds,
        )


def _enqueue_locked(
    thread_id: str,
    *,
    content: str | None,
    run_type: str,
    payload: dict[str, Any] | None,
    settings: Settings | None,
    wait_seconds: float | None,
) -> RequestInfo:
    with thread_lock(thread_id, settings=settings, wait_seconds=wait_seconds) as (session, conv):
        conv = require_thread(conv, thread_id)
        now = utcnow()
        body = dict(payload or {})
        if content is not None:
            body["content"] = content
            append_chat(session, thread_id, [("user", content)], at=now)
        request = RunRequest(
            thread_id=thread_id, run_type=run_type, status="queued", payload=body, created_at=now
        )
        session.add(request)
        conv.last_activity_at = now
        session.flush()
        return _request_info(request)


def dispatch_next_request(thread_id: str, *, settings: Settings | None = None) -> RunInfo | None:
    """Start the oldest queued request as a running run; None when nothing can start.

    Nothing starts while another run of the thread is not final (the FIFO waits).
    """
    with _platform_refusals("dispatch_request", thread_target(thread_id), settings):
        validation.thread_id(thread_id)
        return _dispatch_locked(thread_id, settings=settings)


def _dispatch_locked(thread_id: str, *, settings: Settings | None) -> RunInfo | None:
    with thread_lock(thread_id, settings=settings) as (session, conv):
        require_thread(conv, thread_id)
        active = session.scalar(
            sa.select(sa.func.count())
            .select_from(AgentRun)
            .where(AgentRun.thread_id == thread_id, AgentRun.status.in_(NON_FINAL_RUN_STATUSES))
        )
        if active:
            return None
        request = session.scalar(
            sa.select(RunRequest)
            .where(RunRequest.thread_id == thread_id, RunRequest.status == "queued")
            .order_by(RunRequest.created_at, RunRequest.id)
            .limit(1)
        )
        if request is None:
            return None
        return _begin_run(session, thread_id, request.run_type, request)


def cancel_request(request_id: int, *, settings: Settings | None = None) -> RequestInfo:
    """Cancel a queued request (it will never be dispatched); InvalidInput if not queued."""
    with _platform_refusals("cancel_request", f"request:{request_id}", settings):
        validation.db_id(request_id, "request id")
        return _cancel_locked(request_id, settings=settings)


@contextmanager
def _locked(
    model: type[_RowT], row_id: int, what: str, settings: Settings | None
) -> Iterator[_RowT]:
    """Row `row_id` of `model`, read again under its thread's row lock; NotFound if it is gone."""
    with session_scope(settings) as session:
        thread_id = session.scalar(sa.select(model.thread_id).where(model.id == row_id))
    if thread_id is None:
        raise NotFound(f"{what} {row_id} not found")
    with thread_lock(thread_id, settings=settings) as (session, _conv):
        row = session.get(model, row_id)
        if row is None:
            raise NotFound(f"{what} {row_id} not found")
        yield row


def _cancel_locked(request_id: int, *, settings: Settings | None) -> RequestInfo:
    with _locked(RunRequest, request_id, "request", settings) as request:
        if request.status != "queued":
            raise InvalidInput(f"request {request_id} is {request.status}, not queued")
        request.status = "cancelled"
        return _request_info(request)


def start_run(
    thread_id: str, *, run_type: str = "chat", settings: Settings | None = None
) -> RunInfo:
    """Start a run that did not come from the queue (a resume or a subagent)."""
    with _platform_refusals("start_run", thread_target(thread_id), settings):
        validation.thread_id(thread_id)
        if run_type not in RUN_TYPES:
            raise InvalidInput(f"unknown run type {run_type!r}")
        with thread_lock(thread_id, settings=settings) as (session, conv):
            require_thread(conv, thread_id)
            return _begin_run(session, thread_id, run_type, None)


def finish_run(
    run_id: int, *, status: str = "completed", settings: Settings | None = None
) -> RunInfo:
    """Move a run to a final status (completed / failed / cancelled / interrupted)."""
    with _platform_refusals("finish_run", f"run:{run_id}", settings):
        validation.db_id(run_id, "run id")
        if status not in FINAL_RUN_STATUSES:
            raise InvalidInput(f"{status!r} is not a final run status")
        info = _finish_locked(run_id, status=status, settings=settings)
    after_usage_write(settings or get_settings(), info.thread_id)  # alerts: usage projected
    return info


def _finish_locked(run_id: int, *, status: str, settings: Settings | None) -> RunInfo:
    with _locked(AgentRun, run_id, "run", settings) as run:
        if run.status in FINAL_RUN_STATUSES:
            raise InvalidInput(f"run {run_id} is already {run.status}")
        run.status = status
        run.finished_at = utcnow()
        return _run_info(run)
