"""Delivery (yuxi_dash.alerts.delivery) to a real Alertmanager and a real local webhook receiver.

PostgreSQL only: the outbox rows are taken FOR UPDATE SKIP LOCKED, and one
test kills a real evaluator process in the middle of a send.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from tests.alerts.builders import OPERATOR, SECRET, add_rule, hot_compressible_thread, put_thread
from tests.fixtures.monitoring import WebhookReceiver
from yuxi_dash import sources
from yuxi_dash.access.audit import wait_for_pending_audit
from yuxi_dash.alerts.delivery import LEASE_MARGIN_SECONDS, PAUSE_AFTER, drain_webhook
from yuxi_dash.alerts.evaluate import evaluate
from yuxi_dash.alerts.views import channels, current_alerts
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AlertOutbox, AuditEntry, Conversation, utcnow

pytestmark = pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
REPO = Path(__file__).resolve().parents[2]


def active_alerts(url: str) -> list[dict[str, str]]:
    response = httpx.get(f"{url}/api/v2/alerts", params={"active": "true"}, timeout=5)
    response.raise_for_status()
    return [a["labels"] for a in response.json() if a["status"]["state"] == "active"]


def use_alertmanager(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("YUXI_DASH_ALERTMANAGER_URL", url)
    monkeypatch.setenv("YUXI_DASH_PUBLIC_URL", "https://dash.example.com")
    get_settings.cache_clear()


def use_webhook(monkeypatch: pytest.MonkeyPatch, receiver: WebhookReceiver) -> None:
    monkeypatch.setenv("YUXI_DASH_ALERT_WEBHOOK_URL", receiver.url)
    monkeypatch.setenv("YUXI_DASH_ALERT_WEBHOOK_SECRET", SECRET)
    get_settings.cache_clear()


def test_alertmanager_gets_the_labels_and_a_compress_resolves_one_rule_not_the_other(
    db_url: str, alertmanager: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_alertmanager(monkeypatch, alertmanager)
    add_rule("hot")
    add_rule("sticky", fire_at=0.9, clear_at=0.0, severity="critical")  # never clears
    hot_compressible_thread("t1")
    report = evaluate()
    assert (report.firing, report.alertmanager_posted) == (2, 2)
    labels = sorted(active_alerts(alertmanager), key=lambda a: a["rule"])
    assert labels == [
        {"alertname": "ThreadContextPressure", "rule": "hot", "platform": "own",
         "agent": "agent-a", "thread_id": "t1", "severity": "warning"},
        {"alertname": "ThreadContextPressure", "rule": "sticky", "platform": "own",
         "agent": "agent-a", "thread_id": "t1", "severity": "critical"},
    ]  # fmt: skip
    raw = httpx.get(f"{alertmanager}/api/v2/alerts", timeout=5).json()
    annotations = raw[0]["annotations"]
    assert annotations["dashboard"] == "https://dash.example.com/thread_detail?thread=t1"
    assert float(annotations["pressure"]) == pytest.approx(0.95)

    # a real compress: the hook evaluates after it and resolves "hot" (below its clear_at)
    result = sources.compress_thread_context("t1", actor=OPERATOR)
    assert result.status == "completed"
    with session_scope() as session:
        after = session.scalar(
            sa.select(Conversation.summary_pressure_ratio).where(Conversation.thread_id == "t1")
        )
    assert after < 0.80
    assert [(a.rule, a.state) for a in current_alerts()] == [("sticky", "firing")]
    assert len(active_alerts(alertmanager)) == 2  # the compress itself sends nothing
    assert evaluate().alertmanager_posted == 2  # the next pass (serve's loop, `alerts evaluate`)
    assert [a["rule"] for a in active_alerts(alertmanager)] == ["sticky"]


def test_webhook_signed_once_per_change_and_resolved_after_a_compress(
    db_url: str, webhook_receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_webhook(monkeypatch, webhook_receiver)
    add_rule("hot")
    hot_compressible_thread("t1")
    assert evaluate().notified == 1
    assert evaluate().notified == 0  # nothing changed: nothing sent
    assert len(webhook_receiver.requests) == 1
    request = webhook_receiver.requests[0]
    expected = "sha256=" + hmac.new(SECRET.encode(), request["body"], hashlib.sha256).hexdigest()
    assert request["headers"]["X-Yuxi-Dash-Signature"] == expected
    first = webhook_receiver.events()[0]
    assert (first["kind"], first["thread_id"], first["rule"]) == ("firing", "t1", "hot")
    assert request["headers"]["X-Yuxi-Dash-Event"] == first["event_id"]

    sources.compress_thread_context("t1", actor=OPERATOR)  # the hook evaluates, sends nothing
    assert len(webhook_receiver.requests) == 1
    assert evaluate().notified == 1  # the next pass sends the resolved notice
    kinds = [e["kind"] for e in webhook_receiver.events()]
    assert kinds == ["firing", "resolved"]
    assert len({e["event_id"] for e in webhook_receiver.events()}) == 2
    evaluate()
    assert len(webhook_receiver.requests) == 2


def test_killed_while_sending_delivers_after_restart_once_per_change(
    db_url: str, webhook_receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_webhook(monkeypatch, webhook_receiver)
    add_rule("hot")
    put_thread("t1", 0.95)
    webhook_receiver.hang.set()  # the first request gets no answer
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, "-c", "from yuxi_dash.alerts.evaluate import evaluate; evaluate()"],
        env=env,
        start_new_session=True,
    )
    try:
        assert webhook_receiver.arrived.wait(60), "the evaluator never sent"
        os.killpg(process.pid, signal.SIGKILL)  # killed between deciding and hearing back
        process.wait(10)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    webhook_receiver.release.set()
    with session_scope() as session:  # the change was committed, its notice not marked sent
        rows = session.scalars(sa.select(AlertOutbox)).all()
        assert [(r.kind, r.sent_at) for r in rows] == [("firing", None)]

    assert evaluate().notified == 0  # claimed by the killed sender: skipped until the claim ends
    later = utcnow() + timedelta(seconds=get_settings().alert_deadline_seconds)
    later += timedelta(seconds=LEASE_MARGIN_SECONDS + 1)
    report = evaluate(now=later)  # the claim ran out: the notice goes again, same event id
    assert (report.notified, report.fired) == (1, 0)
    evaluate()
    events = webhook_receiver.events()
    assert len(events) == 2
    assert len({e["event_id"] for e in events}) == 1  # the receiver dedupes: one change, once


def test_failing_webhook_backs_off_then_pauses_audited(
    db_url: str, webhook_receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_webhook(monkeypatch, webhook_receiver)
    webhook_receiver.status = 500
    add_rule("hot")
    put_thread("t1", 0.95)
    now = utcnow()
    evaluate(now=now)
    assert len(webhook_receiver.requests) == 1
    drain_webhook(get_settings(), now=now)  # backing off: not due yet, not sent
    assert len(webhook_receiver.requests) == 1
    for step in range(1, PAUSE_AFTER):
        drain_webhook(get_settings(), now=now + timedelta(seconds=400 * step))
    assert len(webhook_receiver.requests) == PAUSE_AFTER
    (hook,) = [c for c in channels() if c.channel == "webhook"]
    assert hook.paused and hook.failures_total == PAUSE_AFTER
    wait_for_pending_audit()
    with session_scope() as session:
        outcomes = session.scalars(
            sa.select(AuditEntry.outcome).where(AuditEntry.action == "alert_channel")
        ).all()
    assert outcomes == ["paused"]

    webhook_receiver.status = 200  # the probe after the pause succeeds: resumed, audited
    later = now + timedelta(seconds=400 * PAUSE_AFTER + 600)
    assert drain_webhook(get_settings(), now=later) == 1
    (hook,) = [c for c in channels() if c.channel == "webhook"]
    assert not hook.paused
    with session_scope() as session:
        outcomes = session.scalars(
            sa.select(AuditEntry.outcome).where(AuditEntry.action == "alert_channel")
        ).all()
    assert outcomes == ["paused", "resumed"]
