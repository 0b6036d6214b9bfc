"""End to end in a real browser: `yuxi-dash serve --demo` on a fresh database, compress one thread.

Starts the real command as a subprocess on a free port (its own process group,
always killed), waits for Streamlit's "You can now view" line, then drives
Debian's headless Chromium with Playwright: open the threads page, open the
compress dialog, confirm, and see the one-line outcome. The screenshot lands
in test-artifacts/.
"""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
STARTUP_DEADLINE_SECONDS = 240


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _yuxi_dash_command() -> list[str]:
    script = Path(sys.executable).with_name("yuxi-dash")
    return [str(script)] if script.exists() else [sys.executable, "-m", "yuxi_dash"]


@pytest.fixture
def served_demo(tmp_path: Path) -> Iterator[str]:
    """URL of `yuxi-dash serve --demo` running on a fresh temp database."""
    port = _free_port()
    env = {
        **os.environ,
        "YUXI_DASH_DATABASE_URL": f"sqlite:///{tmp_path / 'yuxi_dash.db'}",
        "YUXI_DASH_WORKDIR": str(tmp_path / "workdir"),
        "YUXI_DASH_FALKORDB_DIR": str(tmp_path / "falkordb"),
        "YUXI_DASH_AUTH_MODE": "local",
        "GRAPHITI_TELEMETRY_ENABLED": "false",
    }
    command = [*_yuxi_dash_command(), "serve", "--demo", "--server.port", str(port)]
    server = subprocess.Popen(
        command,
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    output: list[str] = []

    def pump() -> None:
        assert server.stdout is not None
        for line in server.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    try:
        deadline = time.monotonic() + STARTUP_DEADLINE_SECONDS
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                pytest.fail("yuxi-dash serve did not start:\n" + "".join(output[-40:]))
            try:
                line = lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                pytest.fail(f"yuxi-dash serve exited ({server.wait()}):\n" + "".join(output[-40:]))
            output.append(line)
            if "You can now view" in line:
                break
        yield f"http://127.0.0.1:{port}"
    finally:
        try:
            os.killpg(server.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=20)
        # the demo's memory seeding started an embedded FalkorDB server of its own (own session)
        from yuxi_dash.memory.server import stop_server
        from yuxi_dash.settings import Settings

        stop_server(Settings(falkordb_data_dir=tmp_path / "falkordb"))


def test_operator_compresses_a_thread_in_the_browser(served_demo: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
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
