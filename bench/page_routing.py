"""Benchmark: a deep link's first render, pages/ plus a handover vs a folder Streamlit does not scan.

Issue 38 item 4. Streamlit treats a `pages/` folder beside the entry script as
an old-style multipage app until some session calls `st.navigation`: the first
request of a fresh server for /thread_detail then ran that page alone, without
app.py (identity, navigation, error guard). yuxi-dash used to fix this with a
handover on Streamlit's private `PagesManager.uses_pages_directory`: the page
flipped it and ran app.py with `runpy` in the same run. The public way is to
keep the page scripts in a folder with another name (`app_pages/`) that only
`st.Page` names. The handover is kept here, and only here, to be measured.

Both layouts are built in a temp dir from the repo's app.py and page scripts:
`handover/` (pages/ + the handover injected at the top of every page) and
`public/` (app_pages/, as the repo has it). `bare/` (pages/, no handover) shows
what the handover was for. Measured, interleaved, one fresh server per sample:

- served: `streamlit run app.py` on the seeded demo, headless Chromium opens
  /thread_detail?thread=... as the server's first request; seconds until the
  page is drawn (title, the first tab's chart caption, no run in progress).
- AppTest: app.py, then a switch to the thread detail page (what the page
  tests do); seconds of the switched run, loaders' cache cleared first.

The handover "earns its place" only if public / handover >= 2 on the served
figure.

    .venv/bin/python bench/page_routing.py [--rounds 3] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fixtures.live_server import (  # noqa: E402
    dashboard_env,
    free_port,
    launch_chromium,
    serving,
    yuxi_dash_command,
)

PAGE_DIRS = ("app_pages", "pages")  # the repo's folder (whichever it has), then the old name
HANDOVER = '''"""The removed handover: run app.py in this run when Streamlit ran a pages/ file alone."""

import runpy

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner import get_script_run_ctx


def hand_navigation_to_app() -> None:
    ctx = get_script_run_ctx()
    if not getattr(PagesManager, "uses_pages_directory", False) or ctx is None:
        return
    PagesManager.uses_pages_directory = False
    runpy.run_path(str(ctx.pages_manager.main_script_path), run_name="__main__")
    st.stop()
'''
INJECTED = "import _handover  # noqa: E402\n\n_handover.hand_navigation_to_app()\n"
FUTURE = "from __future__ import annotations\n"


def repo_pages() -> Path:
    for name in PAGE_DIRS:
        if (ROOT / name / "thread_detail.py").is_file():
            return ROOT / name
    raise SystemExit("no page folder with thread_detail.py in the repo")


def build(target: Path, folder: str, *, handover: bool) -> Path:
    """An app dir: app.py naming `folder`, the page scripts in it, the repo's Streamlit config."""
    source = repo_pages()
    target.mkdir(parents=True)
    app = (ROOT / "app.py").read_text()
    app, count = re.subn(r'(PAGES_DIR = .*/ )"[a-z_]+"', rf'\1"{folder}"', app)
    assert count == 1, "app.py has no PAGES_DIR line to point at the page folder"
    (target / "app.py").write_text(app)
    shutil.copytree(
        ROOT / ".streamlit", target / ".streamlit", ignore=shutil.ignore_patterns("secrets*")
    )
    (target / folder).mkdir()
    for script in sorted(source.glob("*.py")):
        text = script.read_text().replace(f'"{source.name}/', f'"{folder}/')
        if handover:
            assert FUTURE in text, script.name
            text = text.replace(FUTURE, FUTURE + "\n" + INJECTED, 1)
        (target / folder / script.name).write_text(text)
    if handover:
        (target / "_handover.py").write_text(HANDOVER)
    return target


def seed(data_dir: Path) -> None:
    """The demo's threads (no memory) in `data_dir`, unless already there."""
    if (data_dir / "yuxi_dash.db").is_file():
        return
    data_dir.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [*yuxi_dash_command(), "demo", "--no-memory", "--json"],
        cwd=data_dir,
        env=dashboard_env(data_dir),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the demo seed failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")


def a_thread(data_dir: Path) -> str:
    import sqlalchemy as sa

    engine = sa.create_engine(f"sqlite:///{data_dir / 'yuxi_dash.db'}")
    try:
        with engine.connect() as conn:
            return str(
                conn.execute(
                    sa.text("SELECT thread_id FROM chat_messages ORDER BY thread_id LIMIT 1")
                ).scalar_one()
            )
    finally:
        engine.dispose()


def served_first_render(
    app_dir: Path, data_dir: Path, link: str, browser: object
) -> tuple[float, bool]:
    """(seconds to draw `link` as a fresh server's first request, whether app.py drew the frame)."""
    from playwright.sync_api import expect

    port = free_port()
    command = [
        sys.executable, "-m", "streamlit", "run", str(app_dir / "app.py"),
        "--server.address", "127.0.0.1", "--server.port", str(port),
    ]  # fmt: skip
    env = dashboard_env(data_dir, YUXI_DASH_AUTH_MODE="local")
    with serving(command, cwd=app_dir, env=env):
        context = browser.new_context(viewport={"width": 1440, "height": 1000})  # type: ignore[attr-defined]
        try:
            page = context.new_page()
            start = time.perf_counter()
            page.goto(f"http://127.0.0.1:{port}{link}")
            expect(page.get_by_role("heading", name="Thread detail")).to_be_visible(timeout=120_000)
            drawn = page.get_by_text("Lines: summary pressure")  # under the first tab's chart
            expect(drawn).to_be_visible(timeout=120_000)
            expect(page.get_by_test_id("stStatusWidget")).to_be_hidden(timeout=120_000)
            seconds = time.perf_counter() - start
            through_app = page.get_by_text("Signed in as").count() > 0
        finally:
            context.close()
    return seconds, through_app


def apptest_switch(app_dir: Path, folder: str, thread: str) -> float:
    """Seconds of AppTest's run switched from app.py to the thread detail page."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(app_dir / "app.py"), default_timeout=120).run()
    at.query_params["thread"] = thread
    at.switch_page(f"{folder}/thread_detail.py")
    st.cache_data.clear()
    start = time.perf_counter()
    at.run()
    seconds = time.perf_counter() - start
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Thread detail"], [t.value for t in at.title]
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="fresh servers per layout")
    parser.add_argument("--data-dir", type=Path, help="a seeded demo to reuse (seeded if empty)")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="yuxi-routing-"))
    data_dir = args.data_dir or work / "demo"
    seed(data_dir)
    thread = a_thread(data_dir)
    link = f"/thread_detail?thread={thread}"
    layouts = {
        "handover": (build(work / "handover", "pages", handover=True), "pages"),
        "public": (build(work / "public", "app_pages", handover=False), "app_pages"),
    }
    bare = build(work / "bare", "pages", handover=False)
    served: dict[str, list[float]] = {name: [] for name in layouts}
    framed: dict[str, bool] = {}
    try:
        with sync_playwright() as playwright:
            browser = launch_chromium(playwright)
            try:
                for _ in range(args.rounds):
                    for name, (app_dir, _folder) in layouts.items():
                        seconds, through_app = served_first_render(app_dir, data_dir, link, browser)
                        served[name].append(seconds)
                        framed[name] = framed.get(name, True) and through_app
                _, framed["bare pages/ (no handover)"] = served_first_render(
                    bare, data_dir, link, browser
                )
            finally:
                browser.close()

        for key, value in dashboard_env(data_dir).items():
            if key.startswith("YUXI_DASH_") or key == "GRAPHITI_TELEMETRY_ENABLED":
                os.environ[key] = value
        os.environ["YUXI_DASH_AUTH_MODE"] = "local"
        in_apptest: dict[str, list[float]] = {name: [] for name in layouts}
        for app_dir, folder in layouts.values():
            apptest_switch(app_dir, folder, thread)  # warm-up: imports, engines
        for _ in range(args.rounds):
            for name, (app_dir, folder) in layouts.items():
                in_apptest[name].append(apptest_switch(app_dir, folder, thread))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"deep link {link} on {data_dir}, {args.rounds} rounds, medians (all samples)")
    for title, figures in (("served first render", served), ("AppTest switch", in_apptest)):
        handover, public = (statistics.median(figures[n]) for n in ("handover", "public"))
        for name in ("handover", "public"):
            samples = ", ".join(f"{s:.2f}" for s in figures[name])
            print(f"  {title:20} {name:9} {statistics.median(figures[name]):6.2f} s  ({samples})")
        ratio = public / handover
        print(f"  {title:20} public / handover = {ratio:.2f}x  (the handover needs >= 2x)")
    print("drawn inside app.py's frame (sidebar 'Signed in as'):", json.dumps(framed))


if __name__ == "__main__":
    main()
