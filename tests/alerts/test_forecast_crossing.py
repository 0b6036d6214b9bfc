"""The alert rule kind `forecast_crossing`: a thread forecast to reach 100% of its summary
threshold within the rule's horizon (minutes), through the same state machine, audit, outbox
and Alertmanager labels; a real compress resolves it.

Growth is written as projection writes usage (`tests.store.forecast_builders.grow`), ending a
minute before now, so each figure below is exact: `compression.forecast` in whole turns, a
minute apart, counted from now (the minute since the last call taken off). The Alerts list reads
the live minutes a moment later: `states` rounds them to whole minutes.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest

from tests.alerts.builders import ADMIN, OPERATOR, SECRET, add_rule, alert_audit
from tests.fixtures.monitoring import WebhookReceiver
from tests.service.builders import seed_thread
from tests.store.forecast_builders import grow
from yuxi_dash import sources
from yuxi_dash.alerts import rules
from yuxi_dash.alerts.evaluate import evaluate
from yuxi_dash.alerts.forecast_crossing import minutes_to_threshold
from yuxi_dash.alerts.machine import FIRING, RESOLVED, Seen, decide
from yuxi_dash.alerts.views import current_alerts
from yuxi_dash.errors import InvalidInput
from yuxi_dash.settings import get_settings
from yuxi_dash.store.models import utcnow

KIND = "forecast_crossing"


def states() -> dict[tuple[str, str], tuple[str, str, float]]:
    return {
        (a.rule, a.thread_id): (
            a.state,
            a.kind,
            round(a.pressure) if a.kind == KIND else a.pressure,
        )
        for a in current_alerts()
    }


def threads_with_known_growth() -> datetime:
    """t1 (a real thread: compressible) 4 min from 100% (5 from its last call); "later" 69
    min; "over" at 100% already; "young" too little history; "idle" 5 turns, but its last call
    2 h ago. Returns now."""
    now = utcnow()
    last = now - timedelta(minutes=1)
    seed_thread("t1")
    grow("t1", 5000, 5500, 6000, last_at=last)  # 500 a turn: 2,192 short of 8,192 is 5 turns
    grow("later", 1000, 1100, 1200, last_at=last)  # 100 a turn: 6,992 short is 70 turns
    grow("over", 7000, 8000, 9000, last_at=last)
    grow("young", 7000, 7500, last_at=last)
    grow("idle", 5000, 5500, 6000, last_at=now - timedelta(hours=2))
    return now


def test_fires_within_the_horizon_not_beyond_and_a_compress_resolves_it(db_url: str) -> None:
    now = threads_with_known_growth()
    add_rule("soon", kind=KIND)  # the default horizon: 60 minutes
    add_rule("wide", kind=KIND, fire_at=90)
    add_rule("hot")  # a pressure rule beside them: each reads its own measure
    report = evaluate(now=now)
    assert report.fired == 7
    assert states() == {
        ("soon", "t1"): ("firing", KIND, 4),
        ("soon", "over"): ("firing", KIND, 0),  # at or over 100%: crossing now
        ("wide", "t1"): ("firing", KIND, 4),
        ("wide", "over"): ("firing", KIND, 0),
        ("wide", "later"): ("firing", KIND, 69),  # beyond 60 minutes, within 90
        ("hot", "over"): ("firing", "pressure", 1.0986),  # 9,000 of 8,192
        ("hot", "young"): ("firing", "pressure", 0.9155),  # 7,500 of 8,192
    }  # not "young" (too little history) nor "idle" (no call within the horizon)
    assert evaluate(now=now).fired == 0  # nothing changed: no transition

    # a real compress: its hook evaluates t1, whose growth starts again (no forecast)
    assert sources.compress_thread_context("t1", actor=OPERATOR).status == "completed"
    assert ("soon", "t1") not in states() and ("wide", "t1") not in states()
    assert alert_audit().count(("thread:t1", "resolved")) == 2

    # "later" slows: 210 in 3 turns over 3 minutes is 100 turns, 100 minutes: beyond 90
    grow("later", 1210, last_at=now)
    assert evaluate(thread_id="later").resolved == 1
    assert set(states()) == {("soon", "over"), ("wide", "over"), ("hot", "over"), ("hot", "young")}


def test_clear_at_holds_a_firing_alert_until_the_forecast_is_beyond_it(db_url: str) -> None:
    now = threads_with_known_growth()
    add_rule("hold", kind=KIND, fire_at=70, clear_at=120)
    evaluate(now=now)
    assert states()[("hold", "later")] == ("firing", KIND, 69)
    grow("later", 1210, last_at=now)  # now 100 minutes: beyond fire_at, within clear_at
    assert evaluate(thread_id="later").resolved == 0
    assert states()[("hold", "later")] == ("firing", KIND, 100)
    rules.delete_rule(ADMIN, "hold")
    assert evaluate().resolved == 3  # later, t1, over
    assert states() == {}


def test_the_machine_fires_at_or_below_and_resolves_only_beyond_a_falling_measure() -> None:
    now = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)

    def seen(state: str | None, minutes: float | None) -> Seen:
        return Seen(state, None, minutes, True, 60.0, 90.0, 0, falling=True)

    assert decide(seen(None, 60.0), now) == FIRING
    assert decide(seen(None, 60.01), now) is None
    assert decide(seen(FIRING, 90.0), now) is None  # within clear_at: still firing
    assert decide(seen(FIRING, 90.01), now) == RESOLVED
    assert decide(seen(FIRING, None), now) == RESOLVED  # no forecast any more: compressed


def test_minutes_from_a_forecast() -> None:
    assert minutes_to_threshold({"turns_to_100": 5, "seconds_to_100": 300}) == 5.0
    assert minutes_to_threshold({"turns_to_100": 0, "seconds_to_100": 0}) == 0.0
    assert minutes_to_threshold({"turns_to_100": 3, "seconds_to_100": None}) is None  # no time
    assert minutes_to_threshold({"turns_to_100": None, "seconds_to_100": None}) is None
    assert minutes_to_threshold({"turns_to_100": 5, "seconds_to_100": 0}) == 0.0  # due: idle


def test_rule_horizons_are_checked(db_url: str) -> None:
    info = rules.add_rule(ADMIN, name="soon", kind=KIND)
    assert (info.kind, info.fire_at, info.clear_at) == (KIND, 60, 60)
    wide = rules.add_rule(ADMIN, name="wide", kind=KIND, fire_at=240)
    assert (wide.fire_at, wide.clear_at) == (240, 240)  # resolves beyond its own horizon
    with pytest.raises(InvalidInput, match="not be below fire_at"):
        rules.add_rule(ADMIN, name="odd", kind=KIND, fire_at=60, clear_at=30)
    with pytest.raises(InvalidInput, match="fire_at"):
        rules.add_rule(ADMIN, name="odd", kind=KIND, fire_at=1441)
    with pytest.raises(InvalidInput, match="fire_at"):  # a pressure ratio keeps its bound
        rules.add_rule(ADMIN, name="odd", fire_at=101, clear_at=0.8)
    with pytest.raises(InvalidInput, match="kind cannot change"):
        rules.update_rule(ADMIN, "soon", kind="pressure")
    # clear_at equal to fire_at moves with it (a wider one is kept, and must stay wider)
    moved = rules.update_rule(ADMIN, "soon", fire_at=120)
    assert (moved.fire_at, moved.clear_at) == (120, 120)
    assert rules.update_rule(ADMIN, "soon", fire_at=30).clear_at == 30
    rules.add_rule(ADMIN, name="held", kind=KIND, fire_at=60, clear_at=90)
    assert rules.update_rule(ADMIN, "held", fire_at=30).clear_at == 90
    with pytest.raises(InvalidInput, match="not be below fire_at"):
        rules.update_rule(ADMIN, "held", fire_at=120)


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
    seed_thread("t1")
    grow("t1", 5000, 5500, 6000, last_at=utcnow() - timedelta(minutes=1))
    add_rule("soon", kind=KIND, severity="critical")
    report = evaluate()
    assert (report.firing, report.alertmanager_posted, report.notified) == (1, 1, 1)
    raw = httpx.get(f"{alertmanager}/api/v2/alerts", timeout=5).json()
    [alert] = [a for a in raw if a["status"]["state"] == "active"]
    assert alert["labels"] == {
        "alertname": "ThreadForecastCrossing", "rule": "soon", "platform": "own",
        "agent": "agent-a", "thread_id": "t1", "severity": "critical",
    }  # fmt: skip
    annotations = alert["annotations"]
    assert "pressure" not in annotations  # minutes from now: 4, less the moments since
    assert 3.5 < float(annotations["minutes_to_threshold"]) <= 4
    assert (annotations["threshold"], annotations["clear_at"]) == ("60", "60")  # minutes, :g
    [event] = webhook_receiver.events()
    assert (event["kind"], event["alertname"], event["rule_kind"], event["measure"]) == (
        "firing",
        "ThreadForecastCrossing",
        KIND,
        "minutes_to_threshold",
    )
    assert 3.5 < event["pressure"] <= 4 and (event["fire_at"], event["clear_at"]) == (60, 60)
    assert sources.compress_thread_context("t1", actor=OPERATOR).status == "completed"
    report = evaluate()  # the hook resolved it; this pass sends the resolved notice
    assert (report.resolved, report.notified) == (0, 1)
    assert [e["kind"] for e in webhook_receiver.events()] == ["firing", "resolved"]
    active = httpx.get(f"{alertmanager}/api/v2/alerts", params={"active": "true"}, timeout=5)
    assert [a for a in active.json() if a["status"]["state"] == "active"] == []
