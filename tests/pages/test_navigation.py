"""Pages open through app.py: one name per page, and a page opened first by its URL is framed.

The sidebar entry app.py registers is the title the page shows. The page
scripts live in app_pages/: Streamlit would take a pages/ folder beside app.py
for an old-style multipage app and run a page asked for first on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from streamlit.testing.v1 import AppTest

from tests.fixtures.app import APP
from yuxi_dash.settings import Settings

REPO = Path(__file__).resolve().parents[2]


def test_every_sidebar_entry_is_the_title_of_its_page(
    app_test: Callable[..., AppTest], memory_settings: Settings
) -> None:
    at = app_test()  # local mode: the admin, so every page is listed (the audit log too)
    assert not at.exception
    # what st.navigation registered: the sidebar's entries, by script (AppTest keeps them)
    entries = {
        Path(str(info["script_path"])).name: str(info["page_name"])
        for info in at._registered_pages.values()  # noqa: SLF001 - no public accessor
        if info.get("script_path")
    }
    pages = sorted(p.name for p in (REPO / "app_pages").glob("*.py"))
    assert sorted(entries) == pages  # every page is in the sidebar, and nothing else
    titles = {}
    for name in pages:
        at.switch_page(f"app_pages/{name}").run()
        assert not at.exception, name
        titles[name] = [t.value for t in at.title]
    assert titles == {name: [entries[name]] for name in pages}


def test_no_pages_folder_sits_beside_app_py() -> None:
    assert (REPO / "app_pages" / "thread_detail.py").is_file()
    assert not (REPO / "pages").exists(), "Streamlit would run a page asked for first on its own"


def test_a_page_asked_for_in_the_first_run_is_drawn_inside_app_py(demo_env: Settings) -> None:
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.switch_page("app_pages/threads.py").run()  # the session's first run asks for the page
    assert not at.exception
    assert [t.value for t in at.title] == ["Threads ≥ 85%"]
    assert any("Signed in as" in c.value for c in at.sidebar.caption)
