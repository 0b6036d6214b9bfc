"""The alert state machine (yuxi_dash.alerts.machine), as a pure function."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from yuxi_dash.alerts.machine import CANCELLED, FIRING, PENDING, RESOLVED, Seen, decide

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def seen(state: str | None, pressure: float | None, **kw: object) -> Seen:
    base = {
        "state": state,
        "pending_since": kw.pop("pending_since", None),
        "pressure": pressure,
        "in_scope": kw.pop("in_scope", True),
        "fire_at": 0.85,
        "clear_at": 0.80,
        "for_seconds": kw.pop("for_seconds", 0),
    }
    return Seen(**base)  # type: ignore[arg-type]


def test_fires_at_fire_at_not_below() -> None:
    assert decide(seen(None, 0.85), NOW) == FIRING
    assert decide(seen(None, 0.8499), NOW) is None


def test_hysteresis_resolves_only_below_clear_at() -> None:
    assert decide(seen(FIRING, 0.82), NOW) is None
    assert decide(seen(FIRING, 0.80), NOW) is None
    assert decide(seen(FIRING, 0.7999), NOW) == RESOLVED


def test_for_seconds_pending_then_firing_and_a_drop_cancels() -> None:
    assert decide(seen(None, 0.9, for_seconds=60), NOW) == PENDING
    early = NOW - timedelta(seconds=30)
    late = NOW - timedelta(seconds=60)
    assert decide(seen(PENDING, 0.9, for_seconds=60, pending_since=early), NOW) is None
    assert decide(seen(PENDING, 0.9, for_seconds=60, pending_since=late), NOW) == FIRING
    assert decide(seen(PENDING, 0.84, for_seconds=60, pending_since=late), NOW) == CANCELLED


def test_gone_thread_or_rule_resolves() -> None:
    assert decide(seen(FIRING, None), NOW) == RESOLVED
    assert decide(seen(FIRING, 0.99, in_scope=False), NOW) == RESOLVED
    assert decide(seen(RESOLVED, 0.9), NOW) == FIRING  # a new episode
