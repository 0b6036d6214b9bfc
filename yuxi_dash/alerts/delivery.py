"""Delivery: Alertmanager (every pass while firing) and the signed webhook (the outbox).

Each pass gives each channel one total deadline, ``YUXI_DASH_ALERT_DEADLINE_SECONDS``:
every post (`outbound.post`, answers capped at 1 MiB) and its one retry after a
connect error or a dropped connection get what is left of it. No transaction
is open during a post: the work is claimed in a short transaction and
committed, posted, then its outcome is recorded in another one. Alertmanager
gets every firing alert (``endsAt`` `FIRING_TTL` ahead) and every alert resolved
in the last `payloads.RESOLVED_KEEP_SECONDS`, under a lease on its channel row
(``lease_until``): a pass that finds it leased skips it. The webhook sends the
outbox in id order, one notice per request, each claimed (``claimed_until``;
other senders skip it) and marked sent after a 2xx, or pushed back with backoff.
A lost answer means the same ``event_id`` is sent again. After `PAUSE_AFTER`
failures in a row a channel pauses (audited), then tries once every
`PAUSE_PROBE_SECONDS` and resumes (audited) on success.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from yuxi_dash import outbound
from yuxi_dash.access.audit import record_audit
from yuxi_dash.alerts.cited_evidence import newest_cited_lost
from yuxi_dash.alerts.forecast_crossing import gate_minutes, live_minutes
from yuxi_dash.alerts.machine import FIRING, RESOLVED
from yuxi_dash.alerts.payloads import (
    EVENT_HEADER,
    RESOLVED_KEEP_SECONDS,
    SIGNATURE_HEADER,
    alertmanager_alert,
    body_bytes,
    signature,
    webhook_configured,
)
from yuxi_dash.errors import OutboundFailed
from yuxi_dash.outside_text import safe_line
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import is_sqlite, locked_session
from yuxi_dash.store.labels import agent_label, top_agents
from yuxi_dash.store.models import (
    ALERT_KIND_CITED_LOST,
    ALERT_KIND_FORECAST,
    ALERT_KIND_PRESSURE,
    AlertChannel,
    AlertOutbox,
    AlertState,
    Conversation,
    utcnow,
)

log = logging.getLogger(__name__)

ALERTMANAGER = "alertmanager"
WEBHOOK = "webhook"
CHANNEL_ACTION = "alert_channel"
FIRING_TTL = timedelta(hours=1)
PAUSE_AFTER = 5
PAUSE_PROBE_SECONDS = 300
MAX_BACKOFF_SECONDS = 300
ALERTMANAGER_CHUNK = 1000
LEASE_MARGIN_SECONDS = 10.0  # a lease or claim outlives the deadline by this (the bookkeeping)
CONNECT_SECONDS = 5.0  # at most this of the deadline goes to connecting
RETRY_PAUSE_SECONDS = 0.2  # before the one retry after a connect error or a dropped connection
MIN_POST_SECONDS = 0.05  # with less than this left, the pass posts no more on that channel
_RETRIED = (outbound.CONNECT, outbound.DROPPED)


@dataclass(frozen=True)
class Sent:
    webhook: int = 0
    alertmanager: int = 0


class Budget:
    """A channel's deadline in one pass; the clock starts at its first post."""

    def __init__(self, seconds: float) -> None:
        self.seconds = float(seconds)
        self._ends: float | None = None

    def left(self) -> float:
        if self._ends is None:
            return self.seconds
        return self._ends - time.monotonic()

    def start(self) -> float:
        """What the next post may take (the first post of the pass gets the whole deadline)."""
        if self._ends is None:
            self._ends = time.monotonic() + self.seconds
        return self.left()


def _post(url: str, content: bytes, headers: dict[str, str], budget: Budget) -> str | None:
    """One post within the budget, retried once (time allowing) if it never got an answer.

    None when accepted (2xx), else a short reason (never the URL, a header or the body).
    """
    reason = None
    for _ in (1, 2):
        given = budget.start()
        if given < MIN_POST_SECONDS:
            return reason or "the deadline was spent before the post"
        try:
            answer = outbound.post(
                url,
                content=content,
                headers=headers,
                deadline_seconds=given,
                connect_timeout_seconds=CONNECT_SECONDS,
            )
        except OutboundFailed as exc:
            reason = reason or f"{exc.kind}: {safe_line(exc.reason)}"
            if exc.kind in _RETRIED and budget.left() > RETRY_PAUSE_SECONDS + MIN_POST_SECONDS:
                time.sleep(RETRY_PAUSE_SECONDS)
                continue
            return reason
        return f"HTTP {answer.status}" if answer.status >= 300 else None
    return reason


def _ensure_channel(session: Session, name: str) -> None:
    """The channel's row exists (inserted once; a concurrent insert is not an error)."""
    exists = session.scalar(sa.select(AlertChannel.channel).where(AlertChannel.channel == name))
    if exists is not None:
        return
    insert = sqlite_insert if is_sqlite(session) else pg_insert
    values = {"channel": name, "consecutive_failures": 0, "failures_total": 0, "sent_total": 0}
    session.execute(insert(AlertChannel).values(**values).on_conflict_do_nothing())


def _channel(session: Session, name: str, *, skip_locked: bool = False) -> AlertChannel | None:
    """The channel's row, locked on PostgreSQL (None: ``skip_locked`` and another has it)."""
    _ensure_channel(session, name)
    query = (
        sa.select(AlertChannel)
        .where(AlertChannel.channel == name)
        .execution_options(populate_existing=True)
    )
    if not is_sqlite(session):
        query = query.with_for_update(skip_locked=skip_locked)
    return session.scalar(query)


def _may_try(channel: AlertChannel, now: datetime) -> bool:
    if channel.paused_at is None:
        return True
    return (now - channel.paused_at).total_seconds() >= PAUSE_PROBE_SECONDS


def _succeeded(session: Session, channel: AlertChannel, now: datetime, sent: int) -> None:
    if channel.paused_at is not None:
        record_audit(
            actor="alerts",
            action=CHANNEL_ACTION,
            target=f"channel:{channel.channel}",
            outcome="resumed",
            detail={"failures": channel.consecutive_failures},
            session=session,
        )
    channel.paused_at = None
    channel.consecutive_failures = 0
    channel.sent_total += sent
    channel.last_success_at = now


def _failed(session: Session, channel: AlertChannel, now: datetime, reason: str) -> None:
    channel.consecutive_failures += 1
    channel.failures_total += 1
    channel.last_error = reason[:256]
    if channel.consecutive_failures >= PAUSE_AFTER:
        if channel.paused_at is None:
            record_audit(
                actor="alerts",
                action=CHANNEL_ACTION,
                target=f"channel:{channel.channel}",
                outcome="paused",
                detail={"failures": channel.consecutive_failures, "reason": reason},
                session=session,
            )
        channel.paused_at = now
    log.warning("alert channel %s: delivery failed (%s)", channel.channel, reason)


def _claim_time(settings: Settings) -> timedelta:
    return timedelta(seconds=settings.alert_deadline_seconds + LEASE_MARGIN_SECONDS)


def deliver_all(settings: Settings | None = None, *, now: datetime | None = None) -> Sent:
    """Post to Alertmanager and drain the webhook outbox, as configured (both at once)."""
    settings = settings or get_settings()
    alertmanager = bool(settings.alertmanager_url)
    webhook = webhook_configured(settings)
    if alertmanager and webhook:  # one slow receiver does not hold the other channel
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="yuxi-dash-delivery") as pool:
            posted = pool.submit(post_alertmanager, settings, now=now)
            sent = pool.submit(drain_webhook, settings, now=now)
            return Sent(webhook=sent.result(), alertmanager=posted.result())
    return Sent(
        webhook=drain_webhook(settings, now=now) if webhook else 0,
        alertmanager=post_alertmanager(settings, now=now) if alertmanager else 0,
    )


def _alert_rows(session: Session, now: datetime) -> list[dict[str, Any]]:
    since = now - timedelta(seconds=RESOLVED_KEEP_SECONDS)
    rows = session.execute(
        sa.select(AlertState, Conversation.summary_pressure_ratio)
        .outerjoin(Conversation, Conversation.thread_id == AlertState.thread_id)
        .where(
            sa.or_(
                AlertState.state == FIRING,
                sa.and_(AlertState.state == RESOLVED, AlertState.changed_at >= since),
            )
        )
        .order_by(AlertState.id)
    ).all()
    cited = [state.thread_id for state, _ in rows if state.kind == ALERT_KIND_CITED_LOST]
    cited_lost = newest_cited_lost(session, cited)
    minutes = live_minutes(
        session,
        [
            (s.thread_id, gate_minutes(s.fire_at, s.clear_at))
            for s, _ in rows
            if s.kind == ALERT_KIND_FORECAST
        ],
        now=now,
    )
    out = []
    for state, live in rows:
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
            {
                "kind": state.kind,
                "rule_name": state.rule_name,
                "platform": state.platform,
                "agent_slug": state.agent_slug,
                "thread_id": state.thread_id,
                "severity": state.severity,
                "pressure": float(pressure),
                "fire_at": state.fire_at,
                "clear_at": state.clear_at,
                "threshold_tokens": state.threshold_tokens,
                "firing_since": state.firing_since or state.changed_at,
                "ends_at": state.resolved_at if state.state == RESOLVED else now + FIRING_TTL,
            }
        )
    return out


def _lease_alertmanager(
    settings: Settings, now: datetime
) -> tuple[datetime, list[dict[str, Any]]] | None:
    """Lease the channel and read what to post; None: nothing to post, paused, or leased."""
    with locked_session(settings, wait_seconds=settings.lock_timeout_seconds) as session:
        channel = _channel(session, ALERTMANAGER, skip_locked=True)
        if channel is None or not _may_try(channel, now):
            return None
        if channel.lease_until is not None and channel.lease_until > now:
            return None  # another pass is posting: skip, never wait for it
        rows = _alert_rows(session, now)
        if not rows:
            return None
        top = top_agents(session, settings.label_agents_max)
        alerts = [
            alertmanager_alert(
                row,
                ends_at=row["ends_at"],
                agent_label=agent_label(row["agent_slug"], top),
                settings=settings,
            )
            for row in rows
        ]
        lease = now + _claim_time(settings)
        channel.lease_until = lease
    return lease, alerts


def post_alertmanager(settings: Settings, *, now: datetime | None = None) -> int:
    """Post every firing and recently resolved alert; returns how many were accepted."""
    now = now or utcnow()
    assert settings.alertmanager_url
    url = settings.alertmanager_url.rstrip("/") + "/api/v2/alerts"
    leased = _lease_alertmanager(settings, now)
    if leased is None:
        return 0
    lease, alerts = leased
    budget = Budget(settings.alert_deadline_seconds)
    reason = None
    for start in range(0, len(alerts), ALERTMANAGER_CHUNK):  # committed: no transaction open
        chunk = alerts[start : start + ALERTMANAGER_CHUNK]
        content = body_bytes({"alerts": chunk})[len('{"alerts":') : -1]
        reason = _post(url, content, {"Content-Type": "application/json"}, budget)
        if reason is not None:
            break
    with locked_session(settings, wait_seconds=settings.lock_timeout_seconds) as session:
        channel = _channel(session, ALERTMANAGER)
        assert channel is not None
        if channel.lease_until == lease:
            channel.lease_until = None
        if reason is not None:
            _failed(session, channel, now, reason)
            return 0
        _succeeded(session, channel, now, len(alerts))
    return len(alerts)


@dataclass(frozen=True)
class _Claim:
    id: int
    event_id: str
    payload: dict[str, Any]
    until: datetime


def _claim_notice(settings: Settings, now: datetime) -> _Claim | None:
    """Claim the oldest unsent notice when it is due and no one holds it (None otherwise:
    a notice after it never overtakes it, so the receiver sees them in id order)."""
    with locked_session(settings, wait_seconds=settings.lock_timeout_seconds) as session:
        channel = session.get(AlertChannel, WEBHOOK)
        if channel is not None and not _may_try(channel, now):
            return None
        query = (
            sa.select(AlertOutbox)
            .where(AlertOutbox.sent_at.is_(None), AlertOutbox.channel == WEBHOOK)
            .order_by(AlertOutbox.id)
            .limit(1)
        )
        if not is_sqlite(session):  # SQLite: BEGIN IMMEDIATE, one claimer at a time
            query = query.with_for_update()  # held only by another claim's short transaction
        row = session.scalar(query)
        if row is None or row.next_attempt_at > now:
            return None  # the oldest is backing off: the ones after it wait (order kept)
        if row.claimed_until is not None and row.claimed_until > now:
            return None  # another sender is posting it: the ones after it wait too
        row.claimed_until = now + _claim_time(settings)
        return _Claim(row.id, row.event_id, dict(row.payload), row.claimed_until)


def _record_notice(settings: Settings, claim: _Claim, now: datetime, reason: str | None) -> None:
    """Mark the notice sent, or push it back (if the claim is still ours); count the channel."""
    with locked_session(settings, wait_seconds=settings.lock_timeout_seconds) as session:
        query = sa.select(AlertOutbox).where(AlertOutbox.id == claim.id)
        if not is_sqlite(session):
            query = query.with_for_update()
        row = session.scalar(query)
        channel = _channel(session, WEBHOOK)
        assert row is not None and channel is not None  # unsent rows are never deleted
        mine = row.claimed_until == claim.until and row.sent_at is None
        if mine:
            row.claimed_until = None
        if reason is None:
            row.attempts += 1
            row.sent_at = row.sent_at or now
            row.last_error = None
            _succeeded(session, channel, now, 1)
            return
        _failed(session, channel, now, reason)
        if mine:  # else another sender has it now (our claim ran out): its outcome decides
            row.attempts += 1
            row.last_error = reason[:256]
            backoff = min(2**row.attempts, MAX_BACKOFF_SECONDS)
            row.next_attempt_at = now + timedelta(seconds=backoff)


def drain_webhook(settings: Settings, *, now: datetime | None = None) -> int:
    """Send due notices in id order until one fails; returns how many were sent.

    A notice is started only while half the deadline is left, so each gets a fair share of it
    (the first gets all of it); the rest wait for the next pass.
    """
    assert settings.alert_webhook_url and settings.alert_webhook_secret
    url = settings.alert_webhook_url
    secret = settings.alert_webhook_secret.get_secret_value()
    budget = Budget(settings.alert_deadline_seconds)
    sent = 0
    while budget.left() >= budget.seconds / 2:
        current = now or utcnow()
        claim = _claim_notice(settings, current)
        if claim is None:
            break
        body = body_bytes(claim.payload)
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: signature(secret, body),
            EVENT_HEADER: claim.event_id,
        }
        reason = _post(url, body, headers, budget)  # committed: no transaction open
        _record_notice(settings, claim, now or utcnow(), reason)  # backoff from the answer
        if reason is not None:
            break
        sent += 1
    return sent
