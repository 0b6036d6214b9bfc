"""Delivery: Alertmanager (every pass while firing) and the signed webhook (the outbox).

Alertmanager (``YUXI_DASH_ALERTMANAGER_URL``) is posted every firing alert
on every pass, with ``endsAt`` `FIRING_TTL` ahead (so alerts lapse if the
evaluator stops), and every alert resolved in the last
`payloads.RESOLVED_KEEP_SECONDS` with ``endsAt`` its resolution time.

The webhook (``YUXI_DASH_ALERT_WEBHOOK_URL`` and ``..._SECRET``) sends the
outbox in id order, one notice per request; a row is taken ``FOR UPDATE SKIP
LOCKED`` (no two senders send it), marked sent in the same transaction after
a 2xx, or pushed back with exponential backoff. A receiver that saw a notice
whose acknowledgement was lost sees the same ``event_id`` again. After
`PAUSE_AFTER` consecutive failed attempts a channel pauses (audited); a
paused channel tries once every `PAUSE_PROBE_SECONDS` and resumes (audited)
on success.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
import sqlalchemy as sa
from sqlalchemy.orm import Session
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_fixed

from yuxi_dash.access.audit import record_audit
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
from yuxi_dash.errors import DeliveryFailed
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import is_sqlite, session_scope
from yuxi_dash.store.models import AlertChannel, AlertOutbox, AlertState, Conversation, utcnow

log = logging.getLogger(__name__)

ALERTMANAGER = "alertmanager"
WEBHOOK = "webhook"
CHANNEL_ACTION = "alert_channel"
FIRING_TTL = timedelta(hours=1)
PAUSE_AFTER = 5
PAUSE_PROBE_SECONDS = 300
MAX_BACKOFF_SECONDS = 300
TIMEOUT_SECONDS = 5.0
ALERTMANAGER_CHUNK = 1000


@dataclass(frozen=True)
class Sent:
    webhook: int = 0
    alertmanager: int = 0


@retry(
    retry=retry_if_exception_type(httpx.TransportError),
    stop=stop_after_attempt(2),
    wait=wait_fixed(0.2),
    reraise=True,
)
def _post(client: httpx.Client, url: str, content: bytes, headers: dict[str, str]) -> None:
    response = client.post(url, content=content, headers=headers)
    if response.status_code >= 300:
        raise DeliveryFailed(f"HTTP {response.status_code}")


def _attempt(client: httpx.Client, url: str, content: bytes, headers: dict[str, str]) -> str | None:
    """None on success, else a short reason (never the URL or the body)."""
    try:
        _post(client, url, content, headers)
    except DeliveryFailed as exc:
        return str(exc)
    except httpx.HTTPError as exc:
        return type(exc).__name__
    return None


def _channel(session: Session, name: str) -> AlertChannel:
    query = sa.select(AlertChannel).where(AlertChannel.channel == name)
    if not is_sqlite(session):
        query = query.with_for_update()
    row = session.scalar(query)
    if row is None:
        row = AlertChannel(channel=name, consecutive_failures=0, failures_total=0, sent_total=0)
        session.add(row)
        session.flush()
    return row


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


def deliver_all(settings: Settings | None = None, *, now: datetime | None = None) -> Sent:
    """Post to Alertmanager and drain the webhook outbox, as configured."""
    settings = settings or get_settings()
    posted = post_alertmanager(settings, now=now) if settings.alertmanager_url else 0
    sent = drain_webhook(settings, now=now) if webhook_configured(settings) else 0
    return Sent(webhook=sent, alertmanager=posted)


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
    ).all()
    out = []
    for state, live in rows:
        out.append(
            {
                "rule_name": state.rule_name,
                "platform": state.platform,
                "agent_slug": state.agent_slug,
                "thread_id": state.thread_id,
                "severity": state.severity,
                "pressure": float(live if live is not None else state.pressure),
                "fire_at": state.fire_at,
                "clear_at": state.clear_at,
                "threshold_tokens": state.threshold_tokens,
                "firing_since": state.firing_since or state.changed_at,
                "ends_at": state.resolved_at if state.state == RESOLVED else now + FIRING_TTL,
            }
        )
    return out


def post_alertmanager(settings: Settings, *, now: datetime | None = None) -> int:
    """Post every firing and recently resolved alert; returns how many were accepted."""
    now = now or utcnow()
    assert settings.alertmanager_url
    url = settings.alertmanager_url.rstrip("/") + "/api/v2/alerts"
    with session_scope(settings) as session:
        channel = _channel(session, ALERTMANAGER)
        if not _may_try(channel, now):
            return 0
        alerts = [
            alertmanager_alert(row, ends_at=row["ends_at"], settings=settings)
            for row in _alert_rows(session, now)
        ]
        if not alerts:
            return 0
        reason = None
        with httpx.Client(timeout=TIMEOUT_SECONDS) as client:
            for start in range(0, len(alerts), ALERTMANAGER_CHUNK):
                chunk = alerts[start : start + ALERTMANAGER_CHUNK]
                content = body_bytes({"alerts": chunk})[len('{"alerts":') : -1]
                reason = _attempt(client, url, content, {"Content-Type": "application/json"})
                if reason is not None:
                    break
        if reason is None:
            _succeeded(session, channel, now, len(alerts))
            return len(alerts)
        _failed(session, channel, now, reason)
        return 0


def drain_webhook(settings: Settings, *, now: datetime | None = None) -> int:
    """Send due outbox rows in id order until one fails; returns how many were sent."""
    assert settings.alert_webhook_url and settings.alert_webhook_secret
    url = settings.alert_webhook_url
    secret = settings.alert_webhook_secret.get_secret_value()
    sent = 0
    with httpx.Client(timeout=TIMEOUT_SECONDS) as client:
        while True:
            current = now or utcnow()
            with session_scope(settings) as session:
                query = (
                    sa.select(AlertOutbox)
                    .where(AlertOutbox.sent_at.is_(None), AlertOutbox.channel == WEBHOOK)
                    .order_by(AlertOutbox.id)
                    .limit(1)
                )
                if not is_sqlite(session):
                    query = query.with_for_update(skip_locked=True)
                row = session.scalar(query)
                if row is None or row.next_attempt_at > current:
                    return sent
                channel = _channel(session, WEBHOOK)
                if not _may_try(channel, current):
                    return sent
                body = body_bytes(row.payload)
                headers = {
                    "Content-Type": "application/json",
                    SIGNATURE_HEADER: signature(secret, body),
                    EVENT_HEADER: row.event_id,
                }
                reason = _attempt(client, url, body, headers)
                row.attempts += 1
                if reason is None:
                    row.sent_at = current
                    row.last_error = None
                    _succeeded(session, channel, current, 1)
                    sent += 1
                    continue
                row.last_error = reason[:256]
                backoff = min(2**row.attempts, MAX_BACKOFF_SECONDS)
                row.next_attempt_at = current + timedelta(seconds=backoff)
                _failed(session, channel, current, reason)
            return sent
