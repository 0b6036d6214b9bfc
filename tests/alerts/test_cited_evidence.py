"""The alert rule kind `cited_evidence_lost`: a thread whose newest compression record lost
cited evidence, through the same state machine, audit, outbox and Alertmanager labels.

Records are written as the writers write them (`tests.store.compression_builders`), and
once by a real compress whose hook evaluates the thread.
"""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest

from tests.alerts.builders import ADMIN, OPERATOR, SECRET, add_rule, alert_audit, put_thread
from tests.fixtures.monitoring import WebhookReceiver
from tests.service.builders import seed_thread
from tests.store.compression_builders import cited_thread, item, put_record
from yuxi_dash import sources
from yuxi_dash.alerts import rules
from yuxi_dash.alerts.evaluate import evaluate
from yuxi_dash.alerts.views import current_alerts
from yuxi_dash.errors import InvalidInput
from yuxi_dash.settings import get_settings
from yuxi_dash.store.compressions import list_compressions
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import utcnow

KIND = "cited_evidence_lost"


def states() -> dict[tuple[str, str], tuple[str, str, float]]:
    return {(a.rule, a.thread_id): (a.state, a.kind, a.pressure) for a in current_alerts()}


def lost(n: int) -> list:
    """A ledger whose cited items: one kept in view, ``n`` lost."""
    return [item("kept", "visible", cited=True)] + [
        item(f"gone-{i}", "lost", cited=True) for i in range(n)
    ]


def test_fires_on_the_newest_record_only_and_resolves_on_a_newer_one(db_url: str) -> None:
    add_rule("cited", kind=KIND)
    add_rule("hot")  # a pressure rule beside it: each reads its own measure
    start = utcnow() - timedelta(hours=2)
    put_record("t1", start, lost(2))
    put_record("t2", start, lost(1))
    put_record("t2", start + timedelta(minutes=5), lost(0))  # newer: nothing cited lost
    put_record("t3", start, [item("plain", "lost")])  # lost, but nobody cited it
    put_thread("t4", 0.95)  # hot, no record
    report = evaluate()
    assert report.fired == 2
    assert states() == {
        ("cited", "t1"): ("firing", KIND, 2.0),
        ("hot", "t4"): ("firing", "pressure", 0.95),
    }
    assert evaluate().fired == 0  # nothing changed: no transition

    put_record("t1", start + timedelta(minutes=10), lost(0))
    report = evaluate(thread_id="t1")  # what the hook after t1's write runs
    assert report.resolved == 1
    assert states() == {("hot", "t4"): ("firing", "pressure", 0.95)}
    assert alert_audit().count(("thread:t1", "resolved")) == 1

    put_record("t1", start + timedelta(minutes=20), lost(1))  # a new episode
    assert evaluate().fired == 1
    assert states()[("cited", "t1")] == ("firing", KIND, 1.0)


def test_fire_at_counts_items_and_a_deleted_rule_resolves(db_url: str) -> None:
    add_rule("three", kind=KIND, fire_at=3, clear_at=1)
    start = utcnow() - timedelta(hours=1)
    put_record("t1", start, lost(2))
    put_record("t2", start, lost(3))
    evaluate()
    assert set(states()) == {("three", "t2")}
    put_record("t2", start + timedelta(minutes=1), lost(1))  # below fire_at, not below clear_at
    assert evaluate().resolved == 0
    assert states()[("three", "t2")] == ("firing", KIND, 1.0)
    rules.delete_rule(ADMIN, "three")
    assert evaluate().resolved == 1
    assert states() == {}


def test_rule_kinds_are_checked(db_url: str) -> None:
    info = rules.add_rule(ADMIN, name="cited", kind=KIND)
    assert (info.kind, info.fire_at, info.clear_at) == (KIND, 1, 1)  # fires on any, clears on none
    assert rules.add_rule(ADMIN, name="hot").kind == "pressure"
    with pytest.raises(InvalidInput, match="kind must be one of"):
        rules.add_rule(ADMIN, name="odd", kind="tokens")
    with pytest.raises(InvalidInput, match="not be above"):
        rules.add_rule(ADMIN, name="odd", kind=KIND, fire_at=1, clear_at=2)
    with pytest.raises(InvalidInput, match="below fire_at"):
        rules.add_rule(ADMIN, name="odd", fire_at=0.8, clear_at=0.8)
    with pytest.raises(InvalidInput, match="kind cannot change"):
        rules.update_rule(ADMIN, "cited", kind="pressure")
    assert rules.update_rule(ADMIN, "cited", fire_at=2).kind == KIND


def test_a_real_compress_records_and_its_hook_evaluates_the_thread(db_url: str) -> None:
    seed_thread(messages=cited_thread(), keep_messages=4)
    add_rule("cited", kind=KIND)
    put_record("t1", utcnow() - timedelta(hours=1), lost(2))
    evaluate()
    assert states()[("cited", "t1")][0] == "firing"
    assert sources.compress_thread_context("t1", actor=OPERATOR).status == "completed"
    with session_scope() as session:
        newest = list_compressions(session, "t1", limit=1)[0]
    assert newest.trigger == "manual"  # the real record is the newest
    still = newest.ledger["cited"]["lost"]
    expected = {("cited", "t1"): ("firing", KIND, float(still))} if still else {}
    assert states() == expected  # the compress's own hook evaluated it, no pass in between


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_alertmanager_and_the_webhook_name_the_kind(
    db_url: str,
    alertmanager: str,
    webhook_receiver: WebhookReceiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("YUXI_DASH_ALERTMANAGER_URL", alertmanager)
    monkeypatch.setenv("YUXI_DASH_ALERT_WEBHOOK_URL", webhook_receiver.url)
    monkeypatch.setenv("YUXI_DASH_ALERT_WEBHOOK_SECRET", SECRET)
    get_settings.cache_clear()
    add_rule("cited", kind=KIND, severity="critical")
    start = utcnow() - timedelta(hours=1)
    put_record("t1", start, lost(2))
    report = evaluate()
    assert (report.firing, report.alertmanager_posted, report.notified) == (1, 1, 1)
    raw = httpx.get(f"{alertmanager}/api/v2/alerts", timeout=5).json()
    [alert] = [a for a in raw if a["status"]["state"] == "active"]
    assert alert["labels"] == {
        "alertname": "CompressionLostCitedEvidence", "rule": "cited", "platform": "own",
        "agent": "agent-a", "thread_id": "t1", "severity": "critical",
    }  # fmt: skip
    assert alert["annotations"]["cited_lost"] == "2" and "pressure" not in alert["annotations"]
    [event] = webhook_receiver.events()
    assert (event["kind"], event["alertname"], event["rule_kind"], event["pressure"]) == (
        "firing",
        "CompressionLostCitedEvidence",
        KIND,
        2.0,
    )
    put_record("t1", start + timedelta(minutes=1), lost(0))
    report = evaluate()
    assert (report.resolved, report.notified) == (1, 1)
    assert [e["kind"] for e in webhook_receiver.events()] == ["firing", "resolved"]
    active = httpx.get(f"{alertmanager}/api/v2/alerts", params={"active": "true"}, timeout=5)
    assert [a for a in active.json() if a["status"]["state"] == "active"] == []
