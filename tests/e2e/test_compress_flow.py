"""End to end in a real browser: `yuxi-dash serve --demo` on a fresh database, compress one thread.

Starts the real command as a subprocess on a free port (its own process group,
always killed), waits for Streamlit's "You can now view" line, then drives
Debian's headless Chromium with Playwright: open the threads page, open the
compress dialog, confirm, and see the one-line outcome. The screenshot lands
in test-artifacts/.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.live_server import REPO, dashboard_env, launch_chromium, serve_dashboard

pytestmark = pytest.mark.browser

ARTIFACTS = REPO / "test-artifacts"
STARTUP_DEADLINE_SECONDS = 240


@pytest.fixture
def served_demo(tmp_path: Path) -> Iterator[str]:
    """URL of `yuxi-dash serve --demo` running on a fresh temp database."""
    env = dashboard_env(tmp_path, YUXI_DASH_AUTH_MODE="local")
    try:
        with serve_dashboard(
            tmp_path, env, "--demo", startup_seconds=STARTUP_DEADLINE_SECONDS
        ) as url:
            yield url
    finally:
        # the demo's memory seeding started an embedded FalkorDB server of its own (own session)
        from yuxi_dash.memory.server import stop_server
        from yuxi_dash.settings import Settings

        stop_server(Settings(falkordb_data_dir=tmp_path / "falkordb"))


def test_operator_compresses_a_thread_in_the_browser(served_demo: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            page.goto(f"{served_demo}/threads")
            expect(page.get_by_role("heading", name="Threads ≥ 85%")).to_be_visible(timeout=90_000)
            table_caption = page.get_by_text("highest summary pressure first")
            expect(table_caption).to_be_visible()
            before = table_caption.inner_text()

            compress = page.get_by_role("button", name="Compress…")
            expect(compress).to_be_enabled(timeout=30_000)
            compress.click()

            dialog = page.get_by_role("dialog")
            expect(dialog).to_be_visible(timeout=30_000)
            expect(dialog.get_by_text("messages to summarize")).to_be_visible(timeout=30_000)
            dialog.get_by_role("button", name="Compress 1 thread").click()

            outcome = page.get_by_text("compressed", exact=False).filter(has_text="→")
            expect(outcome.first).to_be_visible(timeout=120_000)
            expect(dialog).to_be_hidden(timeout=30_000)
            assert "tokens" in outcome.first.inner_text()
            # the rerun after the write has finished: list reloaded, navigation drawn by app.py
            expect(page.get_by_test_id("stStatusWidget")).to_be_hidden(timeout=60_000)
            expect(page.get_by_text("highest summary pressure first")).not_to_have_text(before)
            expect(page.get_by_test_id("stSidebarNav")).to_contain_text("Threads ≥ 85%")
            expect(page.get_by_test_id("stDataFrame").first).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "compress_flow.png"), full_page=True)
        finally:
            browser.close()
