"""End to end in a real browser: `yuxi-dash serve --demo` over the seeded demo, compress one thread.

Copies the run's seeded demo (`demo_seed`: seeding from an empty database is
`tests/cli/test_serve.py`'s and `tests/demo/`'s), starts the real command as a
subprocess on a free port (its own process group, always killed), waits for
Streamlit's "You can now view" line, then drives Debian's headless Chromium
with Playwright: open the threads page, open the compress dialog, confirm, and
see the one-line outcome. The screenshot lands in test-artifacts/.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fixtures.app import copy_demo
from tests.fixtures.live_server import REPO, dashboard_env, launch_chromium, serve_dashboard

pytestmark = [pytest.mark.browser]

ARTIFACTS = REPO / "test-artifacts"
STARTUP_DEADLINE_SECONDS = 240


@dataclass(frozen=True)
class ServedDemo:
    url: str
    database_url: str  # the served dashboard's own database, to pick what to open


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, demo_seed: Path) -> Iterator[ServedDemo]:
    """`yuxi-dash serve --demo` running on a copy of the seeded demo (one per module)."""
    root = copy_demo(demo_seed, tmp_path_factory.mktemp("served"))
    env = dashboard_env(root, YUXI_DASH_AUTH_MODE="local")
    try:
        with serve_dashboard(root, env, "--demo", startup_seconds=STARTUP_DEADLINE_SECONDS) as url:
            yield ServedDemo(url, env["YUXI_DASH_DATABASE_URL"])
    finally:
        # serve started an embedded FalkorDB server of its own (own session)
        from yuxi_dash.memory.graph.server import stop_server
        from yuxi_dash.settings import Settings

        stop_server(Settings(falkordb_data_dir=root / "falkordb"))


def test_operator_compresses_a_thread_in_the_browser(served: ServedDemo) -> None:
    served_demo = served.url
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
            # the element can re-render between the two reads: assert with a retry
            expect(outcome.first).to_contain_text("tokens", timeout=30_000)
            # the rerun after the write has finished: list reloaded, navigation drawn by app.py
            expect(page.get_by_test_id("stStatusWidget")).to_be_hidden(timeout=60_000)
            expect(page.get_by_text("highest summary pressure first")).not_to_have_text(before)
            expect(page.get_by_test_id("stSidebarNav")).to_contain_text("Threads ≥ 85%")
            expect(page.get_by_test_id("stDataFrame").first).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "compress_flow.png"), full_page=True)
        finally:
            browser.close()


def test_a_linked_message_opens_the_chat_record_there(served: ServedDemo) -> None:
    """`?message=N` (a fact's provenance link) opens the Full chat record at #N, highlighted."""
    import sqlalchemy as sa
    from playwright.sync_api import expect, sync_playwright

    engine = sa.create_engine(served.database_url)
    try:
        with engine.connect() as conn:
            thread_id, sequence = conn.execute(
                sa.text(
                    "SELECT thread_id, max(sequence) FROM chat_messages "
                    "GROUP BY thread_id HAVING max(sequence) > 12 ORDER BY thread_id LIMIT 1"
                )
            ).one()
    finally:
        engine.dispose()
    linked = sequence - 5
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            page.goto(f"{served.url}/thread_detail?thread={thread_id}&message={linked}")
            tab = page.get_by_role("tab", name="Full chat record")
            expect(tab).to_have_attribute("aria-selected", "true", timeout=90_000)
            expect(page.get_by_role("tab", name="Pressure timeline")).to_have_attribute(
                "aria-selected", "false"
            )
            expect(page.get_by_text(f"Linked message #{linked}")).to_be_visible(timeout=30_000)
            expect(
                page.get_by_text(f"From message #{linked - 2}; the linked message is highlighted.")
            ).to_be_visible()
            expect(page.get_by_test_id("stDataFrame").last).to_be_visible(timeout=60_000)
            expect(page.get_by_test_id("stStatusWidget")).to_be_hidden(timeout=60_000)
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "linked_message.png"), full_page=True)
        finally:
            browser.close()
