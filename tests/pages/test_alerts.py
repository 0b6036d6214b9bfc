"""app_pages/alerts.py on the demo: alerts with pressure, Compress from the page, history, rules.

A rule leaves out, by default, the threads nobody can compress; a rule over every thread
lists them, and the page says why in place of the button (never an estimate).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta

import pytest
from streamlit.testing.v1 import AppTest

from tests.alerts.builders import ADMIN
from tests.store.forecast_builders import grow
from yuxi_dash.alerts import forecast_crossing, rules, views
from yuxi_dash.alerts.evaluate import evaluate
from yuxi_dash.alerts.views import current_alerts
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AlertChannel, utcnow
from yuxi_dash.store.queries import get_thread, list_threads
from yuxi_dash.store.thread_list import ThreadSummary

PAGE = "app_pages/alerts.py"


def _hot(settings: Settings) -> list[ThreadSummary]:
    with session_scope(settings) as session:
        return list_threads(session, min_pressure=0.85, limit=100_000)


def _firing(settings: Settings) -> list[str]:
    """The threads a default rule fires on: at or above 85%, their agent can compress."""
    return sorted(t.thread_id for t in _hot(settings) if t.capable)


def test_alerts_listed_then_compressed_from_the_page(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    rules.add_rule(ADMIN, name="hot")
    evaluate()
    at = app_test(PAGE)
    assert not at.exception
    table = at.dataframe[0].value
    assert sorted(table["thread"]) == _firing(demo_env)
    assert set(table["state"]) == {"firing"}
    assert all(p >= 85.0 for p in table["pressure"])
    assert table["open"].iloc[0].startswith("thread_detail?thread=")

    with session_scope(demo_env) as session:
        hot = list_threads(session, min_pressure=0.85, limit=100_000)
    target = next(t.thread_id for t in hot if t.capable and t.busy_reason is None)
    at.selectbox(key="alerts_compress_thread").set_value(target).run()
    at.button(key="alerts_compress").click().run()
    at.button(key="confirm_compress").click().run()
    assert not at.exception
    with session_scope(demo_env) as session:
        after = get_thread(session, target).summary.summary_pressure_ratio
    assert after < 0.80  # the compress dropped it below clear_at: the hook resolved the alert
    assert target not in [a.thread_id for a in current_alerts()]
    assert target not in at.dataframe[0].value["thread"].tolist()
    history = at.dataframe[1].value
    assert "resolved" in history[history["thread"] == target]["became"].tolist()


def test_admin_adds_a_rule_from_the_form(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    at = app_test(PAGE)
    at.text_input(key="rule_name").set_value("page-rule")
    at.number_input(key="rule_for").set_value(60)
    next(b for b in at.button if b.label == "Save rule").click().run()
    assert not at.exception
    assert [r.name for r in rules.list_rules()] == ["page-rule"]
    assert rules.list_rules()[0].for_seconds == 60
    at.run()  # the next run lists the new rule for deletion
    at.selectbox(key="rule_delete").set_value("page-rule")
    at.button(key="rule_delete_button").click().run()
    assert not at.exception
    assert rules.list_rules() == []


def test_admin_adds_a_cited_evidence_rule_from_the_form(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    """Issue 39: the alert kind for a compression that loses cited evidence, from the page."""
    at = app_test(PAGE)
    at.text_input(key="rule_name").set_value("cited-rule")
    at.selectbox(key="rule_kind").set_value("cited_evidence_lost")
    next(b for b in at.button if b.label == "Save rule").click().run()
    assert not at.exception
    (rule,) = rules.list_rules()
    assert (rule.name, rule.kind, rule.fire_at, rule.clear_at) == (
        "cited-rule",
        "cited_evidence_lost",
        1,
        1,
    )
    at.run()
    listed = at.dataframe[-1].value
    assert listed[listed["rule"] == "cited-rule"]["fire at"].tolist() == ["1 cited lost"]


def test_admin_adds_a_forecast_crossing_rule_from_the_form(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    """Issue 40: the alert kind for a thread forecast to reach 100% within a horizon."""
    at = app_test(PAGE)
    at.text_input(key="rule_name").set_value("soon")
    at.selectbox(key="rule_kind").set_value("forecast_crossing")
    at.number_input(key="rule_horizon").set_value(30)
    next(b for b in at.button if b.label == "Save rule").click().run()
    assert not at.exception
    (rule,) = rules.list_rules()
    assert (rule.kind, rule.fire_at, rule.clear_at) == ("forecast_crossing", 30, 30)
    at.run()
    listed = at.dataframe[-1].value
    assert listed[listed["rule"] == "soon"]["fire at"].tolist() == ["30 min"]
    assert listed[listed["rule"] == "soon"]["clears"].tolist() == ["beyond 30 min"]
    # saved again with the horizon left empty: the rule keeps its own
    at.number_input(key="rule_horizon").set_value(None)
    at.selectbox(key="rule_severity").set_value("critical")
    next(b for b in at.button if b.label == "Save rule").click().run()
    assert not at.exception
    (rule,) = rules.list_rules()
    assert (rule.fire_at, rule.clear_at, rule.severity) == (30, 30, "critical")


def test_forecast_alerts_say_minutes_in_the_picker_and_the_history(
    app_test: Callable[..., AppTest], demo_env: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    grow("fc-soon", 5000, 5500, 6000, last_at=utcnow() - timedelta(minutes=1))  # 4 min
    grow("fc-next", 6000, 6400, 6800, last_at=utcnow() - timedelta(minutes=1))  # 3 min
    rules.add_rule(ADMIN, name="soon", kind="forecast_crossing", agent="agent-a")
    evaluate()
    at = app_test(PAGE)
    assert not at.exception
    picker = at.selectbox(key="alerts_compress_thread")
    next_, soon = picker.options  # the fewest minutes first; minutes, not a percent
    assert re.fullmatch(r"fc-next · (3|2\.\d+) min", next_), next_
    assert re.fullmatch(r"fc-soon · (4|3\.\d+) min", soon), soon
    history = at.dataframe[1].value
    assert "measure" in history.columns and "pressure" not in history.columns
    assert all(re.fullmatch(r"(4|3|[23]\.\d+) min", m) for m in history["measure"])
    assert not [c for c in at.caption if c.value.startswith("Forecast rules at the cap")]

    monkeypatch.setattr(forecast_crossing, "CANDIDATES_MAX", 1)
    monkeypatch.setattr(views, "CANDIDATES_MAX", 1)
    at.run()
    (said,) = [c.value for c in at.caption if c.value.startswith("Forecast rules at the cap")]
    assert said.endswith("only the 1 most pressured are read): soon.")


def test_a_viewer_sees_alerts_but_no_rule_form_and_cannot_compress(
    app_test: Callable[..., AppTest], demo_env: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules.add_rule(ADMIN, name="hot")
    evaluate()
    monkeypatch.setenv("YUXI_DASH_VIEWERS", "operator@localhost")
    get_settings.cache_clear()
    with session_scope(demo_env) as session:  # the webhook paused after failures
        session.add(AlertChannel(channel="webhook", consecutive_failures=5, failures_total=5,
                                 sent_total=0, paused_at=utcnow(), last_error="HTTP 500"))  # fmt: skip
    at = app_test(PAGE)
    assert not at.exception
    assert any("webhook channel is paused" in w.value for w in at.warning)
    assert len(at.dataframe[0].value) == len(_firing(demo_env))
    assert at.button(key="alerts_compress").disabled
    assert not any(b.label == "Save rule" for b in at.button)


def test_threads_nobody_can_compress_are_left_out_or_say_why(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    hot = _hot(demo_env)
    stuck = sorted(t.thread_id for t in hot if not t.capable)
    assert stuck, "the demo has hot threads whose agent cannot compress"
    rules.add_rule(ADMIN, name="act")  # compressible_only by default
    rules.add_rule(ADMIN, name="every", compressible_only=False)
    assert [(r.name, r.compressible_only) for r in rules.list_rules()] == [
        ("act", True), ("every", False),
    ]  # fmt: skip
    evaluate()
    alerts = current_alerts()
    assert sorted(a.thread_id for a in alerts if a.rule == "act") == _firing(demo_env)
    assert set(stuck) <= {a.thread_id for a in alerts if a.rule == "every"}
    assert {a.compress_blocker for a in alerts if a.thread_id in stuck} != {None}

    at = app_test(PAGE)
    assert not at.exception
    picker = at.selectbox(key="alerts_compress_thread")
    assert picker.value not in stuck  # never picked first
    assert not at.button(key="alerts_compress").disabled
    marked = [o for o in picker.options if o.endswith("cannot be compressed")]
    assert sorted(o.split(" · ")[0] for o in marked) == stuck

    picker.set_value(stuck[0]).run()
    assert not at.exception
    button = at.button(key="alerts_compress")
    assert button.disabled and "does not support context compression" in button.help
    (said,) = [c.value for c in at.caption if c.value.startswith("Cannot compress")]
    assert stuck[0] in said and "does not support context compression" in said
    assert "est." not in said
