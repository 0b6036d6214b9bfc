"""The cost loaders (yuxi_dash.ui.costs.loaders): an edited prices file is read again at once
(its mtime and size are in the cache key), and keys matching no agent are named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.queries import list_threads
from yuxi_dash.ui.costs import loaders


def _write(path: Path, prices: dict[str, dict[str, float]]) -> None:
    path.write_text(json.dumps(prices), encoding="utf-8")


def test_an_edited_prices_file_is_read_again(
    demo_env: Settings, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "prices.json"
    _write(path, {"*": {"input_per_million": 1, "output_per_million": 1}})
    monkeypatch.setenv("YUXI_DASH_MODEL_PRICES", str(path))
    get_settings.cache_clear()
    with session_scope(get_settings()) as session:
        thread_id = list_threads(session, limit=1)[0].thread_id
    first = loaders.thread_cost(thread_id)["spend"]["cost_usd"]
    assert first and loaders.thread_cost(thread_id)["spend"]["cost_usd"] == first
    _write(path, {"*": {"input_per_million": 10, "output_per_million": 10}, "gpt-4.1": {
        "input_per_million": 2, "output_per_million": 8}})  # fmt: skip
    again = loaders.thread_cost(thread_id)
    assert again["spend"]["cost_usd"] == pytest.approx(first * 10)
    assert again["unmatched"] == ["gpt-4.1"]
    path.write_text("{not json", encoding="utf-8")
    assert loaders.thread_cost(thread_id)["error"]  # a file turned bad: said at once
