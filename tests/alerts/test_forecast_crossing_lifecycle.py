"""A ``forecast_crossing`` alert over time: an idle thread never starts firing and a firing one
ends on its own once idle past the rule's gate; a narrowed horizon, a disabled rule and a
deleted thread resolve it; forecasts sort with the other kinds by urgency; a rule that reads
only its most pressured threads is counted and said.

Growth is written as projection writes usage (`tests.store.forecast_builders.grow`); each pass
gets its own ``now``, so the figures are exact.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.alerts.builders import ADMIN, add_rule
from tests.store.forecast_builders import grow
from yuxi_dash.alerts import forecast_crossing, rules, views
from yuxi_dash.alerts.evaluate import evaluate
from yuxi_dash.alerts.views import current_alerts, urgency
from yuxi_dash.service.threads import set_thread_status
from yuxi_dash.store.models import utcnow

KIND = "forecast_crossing"


def states() -> dict[tuple[str, str], str]:
    return {(a.rule, a.thread_id): a.state for a in current_alerts()}


def test_a_pending_alert_of_a_thread_gone_idle_is_cancelled_never_fired(db_url: str) -> None:
    now = utcnow()
    grow("t", 5000, 5500, 6000, last_at=now - timedelta(minutes=1))  # 4 min from now
    add_rule("pend", kind=KIND, for_seconds=300)
    assert evaluate(now=now, deliver=False).started_pending == 1
    later = evaluate(now=now + timedelta(days=3), deliver=False)  # idle since: no forecast
    assert (later.fired, later.cancelled) == (0, 1)
    assert states() == {}


def test_a_firing_alert_ends_once_the_thread_is_idle_past_the_gate(db_url: str) -> None:
    now = utcnow()
    grow("t", 5000, 5500, 6000, last_at=now - timedelta(minutes=1))
    add_rule("soon", kind=KIND)  # horizon 60: the gate
    assert evaluate(now=now, deliver=False).fired == 1
    held = evaluate(now=now + timedelta(minutes=30), deliver=False)  # due by now: still firing
    assert (held.fired, held.resolved, held.firing) == (0, 0, 1)
    gone = evaluate(now=now + timedelta(minutes=62), deliver=False)  # measured 63 min ago
    assert (gone.resolved, gone.firing) == (1, 0)


def test_disabling_and_enabling_a_rule_does_not_fire_an_idle_thread(db_url: str) -> None:
    now = utcnow()
    grow("t", 5000, 5500, 6000, last_at=now - timedelta(minutes=1))
    grow("idle", 5000, 5500, 6000, last_at=now - timedelta(hours=2))
    add_rule("soon", kind=KIND)
    assert evaluate(now=now, deliver=False).fired == 1  # t; "idle" is no candidate
    rules.update_rule(ADMIN, "soon", enabled=False)
    assert evaluate(now=now + timedelta(minutes=5), deliver=False).resolved == 1
    rules.update_rule(ADMIN, "soon", enabled=True)
    again = evaluate(now=now + timedelta(hours=2), deliver=False)  # both idle now
    assert (again.fired, again.started_pending, again.firing) == (0, 0, 0)
    assert states() == {}


def test_a_narrowed_horizon_or_a_deleted_thread_resolves_it(db_url: str) -> None:
    now = utcnow()
    grow("later", 1000, 1100, 1200, last_at=now - timedelta(minutes=1))  # 69 min from now
    grow("t", 5000, 5500, 6000, last_at=now - timedelta(minutes=1))  # 4 min
    add_rule("wide", kind=KIND, fire_at=90)
    assert evaluate(now=now, deliver=False).fired == 2
    rules.update_rule(ADMIN, "wide", fire_at=30)  # clear_at moves along: 69 is beyond it
    narrowed = evaluate(now=now, deliver=False)
    assert (narrowed.resolved, narrowed.firing) == (1, 1)
    assert states() == {("wide", "t"): "firing"}
    set_thread_status("t", "deleted")
    assert evaluate(now=now, deliver=False).resolved == 1
    assert states() == {}


def test_forecasts_sort_by_kind_then_fewest_minutes(db_url: str) -> None:
    now = utcnow()
    last = now - timedelta(minutes=1)
    grow("t", 5000, 5500, 6000, last_at=last)  # 4 min, 73% pressure
    grow("over", 7000, 8000, 9000, last_at=last)  # 0 min, 110%
    grow("later", 1000, 1100, 1200, last_at=last)  # 69 min
    add_rule("wide", kind=KIND, fire_at=90)
    add_rule("hot", fire_at=0.5, clear_at=0.4)
    evaluate(now=now, deliver=False)
    assert [(a.rule, a.thread_id) for a in current_alerts()] == [
        ("hot", "over"),  # pressure first: the highest
        ("hot", "t"),
        ("wide", "over"),  # then forecasts: the fewest minutes first
        ("wide", "t"),
        ("wide", "later"),
    ]
    keys = [
        urgency("firing", "cited_evidence_lost", 3, "c"),
        urgency("firing", KIND, 70.0, "f"),
        urgency("pending", "pressure", 2.0, "p"),
        urgency("firing", KIND, 5.0, "g"),
        urgency("firing", "pressure", 0.9, "q"),
    ]
    assert [key[-1] for key in sorted(keys)] == ["q", "g", "f", "c", "p"]


def test_a_rule_at_the_candidate_cap_is_counted(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(forecast_crossing, "CANDIDATES_MAX", 1)
    monkeypatch.setattr(views, "CANDIDATES_MAX", 1)
    now = utcnow()
    grow("t", 5000, 5500, 6000, last_at=now - timedelta(minutes=1))  # 73%
    grow("over", 7000, 8000, 9000, last_at=now - timedelta(minutes=1))  # the most pressured
    add_rule("soon", kind=KIND)
    add_rule("also", kind=KIND)  # the same horizon and scope: read once
    add_rule("short", kind=KIND, fire_at=2)  # "t" is not within 2 minutes anyway
    report = evaluate(now=now, deliver=False)
    assert report.capped_rules == 3
    assert set(states()) == {("soon", "over"), ("also", "over"), ("short", "over")}
    assert views.capped_forecast_rules() == ["also", "short", "soon"]
    rules.update_rule(ADMIN, "short", enabled=False)
    monkeypatch.setattr(views, "CANDIDATES_MAX", 2)
    assert views.capped_forecast_rules() == []
