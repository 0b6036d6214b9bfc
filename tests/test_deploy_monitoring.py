"""deploy/: the Prometheus scrape config and rules and the Alertmanager route pass their own checkers."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"


@pytest.mark.parametrize(
    "command",
    [
        ["promtool", "check", "config", "{prom}/prometheus.yml"],
        ["promtool", "check", "rules", "{prom}/yuxi-dash-rules.yml"],
        ["amtool", "check-config", str(DEPLOY / "alertmanager" / "alertmanager.yml")],
    ],
)
def test_monitoring_configs_are_valid(command: list[str], tmp_path: Path) -> None:
    prom = tmp_path / "prometheus"  # a copy, with the scrape token file promtool wants to see
    shutil.copytree(DEPLOY / "prometheus", prom)
    (prom / "yuxi-dash-token").write_text("yxd_example")
    argv = [part.format(prom=prom) for part in command]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_scrape_sends_a_bearer_token_to_the_api_port() -> None:
    text = (DEPLOY / "prometheus" / "prometheus.yml").read_text()
    assert "type: Bearer" in text and "credentials_file: yuxi-dash-token" in text
    assert '"yuxi-dash-api:8600"' in text  # `yuxi-dash api serve`'s default port


def test_alertmanager_groups_thread_alerts_by_platform() -> None:
    text = (DEPLOY / "alertmanager" / "alertmanager.yml").read_text()
    assert "group_by: [alertname, platform]" in text
