"""`yuxi-dash alerts` with the rule kind `forecast_crossing`: a horizon in minutes, said as
minutes, and a thread forecast to reach 100% within it listed, minutes from now (SQLite)."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest

from tests.store.forecast_builders import grow
from yuxi_dash.alerts import forecast_crossing
from yuxi_dash.cli import main
from yuxi_dash.settings import get_settings
from yuxi_dash.store.models import utcnow


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_a_forecast_rule_from_the_command_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("YUXI_DASH_CLI_ROLE", "admin")
    get_settings.cache_clear()
    add = ["alerts", "rule", "add", "--name", "soon", "--kind", "forecast_crossing"]
    assert main([*add, "--fire-at", "30", "--all-threads"]) == 0
    said = capsys.readouterr().out
    assert "added rule soon (forecast_crossing): fires at 30 min, clears beyond 30 min" in said
    code, data = run(capsys, "alerts", "rule", "list")
    assert [(r["kind"], r["fire_at"], r["clear_at"]) for r in data] == [
        ("forecast_crossing", 30, 30)
    ]
    code, data = run(capsys, *add[:4], "late", "--kind", "forecast_crossing", "--clear-at", "5")
    assert (code, data["error"]["code"]) == (2, "invalid_input")  # resolves before it fires
    code, data = run(capsys, "alerts", "rule", "update", "--name", "soon", "--fire-at", "120")
    assert (code, data["fire_at"], data["clear_at"]) == (0, 120, 120)  # clear_at moved along
    assert run(capsys, "alerts", "rule", "update", "--name", "soon", "--fire-at", "60")[0] == 0

    grow("t1", 5000, 5500, 6000, last_at=utcnow() - timedelta(minutes=1))  # 4 min to 100%
    grow("t2", 1000, 1100, 1200, last_at=utcnow() - timedelta(minutes=1))  # 69 min
    code, data = run(capsys, "alerts", "evaluate")
    assert (code, data["firing"], data["capped_rules"]) == (0, 1, 0)
    code, data = run(capsys, "alerts", "list")
    assert [(a["thread_id"], a["kind"]) for a in data] == [("t1", "forecast_crossing")]
    assert 3.8 < data[0]["pressure"] <= 4  # minutes from now: less the moments since
    assert main(["alerts", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"firing +soon +t1 +agent-a +own +(4|3\.\d+) min +\d+ *", lines[-1])


def test_evaluate_says_which_forecast_rules_were_capped(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("YUXI_DASH_CLI_ROLE", "admin")
    monkeypatch.setattr(forecast_crossing, "CANDIDATES_MAX", 1)
    get_settings.cache_clear()
    assert main(["alerts", "rule", "add", "--name", "soon", "--kind", "forecast_crossing"]) == 0
    grow("t1", 5000, 5500, 6000, last_at=utcnow() - timedelta(minutes=1))
    grow("t2", 6000, 6400, 6800, last_at=utcnow() - timedelta(minutes=1))
    capsys.readouterr()
    assert main(["alerts", "evaluate"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("firing 1, pending 0, resolved 0, notified 0 (fired 1,")
    assert (
        lines[1]
        == "1 forecast rule read only the 1 most pressured threads active within the horizon"
    )
