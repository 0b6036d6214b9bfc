"""Every operations page on a fresh, empty database: one clear empty state, no exception."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.fixtures.app import APP

OPERATION_PAGES = [
    "app_pages/overview.py",
    "app_pages/threads.py",
    "app_pages/thread_detail.py",
    "app_pages/tool_results.py",
    "app_pages/compression_quality.py",
    "app_pages/audit.py",
]


@pytest.fixture
def empty_store(isolated_settings: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from yuxi_dash.settings import get_settings
    from yuxi_dash.ui.loaders import clear_loaders

    monkeypatch.setenv("YUXI_DASH_DATABASE_URL", f"sqlite:///{tmp_path / 'empty.db'}")
    monkeypatch.setenv("YUXI_DASH_WORKDIR", str(tmp_path / "workdir"))
    get_settings.cache_clear()
    clear_loaders()


@pytest.mark.parametrize("page", OPERATION_PAGES)
def test_an_empty_store_says_so_on_every_page(empty_store: None, page: str) -> None:
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert not at.main.dataframe and not at.main.metric or page == "app_pages/overview.py"
    said = [i.value for i in at.main.info]
    assert len(said) == 1 and said[0].startswith("No "), said  # one line saying what is missing
