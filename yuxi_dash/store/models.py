"""SQLAlchemy 2 typed models of the dashboard's own tables.

`conversations` is THE row the service locks. A thread's state (messages,
summary event, token usage) is not a table here: it lives in a LangGraph
checkpointer (`store.checkpointer`). The row carries a projection of it: the
newest checkpoint id and the thread's current usage (the latest
`usage_snapshots` row's figures, written in the same transaction), so "latest
pressure per thread" is an index lookup on `conversations.summary_pressure_ratio`,
never a scan of snapshots. Timestamps are stored and returned as timezone-aware
UTC on every backend.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from yuxi_dash.agents import (
    DEFAULT_CONTEXT_WINDOW,
    DEFAULT_SUMMARY_KEEP_MESSAGES,
    DEFAULT_SUMMARY_THRESHOLD,
    DEFAULT_TOOL_RESULT_TOKEN_LIMIT,
)

# --- vocabulary -------------------------------------------------------------
THREAD_STATUSES = ("active", "archived", "deleted")
RUN_TYPES = ("chat", "resume", "subagent")
RUN_STATUSES: tuple[str, ...] = ("pending", "running", "completed", "failed")
RUN_STATUSES += ("cancel_requested", "cancelled", "interrupted")
FINAL_RUN_STATUSES = frozenset({"completed", "failed", "cancelled", "interrupted"})
NON_FINAL_RUN_STATUSES = tuple(s for s in RUN_STATUSES if s not in FINAL_RUN_STATUSES)
REQUEST_STATUSES = ("queued", "dispatched", "cancelled", "rejected", "failed")
SNAPSHOT_SOURCES = ("model_call", "auto_compaction", "manual_compression")
CONTEXT_COMPRESSION = "context_compression"
ORIGIN_DASHBOARD = "dashboard"
ORIGIN_ATTACHED = "attached"

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on PostgreSQL and SQLite alike."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = sa.MetaData(
        naming_convention={
            "ix": "ix_%(table_name)s_%(column_0_N_name)s",
            "uq": "uq_%(table_name)s_%(column_0_N_name)s",
            "ck": "ck_%(table_name)s_%(constraint_name)s",
            "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
            "pk": "pk_%(table_name)s",
        }
    )


class Agent(Base):
    __tablename__ = "agents"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    slug: Mapped[str] = mapped_column(sa.String(128), unique=True)
    name: Mapped[str] = mapped_column(sa.String(256))
    capabilities: Mapped[list[str]] = mapped_column(sa.JSON, default=list)
    context_window: Mapped[int] = mapped_column(sa.Integer, default=DEFAULT_CONTEXT_WINDOW)
    summary_threshold: Mapped[int] = mapped_column(sa.Integer, default=DEFAULT_SUMMARY_THRESHOLD)
    summary_keep_messages: Mapped[int] = mapped_column(
        sa.Integer, default=DEFAULT_SUMMARY_KEEP_MESSAGES
    )
    summary_tool_result_token_limit: Mapped[int] = mapped_column(
        sa.Integer, default=DEFAULT_TOOL_RESULT_TOKEN_LIMIT
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    @property
    def compression_capable(self) -> bool:
        return CONTEXT_COMPRESSION in (self.capabilities or [])


class Conversation(Base):
    __tablename__ = "conversations"
    __table_args__ = (
        sa.Index("ix_conversations_pressure", "summary_pressure_ratio", "thread_id"),
        sa.Index("ix_conversations_user_id", "user_id"),
        sa.Index("ix_conversations_agent_slug", "agent_slug"),
        sa.Index("ix_conversations_last_activity_at", "last_activity_at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    thread_id: Mapped[str] = mapped_column(sa.String(128), unique=True)
    user_id: Mapped[str] = mapped_column(sa.String(128))
    # No foreign key: a thread can name an agent that no longer exists (404 agent_not_found).
    agent_slug: Mapped[str] = mapped_column(sa.String(128))
    title: Mapped[str] = mapped_column(sa.String(512), default="")
    status: Mapped[str] = mapped_column(sa.String(16), default="active")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)
    deleted_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # current usage: the latest snapshot's figures, written with each snapshot
    llm_input_tokens: Mapped[int] = mapped_column(sa.Integer, default=0)
    next_llm_input_tokens: Mapped[int] = mapped_column(sa.Integer, default=0)
    context_window: Mapped[int] = mapped_column(sa.Integer, default=0)
    context_usage_ratio: Mapped[float] = mapped_column(sa.Float, default=0.0)
    summary_trigger_tokens: Mapped[int] = mapped_column(sa.Integer, default=0)
    summary_pressure_ratio: Mapped[float] = mapped_column(sa.Float, default=0.0)
    summary_active: Mapped[bool] = mapped_column(sa.Boolean, default=False)
    usage_measured_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_compression_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_activity_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # the newest checkpoint projected into this row (the stale-click guard compares it)
    checkpoint_id: Mapped[str | None] = mapped_column(sa.String(64), nullable=True)
    # "dashboard": its state is written here; "attached": an attached platform owns it
    origin: Mapped[str] = mapped_column(sa.String(16), default=ORIGIN_DASHBOARD)
    # an attached thread: the platform it was projected from ("<system identifier>/<database>")
    platform_id: Mapped[str | None] = mapped_column(sa.String(128), nullable=True)
    # a compress running (service.compress: leased under the row lock); void past its time
    compress_lease_id: Mapped[str | None] = mapped_column(sa.String(32), nullable=True)
    compress_lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class AgentRun(Base):
    __tablename__ = "agent_runs"
    __table_args__ = (
        sa.Index("ix_agent_runs_thread_id_created_at", "thread_id", "created_at"),
        sa.Index("ix_agent_runs_status", "status"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    thread_id: Mapped[str] = mapped_column(
        sa.String(128), sa.ForeignKey("conversations.thread_id", ondelete="CASCADE")
    )
    request_id: Mapped[int | None] = mapped_column(
        BigId, sa.ForeignKey("run_requests.id", ondelete="SET NULL"), nullable=True
    )
    run_type: Mapped[str] = mapped_column(sa.String(16), default="chat")
    status: Mapped[str] = mapped_column(sa.String(24), default="pending")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class RunRequest(Base):
    __tablename__ = "run_requests"
    __table_args__ = (sa.Index("ix_run_requests_thread_id_status", "thread_id", "status"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    thread_id: Mapped[str] = mapped_column(
        sa.String(128), sa.ForeignKey("conversations.thread_id", ondelete="CASCADE")
    )
    run_type: Mapped[str] = mapped_column(sa.String(16), default="chat")
    status: Mapped[str] = mapped_column(sa.String(16), default="queued")
    payload: Mapped[dict[str, Any]] = mapped_column(sa.JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    dispatched_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class UsageSnapshotRow(Base):
    __tablename__ = "usage_snapshots"
    __table_args__ = (
        sa.Index("ix_usage_snapshots_thread_id_measured_at", "thread_id", "measured_at"),
        sa.Index("ix_usage_snapshots_source_measured_at", "source", "measured_at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    thread_id: Mapped[str] = mapped_column(
        sa.String(128), sa.ForeignKey("conversations.thread_id", ondelete="CASCADE")
    )
    measured_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    llm_input_tokens: Mapped[int] = mapped_column(sa.Integer)
    next_llm_input_tokens: Mapped[int] = mapped_column(sa.Integer)
    context_window: Mapped[int] = mapped_column(sa.Integer)
    context_usage_ratio: Mapped[float] = mapped_column(sa.Float)
    summary_trigger_tokens: Mapped[int] = mapped_column(sa.Integer)
    summary_pressure_ratio: Mapped[float] = mapped_column(sa.Float)
    summary_active: Mapped[bool] = mapped_column(sa.Boolean, default=False)
    source: Mapped[str] = mapped_column(sa.String(24), default="model_call")
    model: Mapped[str | None] = mapped_column(sa.String(128), nullable=True)  # as reported
    output_tokens: Mapped[int | None] = mapped_column(sa.Integer, nullable=True)  # as reported


class ChatMessage(Base):
    """The full, never-compressed chat record of a thread."""

    __tablename__ = "chat_messages"
    __table_args__ = (
        sa.UniqueConstraint("thread_id", "sequence"),
        sa.UniqueConstraint("thread_id", "message_id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    thread_id: Mapped[str] = mapped_column(
        sa.String(128), sa.ForeignKey("conversations.thread_id", ondelete="CASCADE")
    )
    sequence: Mapped[int] = mapped_column(sa.Integer)
    role: Mapped[str] = mapped_column(sa.String(16))
    content: Mapped[str] = mapped_column(sa.Text, default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # the id of the state message this row records (None: written at intake, before a run)
    message_id: Mapped[str | None] = mapped_column(sa.String(128), nullable=True)


class ScanWatermark(Base):
    """How far an attached checkpointer's projection read; the last scan's platform, cost and
    progress (`attach.scan_progress`)."""

    __tablename__ = "scan_watermarks"

    source: Mapped[str] = mapped_column(sa.String(128), primary_key=True)
    checkpoint_id: Mapped[str] = mapped_column(sa.String(64), default="")
    scanned_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    threads: Mapped[int] = mapped_column(sa.Integer, default=0)
    platform_id: Mapped[str | None] = mapped_column(sa.String(128), nullable=True)  # "<id>/<db>"
    checkpoint_index: Mapped[bool | None] = mapped_column(sa.Boolean, nullable=True)  # None: unread
    window_query_ms: Mapped[float | None] = mapped_column(sa.Float, nullable=True)
    window_rows: Mapped[int | None] = mapped_column(sa.BigInteger, nullable=True)  # in the window
    table_rows: Mapped[int | None] = mapped_column(sa.BigInteger, nullable=True)  # estimated
    progress: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON, nullable=True)


class AttachQuarantine(Base):
    """A platform thread a scan could not project (quarantined) or projected with a warning.

    ``action`` is "quarantined" (not projected; skipped until its newest
    checkpoint changes) or "flagged" (projected; its checkpoint is dated ahead of
    the platform database's clock). ``thread_label`` and ``checkpoint_id`` are
    the platform's strings made printable (control characters escaped, cut);
    ``thread_key`` is the SHA-256 of the exact thread id.
    """

    __tablename__ = "attach_quarantine"
    __table_args__ = (sa.UniqueConstraint("source", "thread_key", "action"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    source: Mapped[str] = mapped_column(sa.String(128))
    thread_key: Mapped[str] = mapped_column(sa.String(64))
    thread_label: Mapped[str] = mapped_column(sa.String(256))
    checkpoint_id: Mapped[str] = mapped_column(sa.String(64))
    action: Mapped[str] = mapped_column(sa.String(16))
    code: Mapped[str] = mapped_column(sa.String(64))
    reason: Mapped[str] = mapped_column(sa.Text)
    first_seen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ToolResult(Base):
    """Index of one offloaded tool-result file. The file is the truth."""

    __tablename__ = "tool_results"
    __table_args__ = (
        sa.UniqueConstraint("thread_id", "path"),
        sa.Index("ix_tool_results_sha256", "sha256"),
        sa.Index("ix_tool_results_tool_name", "tool_name"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    thread_id: Mapped[str] = mapped_column(
        sa.String(128), sa.ForeignKey("conversations.thread_id", ondelete="CASCADE")
    )
    tool_name: Mapped[str] = mapped_column(sa.String(128))
    tool_call_id: Mapped[str | None] = mapped_column(sa.String(128), nullable=True)
    sha256: Mapped[str] = mapped_column(sa.String(64))
    path: Mapped[str] = mapped_column(sa.String(1024))
    chars: Mapped[int] = mapped_column(sa.Integer)
    approx_tokens: Mapped[int] = mapped_column(sa.Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class AuditEntry(Base):
    __tablename__ = "audit_log"
    __table_args__ = (
        sa.Index("ix_audit_log_at", "at"),
        sa.Index("ix_audit_log_actor", "actor"),
        sa.Index("ix_audit_log_action", "action"),
        sa.Index("ix_audit_log_target", "target"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    actor: Mapped[str] = mapped_column(sa.String(256))
    action: Mapped[str] = mapped_column(sa.String(64))
    target: Mapped[str] = mapped_column(sa.String(256))
    outcome: Mapped[str] = mapped_column(sa.String(32))
    detail: Mapped[dict[str, Any]] = mapped_column(sa.JSON, default=dict)


class MemoryCorrection(Base):
    """One correction of a user's memory graph (or its undo): `before`/`after` map each touched
    fact uuid to its full snapshot (every property, embedding too) or null when absent. The
    audit row (`audit_id`) has ids and outcome; the reason is only here. Bulk: `batch_audit_id`."""

    __tablename__ = "memory_corrections"
    __table_args__ = (
        sa.Index("ix_memory_corrections_user_id", "user_id"),
        sa.Index("ix_memory_corrections_fact_uuid", "fact_uuid"),
    )

    id: Mapped[str] = mapped_column(sa.String(36), primary_key=True)
    audit_id: Mapped[int] = mapped_column(
        BigId, sa.ForeignKey("audit_log.id"), unique=True, nullable=False
    )
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    actor: Mapped[str] = mapped_column(sa.String(256))
    user_id: Mapped[str] = mapped_column(sa.String(128))
    group_id: Mapped[str] = mapped_column(sa.String(160))
    fact_uuid: Mapped[str] = mapped_column(sa.String(64))
    action: Mapped[str] = mapped_column(sa.String(16))
    reason: Mapped[str] = mapped_column(sa.Text, default="")
    ticket: Mapped[str | None] = mapped_column(sa.String(64), nullable=True)
    before: Mapped[dict[str, Any]] = mapped_column(sa.JSON, default=dict)
    after: Mapped[dict[str, Any]] = mapped_column(sa.JSON, default=dict)
    hits_before: Mapped[int] = mapped_column(sa.Integer, default=0)
    undoes_id: Mapped[str | None] = mapped_column(sa.String(36), nullable=True)
    undone_by_audit_id: Mapped[int | None] = mapped_column(BigId, nullable=True)
    undone_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    batch_audit_id: Mapped[int | None] = mapped_column(BigId, nullable=True, index=True)


API_TOKEN_ROLES = ("viewer", "operator", "admin")


class ApiToken(Base):
    """A service token of the HTTP API: only its SHA-256 `hash` is stored, never the token.

    `actor` is the name the audit log records (as `api:<actor>`); a revoked token
    keeps its row (`revoked_at` set) so the audit trail still names it.
    """

    __tablename__ = "api_tokens"

    id: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    hash: Mapped[str] = mapped_column(sa.String(64), unique=True)
    role: Mapped[str] = mapped_column(sa.String(16))
    actor: Mapped[str] = mapped_column(sa.String(128))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


# --- alerts (yuxi_dash.alerts) ------------------------------------------------
ALERT_SCOPES = ("all", "agent", "attached", "own")
ALERT_STATES = ("pending", "firing", "resolved")
ALERT_SEVERITIES = ("info", "warning", "critical")
ALERT_KIND_PRESSURE = "pressure"  # summary pressure of a thread (`fire_at` a ratio)
ALERT_KIND_CITED_LOST = "cited_evidence_lost"  # cited items its newest compression lost
ALERT_KIND_FORECAST = "forecast_crossing"  # minutes until it is forecast to reach 100%
ALERT_KINDS = (ALERT_KIND_PRESSURE, ALERT_KIND_CITED_LOST, ALERT_KIND_FORECAST)


class AlertRule(Base):
    """An alert rule: fires at `fire_at`, resolves only past `clear_at` (below; minutes: above)."""

    __tablename__ = "alert_rules"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(sa.String(128), unique=True)
    scope: Mapped[str] = mapped_column(sa.String(16), default="all")
    agent_slug: Mapped[str | None] = mapped_column(sa.String(128), nullable=True)
    fire_at: Mapped[float] = mapped_column(sa.Float, default=0.85)
    clear_at: Mapped[float] = mapped_column(sa.Float, default=0.80)
    for_seconds: Mapped[int] = mapped_column(sa.Integer, default=0)
    severity: Mapped[str] = mapped_column(sa.String(16), default="warning")
    enabled: Mapped[bool] = mapped_column(sa.Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # leave out threads nobody can compress (new rules: on)
    compressible_only: Mapped[bool] = mapped_column(
        sa.Boolean, default=True, server_default=sa.true()
    )
    kind: Mapped[str] = mapped_column(  # what `fire_at` measures (`ALERT_KINDS`), fixed
        sa.String(32), default=ALERT_KIND_PRESSURE, server_default=ALERT_KIND_PRESSURE
    )


class AlertState(Base):
    """One (rule, thread) alert: pending, firing or resolved. No row: inactive.

    `rule_name` is kept so a resolved alert of a deleted rule can still be sent
    as resolved; `episode` counts the times it fired (event ids name it).
    """

    __tablename__ = "alert_states"
    __table_args__ = (
        sa.UniqueConstraint("rule_id", "thread_id"),
        sa.Index("ix_alert_states_state_changed_at", "state", "changed_at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    rule_id: Mapped[int | None] = mapped_column(
        BigId, sa.ForeignKey("alert_rules.id", ondelete="SET NULL"), nullable=True
    )
    rule_name: Mapped[str] = mapped_column(sa.String(128))
    severity: Mapped[str] = mapped_column(sa.String(16))
    thread_id: Mapped[str] = mapped_column(sa.String(128))
    agent_slug: Mapped[str] = mapped_column(sa.String(128))
    platform: Mapped[str] = mapped_column(sa.String(16))
    state: Mapped[str] = mapped_column(sa.String(16))
    pressure: Mapped[float] = mapped_column(sa.Float, default=0.0)
    threshold_tokens: Mapped[int] = mapped_column(sa.Integer, default=0)
    fire_at: Mapped[float] = mapped_column(sa.Float)
    clear_at: Mapped[float] = mapped_column(sa.Float)
    episode: Mapped[int] = mapped_column(sa.Integer, default=0)
    pending_since: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    firing_since: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    resolved_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    changed_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    kind: Mapped[str] = mapped_column(  # its rule's (`pressure` is what that kind measures)
        sa.String(32), default=ALERT_KIND_PRESSURE, server_default=ALERT_KIND_PRESSURE
    )


class AlertOutbox(Base):
    """One webhook notice of one state change, written with the change; sent at most once."""

    __tablename__ = "alert_outbox"
    __table_args__ = (sa.Index("ix_alert_outbox_sent_at_id", "sent_at", "id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    event_id: Mapped[str] = mapped_column(sa.String(64), unique=True)
    channel: Mapped[str] = mapped_column(sa.String(32), default="webhook")
    kind: Mapped[str] = mapped_column(sa.String(16))
    thread_id: Mapped[str] = mapped_column(sa.String(128))
    payload: Mapped[dict[str, Any]] = mapped_column(sa.JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    attempts: Mapped[int] = mapped_column(sa.Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_error: Mapped[str | None] = mapped_column(sa.String(256), nullable=True)
    # claimed by a sender until then (committed before the post; no lock held across it)
    claimed_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class AlertChannel(Base):
    """A delivery channel's health: consecutive failures, pause, failure total (for /metrics)."""

    __tablename__ = "alert_channels"

    channel: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    consecutive_failures: Mapped[int] = mapped_column(sa.Integer, default=0)
    failures_total: Mapped[int] = mapped_column(sa.Integer, default=0)
    sent_total: Mapped[int] = mapped_column(sa.Integer, default=0)
    paused_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_error: Mapped[str | None] = mapped_column(sa.String(256), nullable=True)
    last_success_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # leased by a pass until then (committed before the post; no lock held across it)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class ScanTiming(Base):
    """How long the last attach scan of a source took, and when it ended (for /metrics)."""

    __tablename__ = "scan_timings"

    source: Mapped[str] = mapped_column(sa.String(128), primary_key=True)
    seconds: Mapped[float] = mapped_column(sa.Float, default=0.0)
    finished_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    projected: Mapped[int] = mapped_column(sa.Integer, default=0)


class ApiIdempotencyKey(Base):
    """An `Idempotency-Key` a token sent to the HTTP API, and the first answer it got.

    `status_code` is None while that first call runs; `fingerprint` (a SHA-256 of
    the thread and the expected checkpoint) tells a reuse for another request.
    """

    __tablename__ = "api_idempotency_keys"

    token_id: Mapped[str] = mapped_column(
        sa.String(32), sa.ForeignKey("api_tokens.id", ondelete="CASCADE"), primary_key=True
    )
    key: Mapped[str] = mapped_column(sa.String(128), primary_key=True)
    fingerprint: Mapped[str] = mapped_column(sa.String(64))
    status_code: Mapped[int | None] = mapped_column(sa.Integer, nullable=True)
    response: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    completed_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
