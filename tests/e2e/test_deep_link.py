"""A deep link as a fresh server's very first request is drawn inside app.py's frame.

Streamlit takes a `pages/` folder beside the entry script for an old-style
multipage app until some session calls `st.navigation`; the first request of a
fresh server for /thread_detail then ran that page alone, with no identity
check, navigation or error guard. The page scripts live in `app_pages/`, which
only `st.Page` names. This starts `streamlit run app.py` on a copy of the seeded
demo and opens a thread's detail page by URL before anything else: the page
shows that thread, and the sidebar (navigation, "Signed in as") is app.py's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.fixtures.app import copy_demo
from tests.fixtures.live_server import (
    dashboard_env,
    free_port,
    launch_chromium,
    serving,
    streamlit_command,
)

pytestmark = [pytest.mark.browser]


def test_a_deep_link_first_opens_inside_app_py(demo_seed: Path, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    root = copy_demo(demo_seed, tmp_path / "served")
    env = dashboard_env(root, YUXI_DASH_AUTH_MODE="local")
    engine = sa.create_engine(env["YUXI_DASH_DATABASE_URL"])
    try:
        with engine.connect() as conn:
            thread_id = conn.execute(
                sa.text("SELECT thread_id FROM chat_messages ORDER BY thread_id DESC LIMIT 1")
            ).scalar_one()
    finally:
        engine.dispose()
    port = free_port()
    command = [*streamlit_command(), "--server.address", "127.0.0.1", "--server.port", str(port)]
    with serving(command, cwd=root, env=env), sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            page.goto(f"http://127.0.0.1:{port}/thread_detail?thread={thread_id}")
            expect(page.get_by_role("heading", name="Thread detail")).to_be_visible(timeout=90_000)
            sidebar = page.get_by_test_id("stSidebar")
            expect(sidebar.get_by_text("Signed in as")).to_be_visible(timeout=60_000)
            nav = page.get_by_test_id("stSidebarNav")
            expect(nav).to_contain_text("Pressure overview")
            expect(nav).to_contain_text("Audit log")
            expect(page.get_by_test_id("stStatusWidget")).to_be_hidden(timeout=60_000)
            # the page keeps ?thread= only when its picker shows that thread
            assert page.url.endswith(f"/thread_detail?thread={thread_id}"), page.url
        finally:
            browser.close()
