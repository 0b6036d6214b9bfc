"""End to end in a real browser: the Facts page's desk on a real graph (issue 37).

`yuxi-dash serve` (local mode) runs as a subprocess over this test's own store and the
session's FalkorDB, which holds `desk_graph`; Debian's headless Chromium, driven by
Playwright, opens the page from a link naming the user and a fact, retracts the fact,
begins a second change, turns to another fact (the form is empty again), reloads (the
user and the fact stay), goes back and undoes the retract from the fact's corrections,
which the store holds whatever the session. The server must log no widget-state warning.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fixtures.desk import DESK_USER, DeskGraph
from tests.fixtures.live_server import (
    REPO,
    Process,
    dashboard_env,
    free_port,
    launch_chromium,
    serving,
    yuxi_dash_command,
)
from yuxi_dash.demo.flags import write_demo_flags

pytestmark = [pytest.mark.browser]

ARTIFACTS = REPO / "test-artifacts"
WAIT_MS = 90_000
REASON = "the user never said this at all"
REASON_LABEL = "Reason (at least 3 words)"
DUPLICATE_STATE = "was created with a default value but also had its value set"


@dataclass(frozen=True)
class Served:
    url: str
    process: Process


@pytest.fixture
def served(desk_graph: DeskGraph, falkordb_dir: Path, tmp_path: Path) -> Iterator[Served]:
    """The dashboard over this test's store (the desk chat) and the session's FalkorDB."""
    flags = write_demo_flags([DESK_USER], tmp_path / "flags.json")  # memory on for desk_user
    env = dashboard_env(
        tmp_path,
        YUXI_DASH_AUTH_MODE="local",
        YUXI_DASH_FALKORDB_DIR=str(falkordb_dir),
        YUXI_DASH_LD_FLAGS_FILE=str(flags),
    )
    port = free_port()
    command = [*yuxi_dash_command(), "serve", "--server.port", str(port)]
    with serving(command, cwd=tmp_path, env=env) as process:
        yield Served(f"http://127.0.0.1:{port}", process)


def _settled(page) -> None:
    """The rerun is over: one correction form (a rerun briefly shows the last one too)."""
    from playwright.sync_api import expect

    expect(page.get_by_label(REASON_LABEL)).to_have_count(1, timeout=WAIT_MS)
    expect(page.get_by_test_id("stStatusWidget")).to_be_hidden(timeout=WAIT_MS)


def _choose_fact(page, words: str) -> None:
    box = page.get_by_test_id("stSelectbox").filter(has_text="Fact (")
    box.locator("input").click()
    box.locator("input").press("ArrowDown")  # opens the list even when the box has focus
    page.get_by_role("option").filter(has_text=words).click()


def test_the_desk_form_links_and_undo_in_the_browser(served: Served, desk_graph: DeskGraph) -> None:
    from playwright.sync_api import expect, sync_playwright

    dark, caching = desk_graph.facts["dark"], desk_graph.facts["caching"]
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1400})
            page.goto(f"{served.url}/memory_facts?user={DESK_USER}&fact={dark}")
            expect(page.get_by_text("Where this fact came from")).to_be_visible(timeout=WAIT_MS)
            expect(page.get_by_text("Desk User prefers dark mode").first).to_be_visible()
            reason = page.get_by_label(REASON_LABEL)
            confirm = page.get_by_label("I confirm this change to the user's memory")

            _settled(page)
            page.get_by_label("retract").check(force=True)
            _settled(page)
            reason.fill(REASON)
            confirm.check(force=True)
            page.get_by_role("button", name="Apply retract").click()
            expect(page.get_by_text("retract done — audit row")).to_be_visible(timeout=WAIT_MS)

            # a second change begun on this fact, then another fact chosen: an empty form
            _settled(page)
            reason.fill("a reason meant for the dark mode fact")
            confirm.check(force=True)
            _choose_fact(page, "caching for the onboarding flow")
            expect(page).to_have_url(f"{served.url}/memory_facts?user={DESK_USER}&fact={caching}")
            info = page.get_by_test_id("stAlertContentInfo")
            expect(info.filter(has_text="interested in caching")).to_be_visible(timeout=WAIT_MS)
            _settled(page)
            # a loaded machine can start one more rerun after the settle (the URL changed):
            # its stale copy of the form shows until it ends, so each check waits it out
            expect(reason).to_have_value("", timeout=WAIT_MS)
            expect(confirm).not_to_be_checked(timeout=WAIT_MS)
            expect(page.get_by_text("retract done — audit row")).to_have_count(0, timeout=WAIT_MS)

            # a reload keeps the user and the fact
            page.reload()
            expect(info.filter(has_text="interested in caching")).to_be_visible(timeout=WAIT_MS)
            user_box = page.get_by_test_id("stSelectbox").filter(has_text="User (")
            expect(user_box.get_by_role("combobox")).to_have_value(DESK_USER)

            # the dark mode fact's retract, made before the reload, is there with its Undo
            _settled(page)
            _choose_fact(page, "prefers dark mode")
            expect(page.get_by_text("retract by operator@localhost")).to_be_visible(timeout=WAIT_MS)
            _settled(page)
            page.get_by_role("button", name="Undo retract").click()
            expect(page.get_by_text("undo done — audit row")).to_be_visible(timeout=WAIT_MS)
            _settled(page)
            expect(page.get_by_text("undone by audit row")).to_be_visible()
            expect(page.get_by_role("button", name="Undo retract")).to_have_count(0)
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "memory_desk.png"), full_page=True)
        finally:
            browser.close()
    log = "".join(served.process.output)
    assert DUPLICATE_STATE not in log, log[-3000:]
