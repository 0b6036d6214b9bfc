"""deploy/: the Prometheus scrape config and rules and the Alertmanager route pass their own checkers."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"


@pytest.mark.parametrize(
    "command",
    [
        ["promtool", "check", "config", str(DEPLOY / "prometheus" / "prometheus.yml")],
        ["promtool", "check", "rules", str(DEPLOY / "prometheus" / "yuxi-dash-rules.yml")],
        ["amtool", "check-config", str(DEPLOY / "alertmanager" / "alertmanager.yml")],
    ],
)
def test_monitoring_configs_are_valid(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_alertmanager_groups_thread_alerts_by_platform() -> None:
    text = (DEPLOY / "alertmanager" / "alertmanager.yml").read_text()
    assert "group_by: [alertname, platform]" in text
