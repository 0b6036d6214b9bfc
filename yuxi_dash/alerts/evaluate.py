"""One evaluation pass: every rule against the threads it could concern, in one transaction.

Reads only what can change: per enabled rule the threads past its ``fire_at`` (the
pressure index; other kinds: `alerts.cited_evidence`, `alerts.forecast_crossing`), plus
every alert row (a forecast row that is no candidate never moves toward firing: pending
cancels, firing reads its live minutes through the same gate); a hook passes ``thread_id``
and reads that thread's only. A ``compressible_only`` rule skips the threads
`store.origin` says nobody can compress. Each (rule, thread) goes through
`machine.decide`; the changes are written in bulk with one audit row per transition
(action ``alert``) and, when the webhook is configured, one outbox row per firing or
resolved notice, in the same transaction, so a notice exists exactly when its change
does. Resolved rows are kept `RESOLVED_KEEP_SECONDS` (Alertmanager hears ``endsAt`` for
a while) and then dropped, as are notices delivered `SENT_KEEP_DAYS` ago. One evaluator
at a time: a PostgreSQL transaction-level advisory lock (SQLite: its one writer).
Delivery, when asked, runs after the commit.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash.access.audit import sanitize_detail, storable
from yuxi_dash.alerts.cited_evidence import newest_cited_lost, newest_records
from yuxi_dash.alerts.delivery import deliver_all
from yuxi_dash.alerts.forecast_crossing import candidates as crossing_candidates
from yuxi_dash.alerts.forecast_crossing import gate_minutes, live_minutes
from yuxi_dash.alerts.machine import CANCELLED, FIRING, PENDING, RESOLVED, Seen, decide
from yuxi_dash.alerts.payloads import RESOLVED_KEEP_SECONDS, webhook_configured, webhook_payload
from yuxi_dash.printable_record import Record
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.compressions import CompressionRecord
from yuxi_dash.store.db import is_sqlite, locked_session
from yuxi_dash.store.models import (
    ALERT_KIND_CITED_LOST,
    ALERT_KIND_FORECAST,
    ALERT_KIND_PRESSURE,
    AlertOutbox,
    AlertRule,
    AlertState,
    AuditEntry,
    Conversation,
    utcnow,
)
from yuxi_dash.store.origin import (
    ATTACHED_NAME,
    OWN_NAME,
    SCOPES_BY_ORIGIN,
    Capability,
    attached_rows,
    capability,
    is_attached,
    origin_name,
    own_rows,
)

ALERT_ACTION = "alert"
EVALUATOR = "alerts"  # the audit log's actor for transitions
ADVISORY_LOCK_KEY = 2_707_270_027  # pg_advisory_xact_lock: one evaluator across replicas
LOCK_WAIT_SECONDS = 30.0
SENT_KEEP_DAYS = 7  # delivered webhook notices are dropped from the outbox after this


@dataclass(frozen=True)
class EvaluationReport(Record):
    firing: int  # alerts firing after the pass
    pending: int
    fired: int  # transitions in this pass
    resolved: int
    started_pending: int
    cancelled: int
    queued: int  # webhook notices written to the outbox
    notified: int = 0  # webhook notices delivered after the pass
    alertmanager_posted: int = 0
    seconds: float = 0.0
    capped_rules: int = 0  # forecast rules that read only their CANDIDATES_MAX most pressured


def in_scope(rule: AlertRule | None, agent: str, origin: str, *, compressible: bool = True) -> bool:
    if rule is None or not rule.enabled:
        return False
    if rule.compressible_only and not compressible:
        return False
    if rule.scope == "agent":
        return agent == rule.agent_slug
    if rule.scope in SCOPES_BY_ORIGIN:
        return origin_name(origin) == rule.scope
    return True


def scope_filter(rule: AlertRule) -> sa.ColumnElement[bool]:
    if rule.scope == "agent":
        return Conversation.agent_slug == rule.agent_slug
    if rule.scope == ATTACHED_NAME:
        return attached_rows()
    if rule.scope == OWN_NAME:
        return own_rows()
    return sa.true()


_THREAD_COLUMNS = (
    Conversation.thread_id,
    Conversation.summary_pressure_ratio,
    Conversation.summary_trigger_tokens,
    Conversation.agent_slug,
    Conversation.origin,
    Conversation.status,
)


def _candidates(
    session: Session,
    rule: AlertRule,
    one_thread: sa.ColumnElement[bool],
    now: datetime,
    forecasts: dict[tuple[Any, ...], Any],
) -> tuple[Any, bool]:
    """The rule's threads at or past its ``fire_at``, as `_THREAD_COLUMNS` (the measure
    second: summary pressure, the cited items the newest compression record lost, or the
    minutes until a forecast crossing), and whether they were capped (forecasts only).
    ``forecasts`` keeps the forecast candidates per (horizon, scope): read once a pass."""
    where = (Conversation.status != "deleted", scope_filter(rule), one_thread)
    if rule.kind == ALERT_KIND_FORECAST:
        key = (rule.fire_at, rule.scope, rule.agent_slug)
        if key not in forecasts:
            forecasts[key] = crossing_candidates(session, rule.fire_at, where, now=now)
        return forecasts[key].rows, forecasts[key].capped
    if rule.kind == ALERT_KIND_CITED_LOST:
        record = CompressionRecord
        return session.execute(
            sa.select(Conversation.thread_id, record.cited_lost, *_THREAD_COLUMNS[2:])
            .join(record, record.thread_id == Conversation.thread_id)
            .where(record.cited_lost >= rule.fire_at, newest_records(), *where)
        ).all(), False
    return session.execute(
        sa.select(*_THREAD_COLUMNS).where(
            Conversation.summary_pressure_ratio >= rule.fire_at, *where
        )
    ).all(), False


def _take_lock(session: Session) -> None:
    if not is_sqlite(session):  # SQLite: locked_session's BEGIN IMMEDIATE is the one writer
        session.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADVISORY_LOCK_KEY})


def evaluate(
    settings: Settings | None = None,
    *,
    now: datetime | None = None,
    deliver: bool = True,
    wait_seconds: float = LOCK_WAIT_SECONDS,
    thread_id: str | None = None,
) -> EvaluationReport:
    """One pass of every rule (over one thread, if named); then (``deliver``) the sends."""
    settings = settings or get_settings()
    started = time.perf_counter()
    with locked_session(settings, wait_seconds=wait_seconds) as session:
        _take_lock(session)
        report = _evaluate_locked(session, settings, now or utcnow(), thread_id)
    if deliver:
        sent = deliver_all(settings, now=now)
        report = EvaluationReport(
            **{
                **report.to_dict(),
                "notified": sent.webhook,
                "alertmanager_posted": sent.alertmanager,
            }
        )
    return EvaluationReport(
        **{**report.to_dict(), "seconds": round(time.perf_counter() - started, 4)}
    )


def _evaluate_locked(
    session: Session, settings: Settings, now: datetime, only: str | None
) -> EvaluationReport:
    rules = {r.id: r for r in session.scalars(sa.select(AlertRule)).all()}
    live = Conversation.thread_id == AlertState.thread_id
    one_state = sa.true() if only is None else AlertState.thread_id == only
    one_thread = sa.true() if only is None else Conversation.thread_id == only
    rows = session.execute(  # plain rows, not ORM objects: thousands are read every pass
        sa.select(
            *AlertState.__table__.c,
            Conversation.summary_pressure_ratio.label("live_pressure"),
            Conversation.summary_trigger_tokens.label("live_trigger"),
            Conversation.agent_slug.label("live_agent"),
            Conversation.origin.label("live_origin"),
            Conversation.status.label("live_status"),
        )
        .outerjoin(Conversation, live)
        .where(one_state)
    ).all()
    # a deleted rule's rows (rule_id NULL) may share a thread: they are never looked up by key
    existing: dict[tuple[int | None, str], Any] = {
        (r.rule_id, r.thread_id): r for r in rows if r.rule_id is not None
    }
    tally = {FIRING: 0, RESOLVED: 0, PENDING: 0, CANCELLED: 0}
    writes = _Writes(now=now, webhook=webhook_configured(settings), settings=settings)
    seen_keys: set[tuple[int | None, str]] = set()
    picky = any(r.enabled and r.compressible_only for r in rules.values())
    can = _Compressible(capability(session, settings) if picky else None)
    forecasts: dict[tuple[Any, ...], Any] = {}
    capped = 0
    for rule in rules.values():
        if not rule.enabled:
            continue
        found, cut = _candidates(session, rule, one_thread, now, forecasts)
        capped += cut
        for thread_id, pressure, trigger, agent, origin, _status in found:
            if rule.compressible_only and not can(thread_id, agent, origin):
                continue  # an alert it had resolves below: out of the rule's scope now
            key = (rule.id, thread_id)
            seen_keys.add(key)
            state = existing.get(key)
            seen = Seen(
                state=state.state if state else None,
                pending_since=state.pending_since if state else None,
                pressure=float(pressure),
                in_scope=True,
                fire_at=rule.fire_at,
                clear_at=rule.clear_at,
                for_seconds=rule.for_seconds,
                falling=rule.kind == ALERT_KIND_FORECAST,
            )
            thread = (thread_id, float(pressure), int(trigger), agent, origin)
            writes.apply(rule, state, thread, decide(seen, now), tally)
    cited = [r.thread_id for r in rows if r.kind == ALERT_KIND_CITED_LOST]
    cited_lost = newest_cited_lost(session, cited)  # their live measure
    unseen = [r for r in rows if (r.rule_id, r.thread_id) not in seen_keys]
    gates = {r.id: _gate(r, rules) for r in unseen if r.kind == ALERT_KIND_FORECAST}
    minutes = live_minutes(  # only a firing one is held by its live minutes
        session,
        [(r.thread_id, gates[r.id]) for r in unseen if r.id in gates and r.state == FIRING],
        now=now,
    )
    for state in unseen:
        pressure, trigger, agent = state.live_pressure, state.live_trigger, state.live_agent
        if state.kind == ALERT_KIND_CITED_LOST and state.live_status is not None:
            pressure = cited_lost.get(state.thread_id, 0)
        if state.kind == ALERT_KIND_FORECAST:  # no candidate: never toward firing; firing
            # resolves when the thread has no forecast (compressed, idle past the gate)
            pressure = minutes.get((state.thread_id, gates[state.id]))
        origin, status = state.live_origin, state.live_status
        owner = rules.get(state.rule_id) if state.rule_id is not None else None
        gone = pressure is None or status == "deleted"
        seen = Seen(
            state=state.state,
            pending_since=state.pending_since,
            pressure=None if gone else float(pressure),
            in_scope=in_scope(
                owner,
                agent or state.agent_slug,
                origin or "",
                compressible=can(state.thread_id, agent or state.agent_slug, origin or ""),
            ),
            fire_at=owner.fire_at if owner else state.fire_at,
            clear_at=owner.clear_at if owner else state.clear_at,
            for_seconds=owner.for_seconds if owner else 0,
            falling=state.kind == ALERT_KIND_FORECAST,
        )
        thread = (
            state.thread_id,
            state.pressure if gone else float(pressure),
            state.threshold_tokens if gone else int(trigger),
            state.agent_slug if gone else agent,
            "" if gone else origin,
        )
        writes.apply(owner, state, thread, decide(seen, now), tally)
    writes.flush(session)
    session.execute(
        sa.delete(AlertState).where(
            AlertState.state == RESOLVED,
            AlertState.changed_at < now - timedelta(seconds=RESOLVED_KEEP_SECONDS),
        ),
        execution_options={"synchronize_session": False},
    )
    session.execute(
        sa.delete(AlertOutbox).where(AlertOutbox.sent_at < now - timedelta(days=SENT_KEEP_DAYS)),
        execution_options={"synchronize_session": False},
    )
    counts = dict(
        session.execute(
            sa.select(AlertState.state, sa.func.count()).group_by(AlertState.state)
        ).all()
    )
    return EvaluationReport(
        firing=int(counts.get(FIRING, 0)),
        pending=int(counts.get(PENDING, 0)),
        fired=tally[FIRING],
        resolved=tally[RESOLVED],
        started_pending=tally[PENDING],
        cancelled=tally[CANCELLED],
        queued=writes.queued,
        capped_rules=capped,
    )


def _gate(state: Any, rules: dict[int, AlertRule]) -> float:
    """A forecast alert's gate in minutes (`gate_minutes`): its rule's, else as stored."""
    owner = rules.get(state.rule_id) if state.rule_id is not None else None
    source = owner if owner is not None else state
    return gate_minutes(source.fire_at, source.clear_at)


class _Compressible:
    """Whether a thread can be compressed (`store.origin`); None: nobody asks."""

    def __init__(self, verdict: Capability | None) -> None:
        self.verdict = verdict

    def __call__(self, thread_id: str, agent: str | None, origin: str) -> bool:
        if self.verdict is None:
            return True
        return self.verdict.blocker(thread_id, agent, attached=is_attached(origin)) is None


class _Writes:
    """The pass's changes, written in bulk at the end (inserts, updates, deletes, audit, outbox)."""

    def __init__(self, *, now: datetime, webhook: bool, settings: Settings) -> None:
        self.now = now
        self.webhook = webhook
        self.settings = settings
        self.inserts: list[dict[str, Any]] = []
        self.updates: list[dict[str, Any]] = []
        self.deletes: list[int] = []
        self.audit: list[dict[str, Any]] = []
        self.outbox: list[dict[str, Any]] = []
        self.queued = 0

    def apply(
        self,
        rule: AlertRule | None,
        state: Any,  # a row of alert_states (with the live columns), or None
        thread: tuple[str, float, int, str, str],
        new: str | None,
        tally: dict[str, int],
    ) -> None:
        if new is None:
            return
        thread_id, pressure, trigger, agent, origin = thread
        now = self.now
        tally[new] += 1
        episode = (state.episode if state else 0) + (1 if new == FIRING else 0)
        values: dict[str, Any] = {
            "rule_id": rule.id if rule else (state.rule_id if state else None),
            "rule_name": rule.name if rule else state.rule_name if state else "",
            "severity": rule.severity if rule else state.severity if state else "warning",
            "thread_id": thread_id,
            "agent_slug": agent,
            "platform": origin_name(origin) if origin else (state.platform if state else OWN_NAME),
            "state": new,
            "pressure": pressure,
            "threshold_tokens": trigger,
            "fire_at": rule.fire_at if rule else state.fire_at if state else 0.0,
            "clear_at": rule.clear_at if rule else state.clear_at if state else 0.0,
            "episode": episode,
            "changed_at": now,
            "kind": rule.kind if rule else state.kind if state else ALERT_KIND_PRESSURE,
        }
        fresh = state is None or state.state == RESOLVED
        values["pending_since"] = None if fresh or state is None else state.pending_since
        values["firing_since"] = None if fresh or state is None else state.firing_since
        values["resolved_at"] = None
        if new == PENDING:
            values["pending_since"] = now
        elif new == FIRING:
            values["pending_since"] = values["pending_since"] or now
            values["firing_since"] = now
        elif new == RESOLVED and state is not None:
            values["pending_since"] = state.pending_since
            values["firing_since"] = state.firing_since
            values["resolved_at"] = now
        if new == CANCELLED:
            if state is not None:
                self.deletes.append(state.id)
        elif state is None:
            self.inserts.append(values)
        else:
            self.updates.append({"id": state.id, **values})
        self.audit.append(
            {
                "at": now,
                "actor": EVALUATOR,
                "action": ALERT_ACTION,
                "target": storable(f"thread:{thread_id}", 256),
                "outcome": new,
                "detail": sanitize_detail(
                    {
                        "rule": values["rule_name"],
                        "rule_id": values["rule_id"],
                        "kind": values["kind"],
                        "pressure": pressure,
                        "fire_at": values["fire_at"],
                        "clear_at": values["clear_at"],
                        "episode": episode,
                        "platform": values["platform"],
                        "agent": agent,
                    }
                ),
            }
        )
        if self.webhook and new in (FIRING, RESOLVED):
            event_id = str(uuid.uuid4())
            self.outbox.append(
                {
                    "event_id": event_id,
                    "channel": "webhook",
                    "kind": new,
                    "thread_id": thread_id,
                    "payload": webhook_payload(event_id, new, values, self.settings),
                    "created_at": now,
                    "attempts": 0,
                    "next_attempt_at": now,
                }
            )
            self.queued += 1

    def flush(self, session: Session) -> None:
        if self.deletes:
            session.execute(
                sa.delete(AlertState).where(AlertState.id.in_(self.deletes)),
                execution_options={"synchronize_session": False},
            )
        if self.updates:
            session.execute(sa.update(AlertState), self.updates)  # bulk UPDATE by primary key
        if self.inserts:
            session.execute(sa.insert(AlertState), self.inserts)
        if self.audit:
            session.execute(sa.insert(AuditEntry), self.audit)
        if self.outbox:
            session.execute(sa.insert(AlertOutbox), self.outbox)
