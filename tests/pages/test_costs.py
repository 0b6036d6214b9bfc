"""Model cost on the pages (yuxi_dash.ui.costs): thread detail's cost line and the Overview's
spend panel, on the demo; tokens and the hint without a prices file, dollars with one, and
the calls no entry prices counted in one line, never drawn as $0."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from yuxi_dash.costs.prices import NO_PRICES_HINT, ModelPrices, dollars, load_prices
from yuxi_dash.costs.spend import spend
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.queries import list_threads
from yuxi_dash.ui.costs.panels import SPEND_DAYS

DETAIL, OVERVIEW = "app_pages/thread_detail.py", "app_pages/overview.py"


def _use_prices(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, text: str) -> Settings:
    path = tmp_path / "prices.json"
    path.write_text(text, encoding="utf-8")
    monkeypatch.setenv("YUXI_DASH_MODEL_PRICES", str(path))
    get_settings.cache_clear()
    return get_settings()


def _detail(app_test: Callable[..., AppTest], thread_id: str) -> AppTest:
    at = app_test()
    at.query_params["thread"] = thread_id
    at.switch_page(DETAIL).run()
    assert not at.exception
    return at


def _hottest(settings: Settings) -> str:
    with session_scope(settings) as session:
        return list_threads(session, limit=1)[0].thread_id


def _window(
    settings: Settings, prices: ModelPrices | None
) -> list[tuple[str, int, float | None, int]]:
    """(agent, calls, dollars, unpriced calls) of the Overview's window, per agent."""
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    since = today - timedelta(days=SPEND_DAYS - 1)
    with session_scope(settings) as session:
        rows = spend(session, prices, "agent", since=since)
    return [(r.key, r.model_calls, r.cost_usd, r.unpriced_calls) for r in rows]


def _spend_axis(overview: AppTest) -> str:
    """The y axis title of the Overview's spend chart (the second chart)."""
    spec = json.loads(overview.get("vega_lite_chart")[1].proto.spec)
    return str(spec["encoding"]["y"]["title"])


def test_without_prices_the_pages_show_tokens_and_the_hint(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    thread_id = _hottest(demo_env)
    with session_scope(demo_env) as session:
        (row,) = spend(session, None, "thread", thread_id=thread_id)
    captions = " ".join(c.value for c in _detail(app_test, thread_id).caption)
    assert f"{row.input_tokens:,} input and {row.output_tokens:,} output tokens" in captions
    assert NO_PRICES_HINT in captions and "$" not in captions.split("Model cost:")[1][:20]
    overview = app_test(OVERVIEW)
    assert not overview.exception
    assert "Model spend" in [h.value for h in overview.subheader]
    assert NO_PRICES_HINT in " ".join(c.value for c in overview.caption)


def test_with_prices_the_pages_show_dollars(
    app_test: Callable[..., AppTest],
    demo_env: Settings,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    prices = {"*": {"input_per_million": 3, "output_per_million": 15}}
    settings = _use_prices(monkeypatch, tmp_path, json.dumps(prices))
    thread_id = _hottest(settings)
    with session_scope(settings) as session:
        (row,) = spend(session, load_prices(settings), "thread", thread_id=thread_id)
    assert row.cost_usd is not None and row.cost_usd > 0
    captions = " ".join(c.value for c in _detail(app_test, thread_id).caption)
    shown = dollars(row.cost_usd).replace("$", "\\$")  # Markdown: a dollar sign escaped
    assert f"Model cost: {shown} · {row.model_calls:,} model calls" in captions
    assert NO_PRICES_HINT not in captions
    overview = app_test(OVERVIEW)
    captions = " ".join(c.value for c in overview.caption)
    assert not overview.exception and NO_PRICES_HINT not in captions
    window = _window(settings, load_prices(settings))
    total = sum(cost or 0.0 for _, _, cost, _ in window)
    assert total > 0 and f"{dollars(total)}.".replace("$", "\\$") in captions
    assert _spend_axis(overview) == "Dollars" and "no price" not in captions


def test_calls_no_entry_prices_are_counted_and_never_drawn_as_zero_dollars(
    app_test: Callable[..., AppTest],
    demo_env: Settings,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    model_only = {"gpt-4.1": {"input_per_million": 2, "output_per_million": 8}}
    settings = _use_prices(monkeypatch, tmp_path, json.dumps(model_only))
    thread_id = _hottest(settings)
    with session_scope(settings) as session:
        (row,) = spend(session, load_prices(settings), "thread", thread_id=thread_id)
    captions = " ".join(c.value for c in _detail(app_test, thread_id).caption)
    assert f"{row.model_calls:,} model calls have no price: add their agent's name" in captions
    assert "matching no agent" in captions and "gpt-4.1" in captions
    assert "$" not in captions.split("Model cost:")[1][:20]
    overview = app_test(OVERVIEW)
    captions = " ".join(c.value for c in overview.caption)
    unpriced = sum(n for _, _, _, n in _window(settings, load_prices(settings)))
    assert unpriced > 0 and f"{unpriced:,} model calls have no price" in captions
    assert _spend_axis(overview) == "Tokens"  # no call priced: tokens, not bars of $0


def test_a_partly_priced_fleet_says_its_total_is_of_the_priced_calls(
    app_test: Callable[..., AppTest],
    demo_env: Settings,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    window = _window(demo_env, None)
    assert len(window) > 1, "the demo has calls of one agent only in the window"
    agent, calls, _, _ = window[0]
    one = {agent: {"input_per_million": 3, "output_per_million": 15}}
    settings = _use_prices(monkeypatch, tmp_path, json.dumps(one))
    overview = app_test(OVERVIEW)
    captions = " ".join(c.value for c in overview.caption)
    priced = _window(settings, load_prices(settings))
    unpriced = sum(n for _, _, _, n in priced)
    assert unpriced == sum(c for _, c, _, _ in window) - calls > 0
    assert f"for the {calls:,} priced" in captions
    assert f"{unpriced:,} model call" in captions and "no price" in captions
    assert _spend_axis(overview) == "Dollars" and "matching no agent" not in captions


def test_a_bad_prices_file_is_one_warning_and_the_tokens_still_show(
    app_test: Callable[..., AppTest],
    demo_env: Settings,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    settings = _use_prices(monkeypatch, tmp_path, "[1, 2]")
    at = _detail(app_test, _hottest(settings))
    (warning,) = at.warning
    assert "YUXI_DASH_MODEL_PRICES" in warning.value
    assert "output tokens" in " ".join(c.value for c in at.caption)
