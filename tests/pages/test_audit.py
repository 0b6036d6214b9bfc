"""app_pages/audit.py: admins read and export the log; anyone else is refused."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from streamlit.testing.v1 import AppTest

from yuxi_dash.access.audit import record_audit
from yuxi_dash.settings import Settings, get_settings

PAGE = "app_pages/audit.py"


def test_admin_sees_filters_and_exports_the_log(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    record_audit(
        actor="kim@example.com", action="compress", target="thread:t-1", outcome="completed"
    )
    record_audit(actor="lee@example.com", action="compress", target="thread:t-2", outcome="refused")
    at = app_test(PAGE)
    assert not at.exception
    rows = at.dataframe[0].value
    assert {"kim@example.com", "lee@example.com"} <= set(rows["actor"])
    # the column has the name of its filter
    assert json.loads(at.dataframe[0].proto.columns)["actor"]["label"] == "Actor"
    assert at.text_input[0].label == "Actor"
    at.text_input[0].set_value("kim@example.com").run()  # the Actor filter
    rows = at.dataframe[0].value
    assert set(rows["actor"]) == {"kim@example.com"}
    assert at.get("download_button")


def test_an_operator_cannot_open_the_audit_log(
    demo_env: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("YUXI_DASH_OPERATORS", "operator@localhost")
    get_settings.cache_clear()
    at = AppTest.from_file("../../app_pages/audit.py", default_timeout=60).run()
    assert not at.exception
    assert len(at.error) == 1 and "admin role" in at.error[0].value
    assert not at.dataframe


def test_detail_reads_as_key_value_and_an_action_can_be_hidden(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    record_audit(
        actor="kim@example.com",
        action="compress",
        target="thread:t-1",
        outcome="completed",
        detail={"tokens": {"before": 12474, "after": 2097}, "request_id": "r-1"},
    )
    for n in range(3):
        record_audit(
            actor="kim@example.com", action="view_memory", target=f"user:u{n}", outcome="ok"
        )
    at = app_test(PAGE)
    assert not at.exception
    rows = at.dataframe[0].value
    [detail] = list(rows[rows["target"] == "thread:t-1"]["detail"])
    assert detail == "tokens.before: 12474 · tokens.after: 2097 · request_id: r-1"
    assert "view_memory" in set(rows["action"])
    at.multiselect(key="audit_hidden_actions").select("view_memory").run()
    assert not at.exception
    rows = at.dataframe[0].value
    assert "view_memory" not in set(rows["action"]) and "compress" in set(rows["action"])


def test_detail_values_read_as_recorded_and_moments_in_one_format(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    """Issue 37 items 9 and 10: 0.7823 / 0.85 / 0.80 are not rounded to 0.8; a moment in a
    detail reads as every moment on these pages does."""
    record_audit(
        actor="kim@example.com",
        action="alert",
        target="thread:t-9",
        outcome="firing",
        detail={
            "pressure": 0.7823,
            "fire_at": 0.85,
            "clear_at": 0.80,
            "since": "2026-12-06T14:03:07.123456+00:00",
        },
    )
    at = app_test(PAGE)
    assert not at.exception
    rows = at.dataframe[0].value
    [detail] = list(rows[rows["target"] == "thread:t-9"]["detail"])
    assert detail == (
        "pressure: 0.7823 · fire_at: 0.85 · clear_at: 0.8 · since: 2026-12-06 14:03:07 UTC"
    )
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", v) for v in rows["at"])
