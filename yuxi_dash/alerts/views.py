"""What the Alerts page and `yuxi-dash alerts list` read: current alerts, history, channels.

Read-only. Current alerts are the pending and firing rows with the thread's
live pressure (a ``cited_evidence_lost`` alert: the cited items its newest
compression record lost; a ``forecast_crossing`` alert: the minutes until its forecast
crossing, `alerts.forecast_crossing`) and why it cannot be compressed, if it cannot
(`store.origin`). They sort firing first, then by kind (`KIND_ORDER`), then the most
urgent first (`urgency`: the highest pressure or count, the fewest minutes); the history is the newest ``alert`` audit rows (each transition);
a channel's state says whether it is paused and why.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from yuxi_dash.alerts.cited_evidence import newest_cited_lost
from yuxi_dash.alerts.delivery import ALERTMANAGER, WEBHOOK
from yuxi_dash.alerts.evaluate import ALERT_ACTION, scope_filter
from yuxi_dash.alerts.forecast_crossing import CANDIDATES_MAX, gate_minutes, live_minutes
from yuxi_dash.alerts.machine import FIRING, PENDING
from yuxi_dash.alerts.payloads import thread_link, webhook_configured
from yuxi_dash.printable_record import Record
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import (
    ALERT_KIND_CITED_LOST,
    ALERT_KIND_FORECAST,
    ALERT_KIND_PRESSURE,
    AlertChannel,
    AlertRule,
    AlertState,
    AuditEntry,
    Conversation,
    utcnow,
)
from yuxi_dash.store.origin import capability, named_attached
from yuxi_dash.store.thread_list import forecast_gate

KIND_ORDER = (ALERT_KIND_PRESSURE, ALERT_KIND_FORECAST, ALERT_KIND_CITED_LOST)  # over 100%
# first, then about to cross it, then what a compression already lost


@dataclass(frozen=True)
class AlertInfo(Record):
    rule: str
    severity: str
    state: str
    thread_id: str
    agent: str
    platform: str
    pressure: float
    fire_at: float
    clear_at: float
    since: datetime
    for_seconds: float
    link: str
    checkpoint_id: str | None  # the thread's newest projected checkpoint (the stale-click guard)
    compress_blocker: str | None = None  # why nobody can compress the thread (None: one can)
    kind: str = ALERT_KIND_PRESSURE  # its rule's (`cited_evidence_lost`: pressure is items lost;
    # `forecast_crossing`: minutes until the forecast crossing)


@dataclass(frozen=True)
class HistoryItem(Record):
    at: datetime
    thread: str
    outcome: str
    rule: str | None
    pressure: float | None
    kind: str = ALERT_KIND_PRESSURE  # what ``pressure`` measures (its rule's kind)


def urgency(state: str, kind: str, measure: float, thread_id: str) -> tuple[Any, ...]:
    """The sort key of an alert: firing first, then `KIND_ORDER`, then the most urgent
    measure first (a forecast's fewest minutes; the others' highest value), then thread id."""
    rank = KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)
    return (state != FIRING, rank, measure if kind == ALERT_KIND_FORECAST else -measure, thread_id)


@dataclass(frozen=True)
class ChannelInfo(Record):
    channel: str
    configured: bool
    paused: bool
    consecutive_failures: int
    failures_total: int
    sent_total: int
    last_error: str | None


def current_alerts(settings: Settings | None = None) -> list[AlertInfo]:
    """Firing then pending alerts, by kind, the most urgent first (`urgency`)."""
    settings = settings or get_settings()
    now = utcnow()
    with session_scope(settings) as session:
        rows = session.execute(
            sa.select(AlertState, Conversation.summary_pressure_ratio, Conversation.checkpoint_id)
            .outerjoin(Conversation, Conversation.thread_id == AlertState.thread_id)
            .where(AlertState.state.in_((FIRING, PENDING)))
        ).all()
        verdict = capability(session, settings) if rows else None
        cited = [s.thread_id for s, *_ in rows if s.kind == ALERT_KIND_CITED_LOST]
        cited_lost = newest_cited_lost(session, cited)
        forecast = [
            (s.thread_id, gate_minutes(s.fire_at, s.clear_at))
            for s, *_ in rows
            if s.kind == ALERT_KIND_FORECAST
        ]
        minutes = live_minutes(session, forecast, now=now)
    out = []
    for state, live, checkpoint_id in rows:
        since = (state.firing_since if state.state == FIRING else state.pending_since) or (
            state.changed_at
        )
        pressure = state.pressure  # the measure the pass stored, unless a live one is read
        if state.kind == ALERT_KIND_PRESSURE and live is not None:
            pressure = live
        elif state.kind == ALERT_KIND_CITED_LOST:
            pressure = cited_lost.get(state.thread_id, pressure)
        elif state.kind == ALERT_KIND_FORECAST:
            pressure = minutes.get(
                (state.thread_id, gate_minutes(state.fire_at, state.clear_at)), pressure
            )
        out.append(
            AlertInfo(
                rule=state.rule_name,
                severity=state.severity,
                state=state.state,
                thread_id=state.thread_id,
                agent=state.agent_slug,
                platform=state.platform,
                pressure=float(pressure),
                fire_at=state.fire_at,
                clear_at=state.clear_at,
                since=since,
                for_seconds=round((now - since).total_seconds(), 1),
                link=thread_link(state.thread_id, settings),
                checkpoint_id=checkpoint_id,
                compress_blocker=verdict.blocker(
                    state.thread_id, state.agent_slug, attached=named_attached(state.platform)
                )
                if verdict
                else None,
                kind=state.kind,
            )
        )
    out.sort(key=lambda a: urgency(a.state, a.kind, a.pressure, a.thread_id))
    return out


def capped_forecast_rules(settings: Settings | None = None) -> list[str]:
    """The enabled ``forecast_crossing`` rules with more threads active within their horizon
    than a pass forecasts (`CANDIDATES_MAX`: the most pressured are read), by name. One bounded
    count per such rule over the activity index."""
    now = utcnow()
    with session_scope(settings) as session:
        found = session.scalars(
            sa.select(AlertRule)
            .where(AlertRule.enabled, AlertRule.kind == ALERT_KIND_FORECAST)
            .order_by(AlertRule.name)
        ).all()
        capped = []
        for rule in found:
            since = now - timedelta(minutes=rule.fire_at)
            active = (
                sa.select(Conversation.thread_id)
                .where(*forecast_gate(since), Conversation.status != "deleted", scope_filter(rule))
                .limit(CANDIDATES_MAX + 1)
                .subquery()
            )
            counted = session.execute(sa.select(sa.func.count()).select_from(active))
            if counted.scalar_one() > CANDIDATES_MAX:
                capped.append(rule.name)
        return capped


def history(settings: Settings | None = None, *, limit: int = 50) -> list[HistoryItem]:
    """The newest alert transitions (from the audit log)."""
    with session_scope(settings) as session:
        rows = session.scalars(
            sa.select(AuditEntry)
            .where(AuditEntry.action == ALERT_ACTION)
            .order_by(AuditEntry.id.desc())
            .limit(limit)
        ).all()
        return [
            HistoryItem(
                at=row.at,
                thread=row.target.removeprefix("thread:"),
                outcome=row.outcome,
                rule=(row.detail or {}).get("rule"),
                pressure=(row.detail or {}).get("pressure"),
                kind=(row.detail or {}).get("kind") or ALERT_KIND_PRESSURE,
            )
            for row in rows
        ]


def channels(settings: Settings | None = None) -> list[ChannelInfo]:
    """Each delivery channel: configured, paused, its failures."""
    settings = settings or get_settings()
    with session_scope(settings) as session:
        rows = {c.channel: c for c in session.scalars(sa.select(AlertChannel)).all()}
    configured = {
        ALERTMANAGER: bool(settings.alertmanager_url),
        WEBHOOK: webhook_configured(settings),
    }
    out = []
    for name, is_configured in configured.items():
        row = rows.get(name)
        out.append(
            ChannelInfo(
                channel=name,
                configured=is_configured,
                paused=bool(row and row.paused_at is not None),
                consecutive_failures=row.consecutive_failures if row else 0,
                failures_total=row.failures_total if row else 0,
                sent_total=row.sent_total if row else 0,
                last_error=row.last_error if row else None,
            )
        )
    return out
