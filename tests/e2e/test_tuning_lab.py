"""In a real browser: the Tuning lab replays a fleet our engine ran, slice by slice, to its result.

The fleet is made in this process by really running our engine (`tests.tuning.fleet_builders`), then
`streamlit run app.py` serves the same database and workdir. Chromium sets a proposal, runs
it, and sees the two sides, a thread's chart and the fields to copy; the run is one audit row.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.live_server import (
    REPO,
    dashboard_env,
    free_port,
    launch_chromium,
    serving,
    streamlit_command,
)
from tests.tuning.fleet_builders import AGENT, simulated_fleet
from yuxi_dash.store.db import forget_engines, session_scope
from yuxi_dash.store.queries import list_audit
from yuxi_dash.tuning.fleet import ACTION

pytestmark = [pytest.mark.browser]

ARTIFACTS = REPO / "test-artifacts"
WAIT_MS = 90_000


def test_a_proposal_runs_to_its_result_in_the_browser(tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    simulated_fleet(threads=4, turns=6)
    forget_engines()  # the served process is the only writer from here
    env = dashboard_env(tmp_path, YUXI_DASH_AUTH_MODE="local")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [*streamlit_command(), "--server.address", "127.0.0.1", "--server.port", str(port)]
    with serving(command, cwd=tmp_path, env=env), sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1400})
            page.goto(f"{url}/tuning_lab")
            expect(page.get_by_role("heading", name="Tuning lab")).to_be_visible(timeout=WAIT_MS)
            threshold = page.get_by_label("Summary threshold (K tokens, x 1024)")
            expect(threshold).to_have_value("8", timeout=WAIT_MS)  # the agent's, in force
            threshold.fill("5")
            page.get_by_role("button", name="Run", exact=True).click()
            expect(page.get_by_role("heading", name="Configuration fields to copy")).to_be_visible(
                timeout=WAIT_MS
            )
            code = page.get_by_test_id("stCode")
            expect(code).to_contain_text(
                "summary_threshold = 5  # K tokens (x 1024 = 5,120 tokens)"
            )
            expect(page.get_by_text(f"agent {AGENT}: replayed 4 of 4 threads")).to_be_visible()
            expect(page.get_by_test_id("stVegaLiteChart")).to_have_count(1)
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "tuning_lab.png"), full_page=True)
        finally:
            browser.close()
    with session_scope() as session:
        rows = list_audit(session, action=ACTION)
    assert [row.outcome for row in rows] == ["completed"]
