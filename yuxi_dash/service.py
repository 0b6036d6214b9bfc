"""The locked service core: manual compression, intake, the run lifecycle, model-call writes, import.

Every write to a thread happens under THE lock on its `conversations` row: on
PostgreSQL `SELECT ... FOR UPDATE` with `lock_timeout` from settings (running
out is 409 thread_busy, never a hang), on SQLite `BEGIN IMMEDIATE` with the same
busy timeout. The lock is held until the new state is written and committed, so
a compress and the platform's message intake can never interleave.

`compress_thread_context` follows DESIGN §4: role -> lock -> exists / owned /
not deleted (404) -> idle (409 thread_busy, never queued) -> agent (404) ->
capability (422) -> expected version (409 stale_state) -> workdir writable
(503) -> engine (`force_summarize`) -> state repository (compare-and-swap) ->
token_usage merge, a `manual_compression` snapshot, the current-usage columns,
the tool-results index. Every attempt leaves one audit row: completed, no_op,
refused (with the error code) or failed. A summarizer failure writes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from langchain_core.messages import BaseMessage, ToolMessage, messages_from_dict
from sqlalchemy.orm import Session

from yuxi_dash import usage
from yuxi_dash.audit import record_audit, record_audit_eventually
from yuxi_dash.auth import Actor, Role, require_role
from yuxi_dash.compression.state import (
    ThreadContextState,
    chat_role,
    is_summary_message,
    message_text,
)
from yuxi_dash.errors import (
    AgentNotFound,
    CompressionUnsupported,
    InvalidInput,
    NotFound,
    StaleState,
    SummarizerFailed,
    ThreadBusy,
    ThreadNotFound,
    YuxiDashError,
)
from yuxi_dash.records import Record
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import is_sqlite, locked_session, session_scope
from yuxi_dash.store.models import (
    FINAL_RUN_STATUSES,
    NON_FINAL_RUN_STATUSES,
    RUN_TYPES,
    SNAPSHOT_SOURCES,
    Agent,
    AgentRun,
    ChatMessage,
    Conversation,
    RunRequest,
    ToolResult,
    UsageSnapshotRow,
    utcnow,
)
from yuxi_dash.store.queries import busy_reason
from yuxi_dash.store.state_repository import StoredState, load_state, write_state
from yuxi_dash.workdir import SavedFile, Workdir

log = logging.getLogger(__name__)

COMPRESS_ACTION = "compress"
IMPORT_ACTION = "import_thread"
# per-call context fields of token_usage that a compression makes stale (DESIGN §4)
PER_CALL_USAGE_FIELDS = frozenset(
    {
        "llm_input_tokens",
        "context_usage_ratio",
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "context_breakdown",
        "context_window_used",
        "last_call",
    }
)


def thread_target(thread_id: str) -> str:
    """The audit `target` of a thread."""
    return f"thread:{thread_id}"


# --- results --------------------------------------------------------------------


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
    version: int


@dataclass(frozen=True)
class CompressionPreview(Record):
    """What a compress would do now, read-only: nothing is locked, summarized or written."""

    thread_id: str
    messages_to_summarize: int
    estimated_before_tokens: int
    estimated_after_tokens: int
    version: int
    busy_reason: str | None
    capable: bool
    reason: str | None  # why a compress would not summarize (insufficient_history, ...)


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


@dataclass(frozen=True)
class ImportResult(Record):
    thread_id: str
    version: int
    created: bool
    messages: int


@dataclass(frozen=True)
class UsageFigures:
    """One usage measurement (a `usage_snapshots` row and the thread's current usage)."""

    llm_input_tokens: int
    next_llm_input_tokens: int
    context_window: int
    summary_trigger_tokens: int
    summary_active: bool

    @property
    def summary_pressure_ratio(self) -> float:
        return usage.summary_pressure_ratio(self.next_llm_input_tokens, self.summary_trigger_tokens)

    @property
    def context_usage_ratio(self) -> float:
        return usage.context_usage_ratio(self.llm_input_tokens, self.context_window)

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "summary_pressure_ratio": self.summary_pressure_ratio,
            "context_usage_ratio": self.context_usage_ratio,
        }

    @classmethod
    def coerce(cls, value: Any) -> UsageFigures:
        """From a UsageFigures, `yuxi_dash.usage.UsageSnapshot` or a mapping with the same keys."""
        if isinstance(value, UsageFigures):
            return value
        data = value.to_dict() if hasattr(value, "to_dict") else dict(value)
        return cls(
            llm_input_tokens=int(data["llm_input_tokens"]),
            next_llm_input_tokens=int(data["next_llm_input_tokens"]),
            context_window=int(data["context_window"]),
            summary_trigger_tokens=int(data["summary_trigger_tokens"]),
            summary_active=bool(data["summary_active"]),
        )


# --- the lock -----------------------------------------------------------------


def _is_lock_failure(exc: sa.exc.DBAPIError) -> bool:
    orig = exc.orig
    sqlstate = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if sqlstate == "55P03":  # lock_not_available (lock_timeout)
        return True
    text = str(orig).lower()
    return "database is locked" in text or "database table is locked" in text


@contextmanager
def thread_lock(
    thread_id: str,
    *,
    settings: Settings | None = None,
    wait_seconds: float | None = None,
) -> Iterator[tuple[Session, Conversation | None]]:
    """One transaction holding THE lock on the thread's conversation row until it commits.

    Yields the session and the locked row (None when there is no such thread).
    Waiting longer than `wait_seconds` (default settings.lock_timeout_seconds)
    raises ThreadBusy.
    """
    settings = settings or get_settings()
    wait = settings.lock_timeout_seconds if wait_seconds is None else wait_seconds
    try:
        with locked_session(settings, wait_seconds=wait) as session:
            if not is_sqlite(session):
                session.execute(
                    sa.text("SELECT set_config('lock_timeout', :timeout, true)"),
                    {"timeout": f"{max(1, int(wait * 1000))}ms"},
                )
            conv = session.scalar(
                sa.select(Conversation).where(Conversation.thread_id == thread_id).with_for_update()
            )
            yield session, conv
    except sa.exc.OperationalError as exc:
        if _is_lock_failure(exc):
            raise ThreadBusy(
                f"thread {thread_id} is locked by another operation; try again shortly",
                reason="locked",
            ) from exc
        raise


def _require_thread(
    conv: Conversation | None, thread_id: str, *, user_id: str | None = None
) -> Conversation:
    if (
        conv is None
        or conv.status == "deleted"
        or (user_id is not None and conv.user_id != user_id)
    ):
        raise ThreadNotFound(f"thread {thread_id} not found")
    return conv


def _require_agent(session: Session, slug: str) -> Agent:
    agent = session.scalar(sa.select(Agent).where(Agent.slug == slug))
    if agent is None:
        raise AgentNotFound(f"agent {slug} not found")
    return agent


def _require_idle(session: Session, thread_id: str) -> None:
    reason = busy_reason(session, thread_id)
    if reason is not None:
        raise ThreadBusy(
            f"thread {thread_id} is busy ({reason}); try again when it is idle", reason=reason
        )


# --- writes shared by compress and model calls ------------------------------------


def _apply_usage(
    session: Session,
    conv: Conversation,
    figures: UsageFigures,
    *,
    source: str,
    measured_at: datetime,
) -> None:
    """Insert a snapshot and move the thread's current usage to it (same transaction)."""
    if source not in SNAPSHOT_SOURCES:
        raise InvalidInput(f"unknown snapshot source {source!r}")
    session.add(
        UsageSnapshotRow(
            thread_id=conv.thread_id,
            measured_at=measured_at,
            llm_input_tokens=figures.llm_input_tokens,
            next_llm_input_tokens=figures.next_llm_input_tokens,
            context_window=figures.context_window,
            context_usage_ratio=figures.context_usage_ratio,
            summary_trigger_tokens=figures.summary_trigger_tokens,
            summary_pressure_ratio=figures.summary_pressure_ratio,
            summary_active=figures.summary_active,
            source=source,
        )
    )
    _set_current_usage(conv, figures, measured_at=measured_at)
    if source in ("auto_compaction", "manual_compression"):
        conv.last_compression_at = measured_at
    conv.last_activity_at = max(conv.last_activity_at or measured_at, measured_at)


def _set_current_usage(conv: Conversation, figures: UsageFigures, *, measured_at: datetime) -> None:
    conv.llm_input_tokens = figures.llm_input_tokens
    conv.next_llm_input_tokens = figures.next_llm_input_tokens
    conv.context_window = figures.context_window
    conv.context_usage_ratio = figures.context_usage_ratio
    conv.summary_trigger_tokens = figures.summary_trigger_tokens
    conv.summary_pressure_ratio = figures.summary_pressure_ratio
    conv.summary_active = figures.summary_active
    conv.usage_measured_at = measured_at


def index_saved_files(
    session: Session,
    thread_id: str,
    saved_files: Sequence[tuple[str | None, str, SavedFile]],
) -> int:
    """Add the newly offloaded files to `tool_results` (one row per thread and path)."""
    added = 0
    for tool_call_id, tool_name, saved in saved_files:
        exists = session.scalar(
            sa.select(ToolResult.id).where(
                ToolResult.thread_id == thread_id, ToolResult.path == saved.path
            )
        )
        if exists is not None:
            continue
        session.add(
            ToolResult(
                thread_id=thread_id,
                tool_name=tool_name,
                tool_call_id=tool_call_id,
                sha256=saved.sha256,
                path=saved.path,
                chars=saved.chars,
                approx_tokens=saved.approx_tokens,
            )
        )
        session.flush()
        added += 1
    return added


def _append_chat(
    session: Session,
    thread_id: str,
    messages: Sequence[tuple[str, str]],
    *,
    at: datetime,
) -> int:
    if not messages:
        return 0
    last = session.scalar(
        sa.select(sa.func.max(ChatMessage.sequence)).where(ChatMessage.thread_id == thread_id)
    )
    sequence = int(last or 0)
    for role, content in messages:
        sequence += 1
        session.add(
            ChatMessage(
                thread_id=thread_id, sequence=sequence, role=role, content=content, created_at=at
            )
        )
    return len(messages)


def _merged_token_usage(
    previous: Mapping[str, Any], *, compression: dict[str, Any], figures: UsageFigures
) -> dict[str, Any]:
    merged = {k: v for k, v in previous.items() if k not in PER_CALL_USAGE_FIELDS}
    merged.update(
        {
            "compression": compression,
            "summary_active": True,
            "summary_trigger_tokens": figures.summary_trigger_tokens,
            "next_llm_input_tokens": figures.next_llm_input_tokens,
            "summary_pressure_ratio": figures.summary_pressure_ratio,
            "context_window": figures.context_window,
        }
    )
    return merged


# --- compress -------------------------------------------------------------------


def compress_thread_context(
    thread_id: str,
    *,
    actor: Actor,
    expected_version: int | None = None,
    user_id: str | None = None,
    settings: Settings | None = None,
    summarizer: Any | None = None,
) -> CompressResult:
    """Summarize a thread's history now, under the conversation row lock (DESIGN §4).

    `user_id`, when given, is an ownership guard: a thread of another user is 404.
    `expected_version` is the version the operator saw: a moved state is 409 stale_state.
    """
    settings = settings or get_settings()
    target = thread_target(thread_id)
    audit_detail: dict[str, Any] = {"role": actor.role.label, "via": actor.via}
    if expected_version is not None:
        audit_detail["expected_version"] = expected_version
    try:
        require_role(actor, Role.OPERATOR, action="compressing a thread")
        result = _compress_locked(
            thread_id,
            expected_version=expected_version,
            user_id=user_id,
            settings=settings,
            summarizer=summarizer,
        )
    except SummarizerFailed as exc:
        _audit_safely(actor.id, target, "failed", {**audit_detail, "code": exc.code}, settings)
        raise
    except YuxiDashError as exc:
        outcome = (
            "refused" if exc.status_code < 500 or exc.code == "workdir_unavailable" else "failed"
        )
        _audit_safely(actor.id, target, outcome, {**audit_detail, "code": exc.code}, settings)
        raise
    except Exception as exc:
        _audit_safely(
            actor.id, target, "failed", {**audit_detail, "error": type(exc).__name__}, settings
        )
        raise
    _audit_safely(
        actor.id,
        target,
        result.status,
        {
            **audit_detail,
            "version": result.version,
            "before_tokens": result.before_tokens,
            "after_tokens": result.after_tokens,
            "compressed_messages": result.compressed_messages,
            "reason": result.reason,
            "file_path": result.file_path,
        },
        settings,
    )
    return result


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


def _compress_locked(
    thread_id: str,
    *,
    expected_version: int | None,
    user_id: str | None,
    settings: Settings,
    summarizer: Any | None,
) -> CompressResult:
    from yuxi_dash.compression import force_summarize, get_summarizer

    with thread_lock(thread_id, settings=settings) as (session, conv):
        conv = _require_thread(conv, thread_id, user_id=user_id)
        _require_idle(session, thread_id)
        agent = _require_agent(session, conv.agent_slug)
        if not agent.compression_capable:
            raise CompressionUnsupported(f"agent {agent.slug} does not support context compression")
        stored = load_state(session, thread_id) or StoredState(
            state=ThreadContextState(thread_id=thread_id, messages=[]), version=0, token_usage={}
        )
        if expected_version is not None and stored.version != expected_version:
            raise StaleState(
                f"thread {thread_id} is at version {stored.version}, not {expected_version}; "
                "reload before compressing"
            )
        workdir = Workdir(settings.workdir)
        workdir.ensure_writable()
        state = stored.state
        outcome = force_summarize(
            state,
            workdir=workdir,
            summarizer=summarizer or get_summarizer(settings),
            keep_messages=agent.summary_keep_messages,
            tool_result_token_limit=agent.summary_tool_result_token_limit,
        )
        if outcome.status != "completed":
            return CompressResult(
                thread_id=thread_id,
                status=outcome.status,
                before_tokens=outcome.before_tokens,
                after_tokens=outcome.after_tokens,
                compressed_messages=outcome.compressed_messages,
                file_path=outcome.file_path,
                reason=outcome.reason,
                version=stored.version,
            )
        now = utcnow()
        figures = UsageFigures(
            llm_input_tokens=outcome.after_tokens,
            next_llm_input_tokens=outcome.after_tokens,
            context_window=agent.context_window,
            summary_trigger_tokens=usage.summary_trigger_tokens(agent.summary_threshold),
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
        version = write_state(
            session,
            outcome.state,
            expected_version=stored.version,
            token_usage=_merged_token_usage(
                stored.token_usage, compression=compression, figures=figures
            ),
        )
        _apply_usage(session, conv, figures, source="manual_compression", measured_at=now)
        index_saved_files(session, thread_id, outcome.saved_files)
        return CompressResult(
            thread_id=thread_id,
            status="completed",
            before_tokens=outcome.before_tokens,
            after_tokens=outcome.after_tokens,
            compressed_messages=outcome.compressed_messages,
            file_path=outcome.file_path,
            reason=outcome.reason,
            version=version,
        )


def preview_compression(
    thread_id: str, settings: Settings | None = None, *, user_id: str | None = None
) -> CompressionPreview:
    """What a compress would summarize now, and the estimated token drop; writes nothing.

    The after-estimate counts the kept messages plus a summary placeholder of
    the same size as the previous summary (or 1/10 of the summarized part);
    the real figure depends on the summarizer.
    """
    from yuxi_dash.compression import count_state_tokens, count_tokens
    from yuxi_dash.compression.engine import plan_cutoff

    with session_scope(settings) as session:
        conv = session.scalar(sa.select(Conversation).where(Conversation.thread_id == thread_id))
        conv = _require_thread(conv, thread_id, user_id=user_id)
        agent = session.scalar(sa.select(Agent).where(Agent.slug == conv.agent_slug))
        reason_busy = busy_reason(session, thread_id)
        stored = load_state(session, thread_id)
        keep = agent.summary_keep_messages if agent else 10
        tool_limit = agent.summary_tool_result_token_limit if agent else 300
        agent_capable = bool(agent and agent.compression_capable)
        agent_known = agent is not None
    state = stored.state if stored else ThreadContextState(thread_id=thread_id, messages=[])
    start = state.visible_start
    cutoff = plan_cutoff(state, keep)  # the engine's own plan: None when nothing would go
    if cutoff is None:
        cutoff = start
    to_summarize = sum(1 for m in state.messages[start:cutoff] if not is_summary_message(m))
    before = count_state_tokens(state)
    reason: str | None = None
    if to_summarize == 0:
        after = before
        reason = "insufficient_history"
    else:
        summarized_tokens = count_tokens(state.messages[start:cutoff])
        previous = state.summary.summary_message if state.summary else None
        placeholder_tokens = (
            count_tokens([previous]) if previous is not None else max(1, summarized_tokens // 10)
        )
        kept = [_as_offloaded(m, tool_limit) for m in state.messages[cutoff:]]
        after = min(before, count_tokens(kept) + placeholder_tokens)
    if not agent_known:
        reason = "agent_not_found"
    elif not agent_capable:
        reason = "compression_unsupported"
    elif reason_busy:
        reason = "thread_busy"
    return CompressionPreview(
        thread_id=thread_id,
        messages_to_summarize=to_summarize,
        estimated_before_tokens=before,
        estimated_after_tokens=after,
        version=stored.version if stored else 0,
        busy_reason=reason_busy,
        capable=agent_capable,
        reason=reason,
    )


_SAVED_HEADER_ALLOWANCE_CHARS = 400  # the "[Tool result saved]" header lines around a preview


def _as_offloaded(message: BaseMessage, token_limit: int) -> BaseMessage:
    """For estimates: a large ToolMessage as the engine would leave it (header + preview)."""
    from yuxi_dash.compression import is_saved_result

    if not isinstance(message, ToolMessage) or is_saved_result(message):
        return message
    text = message_text(message)
    if -(-len(text) // 4) <= token_limit:
        return message
    return message.model_copy(
        update={"content": "x" * (token_limit * 4 + _SAVED_HEADER_ALLOWANCE_CHARS)}
    )


# --- intake and the run lifecycle --------------------------------------------------


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
    waits in the per-thread FIFO until `dispatch_next_request`.
    """
    if run_type not in RUN_TYPES:
        raise InvalidInput(f"unknown run type {run_type!r}")
    with thread_lock(thread_id, settings=settings, wait_seconds=wait_seconds) as (session, conv):
        conv = _require_thread(conv, thread_id)
        now = utcnow()
        body = dict(payload or {})
        if content is not None:
            body["content"] = content
            _append_chat(session, thread_id, [("user", content)], at=now)
        request = RunRequest(
            thread_id=thread_id, run_type=run_type, status="queued", payload=body, created_at=now
        )
        session.add(request)
        conv.last_activity_at = now
        session.flush()
        return RequestInfo(
            id=request.id,
            thread_id=thread_id,
            run_type=run_type,
            status=request.status,
            created_at=request.created_at,
        )


def dispatch_next_request(thread_id: str, *, settings: Settings | None = None) -> RunInfo | None:
    """Start the oldest queued request as a running run; None when nothing can start.

    Nothing starts while another run of the thread is not final (the FIFO waits).
    """
    with thread_lock(thread_id, settings=settings) as (session, conv):
        _require_thread(conv, thread_id)
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
        now = utcnow()
        request.status = "dispatched"
        request.dispatched_at = now
        run = AgentRun(
            thread_id=thread_id,
            request_id=request.id,
            run_type=request.run_type,
            status="running",
            created_at=now,
            started_at=now,
        )
        session.add(run)
        session.flush()
        return RunInfo(
            id=run.id,
            thread_id=thread_id,
            run_type=run.run_type,
            status=run.status,
            request_id=request.id,
            payload=dict(request.payload or {}),
        )


def cancel_request(request_id: int, *, settings: Settings | None = None) -> RequestInfo:
    """Cancel a queued request (it will never be dispatched); InvalidInput if not queued."""
    with session_scope(settings) as session:
        thread_id = session.scalar(
            sa.select(RunRequest.thread_id).where(RunRequest.id == request_id)
        )
    if thread_id is None:
        raise NotFound(f"request {request_id} not found")
    with thread_lock(thread_id, settings=settings) as (session, _conv):
        request = session.get(RunRequest, request_id)
        if request is None:
            raise NotFound(f"request {request_id} not found")
        if request.status != "queued":
            raise InvalidInput(f"request {request_id} is {request.status}, not queued")
        request.status = "cancelled"
        return RequestInfo(
            id=request.id,
            thread_id=thread_id,
            run_type=request.run_type,
            status=request.status,
            created_at=request.created_at,
        )


def start_run(
    thread_id: str, *, run_type: str = "chat", settings: Settings | None = None
) -> RunInfo:
    """Start a run that did not come from the queue (a resume or a subagent)."""
    if run_type not in RUN_TYPES:
        raise InvalidInput(f"unknown run type {run_type!r}")
    with thread_lock(thread_id, settings=settings) as (session, conv):
        _require_thread(conv, thread_id)
        now = utcnow()
        run = AgentRun(
            thread_id=thread_id, run_type=run_type, status="running", created_at=now, started_at=now
        )
        session.add(run)
        session.flush()
        return RunInfo(
            id=run.id, thread_id=thread_id, run_type=run_type, status="running", request_id=None
        )


def finish_run(
    run_id: int, *, status: str = "completed", settings: Settings | None = None
) -> RunInfo:
    """Move a run to a final status (completed / failed / cancelled / interrupted)."""
    if status not in FINAL_RUN_STATUSES:
        raise InvalidInput(f"{status!r} is not a final run status")
    with session_scope(settings) as session:
        thread_id = session.scalar(sa.select(AgentRun.thread_id).where(AgentRun.id == run_id))
    if thread_id is None:
        raise NotFound(f"run {run_id} not found")
    with thread_lock(thread_id, settings=settings) as (session, _conv):
        run = session.get(AgentRun, run_id)
        if run is None:
            raise NotFound(f"run {run_id} not found")
        if run.status in FINAL_RUN_STATUSES:
            raise InvalidInput(f"run {run_id} is already {run.status}")
        run.status = status
        run.finished_at = utcnow()
        return RunInfo(
            id=run.id,
            thread_id=run.thread_id,
            run_type=run.run_type,
            status=status,
            request_id=run.request_id,
        )


def record_model_call(
    thread_id: str,
    *,
    state: ThreadContextState,
    expected_version: int,
    usage: Any,
    source: str = "model_call",
    chat_messages: Sequence[tuple[str, str]] = (),
    saved_files: Sequence[tuple[str | None, str, SavedFile]] = (),
    token_usage: dict[str, Any] | None = None,
    measured_at: datetime | None = None,
    settings: Settings | None = None,
) -> int:
    """Write one model call atomically: state (CAS), snapshot, current usage, chat, tool results.

    `usage` is a `yuxi_dash.usage.UsageSnapshot`, a UsageFigures or a mapping with
    their keys. `source` is model_call or auto_compaction. `token_usage=None`
    stores the usage figures as the checkpoint's token usage. Returns the new version.
    """
    figures = UsageFigures.coerce(usage)
    at = measured_at or utcnow()
    with thread_lock(thread_id, settings=settings) as (session, conv):
        conv = _require_thread(conv, thread_id)
        version = write_state(
            session,
            state,
            expected_version=expected_version,
            token_usage=token_usage if token_usage is not None else figures.to_dict(),
        )
        _apply_usage(session, conv, figures, source=source, measured_at=at)
        _append_chat(session, thread_id, chat_messages, at=at)
        index_saved_files(session, thread_id, saved_files)
        return version


# --- agents, threads, import ----------------------------------------------------------

_AGENT_FIELDS = (
    "name",
    "capabilities",
    "context_window",
    "summary_threshold",
    "summary_keep_messages",
    "summary_tool_result_token_limit",
)


def upsert_agent(session: Session, slug: str, **fields: Any) -> Agent:
    """Create or update an agent by slug (fields: name, capabilities, context_window, ...)."""
    unknown = set(fields) - set(_AGENT_FIELDS)
    if unknown:
        raise InvalidInput(f"unknown agent fields: {', '.join(sorted(unknown))}")
    agent = session.scalar(sa.select(Agent).where(Agent.slug == slug))
    if agent is None:
        agent = Agent(slug=slug, name=fields.pop("name", slug))
        session.add(agent)
    for key, value in fields.items():
        if value is not None:
            setattr(agent, key, list(value) if key == "capabilities" else value)
    session.flush()
    return agent


def create_thread(
    session: Session,
    thread_id: str,
    *,
    user_id: str,
    agent_slug: str,
    title: str = "",
    status: str = "active",
    created_at: datetime | None = None,
) -> Conversation:
    """Insert a conversation row (no checkpoint yet); InvalidInput if the thread exists."""
    if session.scalar(sa.select(Conversation.id).where(Conversation.thread_id == thread_id)):
        raise InvalidInput(f"thread {thread_id} already exists")
    at = created_at or utcnow()
    conv = Conversation(
        thread_id=thread_id,
        user_id=user_id,
        agent_slug=agent_slug,
        title=title,
        status=status,
        created_at=at,
        updated_at=at,
        last_activity_at=at,
        deleted_at=at if status == "deleted" else None,
    )
    session.add(conv)
    session.flush()
    return conv


def set_thread_status(thread_id: str, status: str, *, settings: Settings | None = None) -> None:
    """Archive, delete (soft) or reactivate a thread, under the row lock."""
    if status not in ("active", "archived", "deleted"):
        raise InvalidInput(f"unknown thread status {status!r}")
    with thread_lock(thread_id, settings=settings) as (_session, conv):
        if conv is None:
            raise ThreadNotFound(f"thread {thread_id} not found")
        conv.status = status
        conv.deleted_at = utcnow() if status == "deleted" else None


def _text(value: Any, name: str, *, required: bool = True, limit: int = 128) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise InvalidInput(f"import: {name} must be a non-empty string")
    if len(value) > limit:
        raise InvalidInput(f"import: {name} is longer than {limit} characters")
    return value


def _int_field(data: Mapping[str, Any], key: str, default: int) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidInput(f"import: agent.{key} must be a positive integer")
    return value


def _validate_import(payload: Any) -> dict[str, Any]:
    if not isinstance(payload, dict):
        raise InvalidInput("import: the thread JSON must be an object")
    thread_id = _text(payload.get("thread_id"), "thread_id")
    user_id = _text(payload.get("user_id"), "user_id")
    title = _text(payload.get("title"), "title", required=False, limit=512)
    agent = payload.get("agent")
    if not isinstance(agent, dict):
        raise InvalidInput("import: agent must be an object with at least a slug")
    slug = _text(agent.get("slug"), "agent.slug")
    capabilities = agent.get("capabilities", [])
    if not isinstance(capabilities, list) or not all(isinstance(c, str) for c in capabilities):
        raise InvalidInput("import: agent.capabilities must be a list of strings")
    agent_fields = {
        "name": _text(agent.get("name", slug), "agent.name", limit=256),
        "capabilities": capabilities,
        "context_window": _int_field(agent, "context_window", 128_000),
        "summary_threshold": _int_field(agent, "summary_threshold", 100),
        "summary_keep_messages": _int_field(agent, "summary_keep_messages", 10),
        "summary_tool_result_token_limit": _int_field(
            agent, "summary_tool_result_token_limit", 300
        ),
    }
    raw_messages = payload.get("messages")
    if not isinstance(raw_messages, list):
        raise InvalidInput("import: messages must be a list of LangChain message dicts")
    messages: list[BaseMessage] = []
    for index, raw in enumerate(raw_messages):
        try:
            (message,) = messages_from_dict([raw])
        except Exception as exc:  # noqa: BLE001 - any malformed entry is one clear line
            raise InvalidInput(
                f"import: messages[{index}] is not a LangChain message dict ({type(exc).__name__})"
            ) from exc
        messages.append(message)
    return {
        "thread_id": thread_id,
        "user_id": user_id,
        "title": title,
        "agent_slug": slug,
        "agent_fields": agent_fields,
        "messages": messages,
    }


def _write_import(
    payload: dict[str, Any], *, actor: Actor, settings: Settings
) -> tuple[str, int, bool, list[BaseMessage]]:
    """Validate and write one import under the thread's lock; returns (id, version, created, messages)."""
    from yuxi_dash.compression import count_tokens

    require_role(actor, Role.OPERATOR, action="importing a thread")
    data = _validate_import(payload)
    thread_id = data["thread_id"]
    messages: list[BaseMessage] = data["messages"]
    state = ThreadContextState(thread_id=thread_id, messages=messages)
    with thread_lock(thread_id, settings=settings) as (session, conv):
        created = conv is None
        agent = upsert_agent(session, data["agent_slug"], **data["agent_fields"])
        if conv is None:
            conv = create_thread(
                session,
                thread_id,
                user_id=data["user_id"],
                agent_slug=data["agent_slug"],
                title=data["title"],
            )
        else:
            if conv.user_id != data["user_id"]:
                raise InvalidInput(
                    f"import: thread {thread_id} belongs to another user; refusing to move it"
                )
            _require_idle(session, thread_id)
            conv.agent_slug = data["agent_slug"]
            conv.title = data["title"] or conv.title
            if conv.status == "deleted":
                conv.status, conv.deleted_at = "active", None
        stored = load_state(session, thread_id)
        tokens = count_tokens(state.model_visible_messages())
        figures = UsageFigures(
            llm_input_tokens=tokens,
            next_llm_input_tokens=tokens,
            context_window=agent.context_window,
            summary_trigger_tokens=usage.summary_trigger_tokens(agent.summary_threshold),
            summary_active=state.summary_active(),
        )
        version = write_state(
            session,
            state,
            expected_version=stored.version if stored else 0,
            token_usage={**figures.to_dict(), "imported": True},
        )
        now = utcnow()
        _set_current_usage(conv, figures, measured_at=now)
        conv.last_activity_at = now
        session.execute(sa.delete(ChatMessage).where(ChatMessage.thread_id == thread_id))
        _append_chat(
            session,
            thread_id,
            [(chat_role(m), message_text(m)) for m in messages if not is_summary_message(m)],
            at=now,
        )
    return thread_id, version, created, messages


def import_thread(
    payload: dict[str, Any], *, actor: Actor, settings: Settings | None = None
) -> ImportResult:
    """Create or replace a thread from the `import-thread` JSON (DESIGN §7).

    Re-importing a thread replaces its state with a new version and its chat
    record with the imported messages; it never duplicates anything. The agent
    is created or updated from `agent`. Invalid input changes nothing.
    """
    settings = settings or get_settings()
    raw_id = payload.get("thread_id") if isinstance(payload, dict) else None
    try:
        thread_id, version, created, messages = _write_import(
            payload, actor=actor, settings=settings
        )
    except YuxiDashError as exc:  # refused: nothing was written, but the attempt is on record
        record_audit(
            actor=actor.id,
            action=IMPORT_ACTION,
            target=thread_target(raw_id) if isinstance(raw_id, str) and raw_id else "thread:?",
            outcome="refused",
            detail={"code": exc.code},
            settings=settings,
        )
        raise
    record_audit(
        actor=actor.id,
        action=IMPORT_ACTION,
        target=thread_target(thread_id),
        outcome="completed",
        detail={"version": version, "created": created, "messages": len(messages)},
        settings=settings,
    )
    return ImportResult(
        thread_id=thread_id, version=version, created=created, messages=len(messages)
    )
