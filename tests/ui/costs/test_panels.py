"""The spend chart (yuxi_dash.ui.costs.panels.spend_chart): dollars with prices, tokens without.
Whether a window is drawn in dollars (some call priced) is the panel's: tests/pages/test_costs.py."""

from __future__ import annotations

import pandas as pd

from yuxi_dash.ui.costs.loaders import DAY_COLUMNS
from yuxi_dash.ui.costs.panels import spend_chart

DAYS = pd.DataFrame(
    [
        ("2026-12-01", "agent-a", 2, 10_000, 400, 0.036, 0),
        ("2026-12-01", "other", 1, 5_000, 0, None, 1),
        ("2026-12-02", "agent-a", 1, 7_000, 100, 0.0225, 0),
    ],
    columns=DAY_COLUMNS,
)


def test_priced_bars_are_dollars_per_agent_and_an_unpriced_row_is_not_a_price() -> None:
    spec = spend_chart(DAYS, priced=True).to_dict()
    assert spec["encoding"]["y"]["field"] == "cost"
    assert spec["encoding"]["color"]["field"] == "agent"
    rows = next(iter(spec["datasets"].values()))
    # an unpriced row adds nothing to the stack (the panel says how many calls that is) and
    # its tooltip says "-", not $0
    assert [r["cost"] for r in rows] == [0.036, 0.0, 0.0225]
    assert [r["cost_text"] for r in rows] == ["$0.0360", "-", "$0.0225"]


def test_without_prices_the_bars_are_tokens() -> None:
    spec = spend_chart(DAYS, priced=False).to_dict()
    assert spec["encoding"]["y"]["field"] == "tokens"
    rows = next(iter(spec["datasets"].values()))
    assert [r["tokens"] for r in rows] == [10_400, 5_000, 7_100]
