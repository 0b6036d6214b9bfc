"""One name per page: the sidebar entry app.py registers is the title the page shows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from streamlit.testing.v1 import AppTest

from yuxi_dash.settings import Settings


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
    pages = sorted(p.name for p in (Path(__file__).resolve().parents[2] / "pages").glob("*.py"))
    assert sorted(entries) == pages  # every page is in the sidebar, and nothing else
    titles = {}
    for name in pages:
        at.switch_page(f"pages/{name}").run()
        assert not at.exception, name
        titles[name] = [t.value for t in at.title]
    assert titles == {name: [entries[name]] for name in pages}
