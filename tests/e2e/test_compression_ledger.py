"""In a real browser: a thread's Compressions tab, and a recoverable item followed to its line.

The thread is compressed by our core in this process (a real compression record, real
files in the workdir), then `streamlit run app.py` serves the same database and workdir.
Chromium opens the thread, the Compressions tab, picks the item only the history file
keeps, and sees that file's line with the item on it; the item's own link (as the items
table builds it) opens the same line in a fresh page. Both reads are audited.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.fixtures.live_server import (
    REPO,
    dashboard_env,
    free_port,
    launch_chromium,
    serving,
    streamlit_command,
)
from tests.ui.compressed_thread import HISTORY_ONLY, compressed_thread, item_index
from yuxi_dash.store.db import forget_engines, session_scope
from yuxi_dash.store.queries import list_audit
from yuxi_dash.tool_results.saved_lines import READ_LINES_ACTION
from yuxi_dash.ui.compressions.ledger_view import item_link

if TYPE_CHECKING:
    from playwright.sync_api import Locator

pytestmark = [pytest.mark.browser]

ARTIFACTS = REPO / "test-artifacts"
WAIT_MS = 90_000
THREAD = "t-ledger"
TRY_MS = 10_000


def _pick(field: Locator, option: Locator, typed: str) -> None:
    """Type into a select box until its list narrows to `option`, then click it.

    A rerun that lands between the typing and the list (the tab's first draw, under
    load) closes the list and clears the field, so the typing is tried again.
    """
    from playwright.sync_api import Error, expect

    deadline = time.monotonic() + WAIT_MS / 1000
    while True:
        try:
            field.click()
            field.fill(typed)  # the list narrows to the one item
            expect(option).to_have_count(1, timeout=TRY_MS)
            option.click()
            return
        except (AssertionError, Error):
            if time.monotonic() > deadline:
                raise
            field.press("Escape")


def test_a_recoverable_item_opens_at_its_line_in_the_browser(tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    _result, record = compressed_thread(THREAD)
    index = item_index(record, HISTORY_ONLY)
    line = record["ledger"]["items"][index]["line"]
    forget_engines()  # the served process is the only writer from here
    env = dashboard_env(tmp_path, YUXI_DASH_AUTH_MODE="local")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [*streamlit_command(), "--server.address", "127.0.0.1", "--server.port", str(port)]
    with serving(command, cwd=tmp_path, env=env), sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1400})
            page.goto(f"{url}/thread_detail?thread={THREAD}")
            expect(page.get_by_role("heading", name="Thread detail")).to_be_visible(timeout=WAIT_MS)
            page.get_by_role("tab", name="Compressions").click()
            expect(page.get_by_text("manual, by ops@example.com").first).to_be_visible(
                timeout=WAIT_MS
            )
            box = page.get_by_test_id("stSelectbox").filter(
                has_text="Open a recoverable item at its line"
            )
            option = page.get_by_role("option").filter(has_text=f"{HISTORY_ONLY} · Thread id")
            _pick(box.locator("input"), option, HISTORY_ONLY)
            code = page.get_by_test_id("stCode").filter(has_text=f"→ {line}")
            expect(code).to_be_visible(timeout=WAIT_MS)
            expect(code).to_contain_text(HISTORY_ONLY)
            expect(page.get_by_text(f"line {line:,} of", exact=False)).to_be_visible()
            expect(page).to_have_url(
                f"{url}/thread_detail?thread={THREAD}&compression={record['id']}&item={index}",
                timeout=WAIT_MS,
            )
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "compression_ledger.png"), full_page=True)

            linked = browser.new_page(viewport={"width": 1440, "height": 1400})
            linked.goto(f"{url}/{item_link(THREAD, record['id'], index)}")
            tab = linked.get_by_role("tab", name="Compressions")
            expect(tab).to_have_attribute("aria-selected", "true", timeout=WAIT_MS)
            code = linked.get_by_test_id("stCode").filter(has_text=f"→ {line}")
            expect(code).to_contain_text(HISTORY_ONLY, timeout=WAIT_MS)
        finally:
            browser.close()
    with session_scope() as session:
        reads = list_audit(session, action=READ_LINES_ACTION, target=f"compression:{record['id']}")
    assert [row.outcome for row in reads] == ["ok", "ok"]  # one per page that opened it
