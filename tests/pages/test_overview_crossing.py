"""The Overview's "Crossing within the hour" (issue 40): threads whose growth is known, listed
100% first and soonest first with exact turns and minutes; those the forecast cannot place
are counted with the reason, never listed.

Growth is written as projection writes usage (`tests.store.forecast_builders.grow`) into the
test's own empty database, ending a minute before now: the minutes count from now, a minute
less than from the last call (the turns stay).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from tests.fixtures.app import APP
from tests.store.forecast_builders import grow
from yuxi_dash.settings import get_settings
from yuxi_dash.store import thread_list
from yuxi_dash.store.models import utcnow
from yuxi_dash.ui.loaders import clear_loaders

PAGE = "app_pages/overview.py"


@pytest.fixture
def overview(isolated_settings: Path) -> AppTest:
    get_settings.cache_clear()
    clear_loaders()
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    return at


def open_overview(at: AppTest) -> AppTest:
    clear_loaders()
    at.switch_page(PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def crossing_table(at: AppTest) -> pd.DataFrame | None:
    """The list's table (other panels of the page may draw tables too)."""
    tables = [d.value for d in at.dataframe if "100% in" in d.value.columns]
    assert len(tables) <= 1
    return tables[0] if tables else None


def test_threads_crossing_within_the_hour_soonest_first(overview: AppTest) -> None:
    last = utcnow() - timedelta(minutes=1)  # every thread's newest model call; 8,192 trigger
    grow("t-soon", 5000, 5500, 6000, last_at=last)  # 500 a turn, a minute apart
    grow("t-next", 6000, 6400, 6800, last_at=last)  # 400 a turn: sooner than t-soon
    grow("t-later", 1000, 1100, 1200, last_at=last)  # 100 a turn: 85% within the hour only
    grow("t-young", 7000, 7500, last_at=last)  # two calls: too little history
    grow("t-flat", 5000, 5000, 5000, last_at=last)  # no growth
    grow("t-over", 7000, 8000, 9000, last_at=last)  # over 100% already: counted above
    grow("t-idle", 5000, 5500, 6000, last_at=last - timedelta(hours=2))  # off its pace
    at = open_overview(overview)
    assert "Crossing within the hour" in [s.value for s in at.subheader]
    table = crossing_table(at)
    assert table["thread"].tolist() == ["t-next", "t-soon", "t-later"]
    assert table["100% in"].tolist() == ["4 turns, ~3 min", "5 turns, ~4 min", "70 turns, ~69 min"]
    assert table["85% in"].tolist() == ["1 turn, due now", "2 turns, ~1 min", "58 turns, ~57 min"]
    assert table["pressure"].tolist() == [83.0, 73.2, 14.7]  # 6,800, 6,000 and 1,200 of 8,192
    assert table["busy"].tolist() == ["idle"] * 3
    assert table["open"].tolist() == [
        "thread_detail?thread=t-next",
        "thread_detail?thread=t-soon",
        "thread_detail?thread=t-later",
    ]
    captions = " ".join(c.value for c in at.caption)
    assert "5 threads below 100% and active in the last hour were forecast" in captions
    assert (
        "Not listed: 2 threads with no forecast (not growing since the last compression: no "
        "crossing to forecast: 1; too little history since the last compression to forecast: 1)"
    ) in captions


def test_no_thread_crossing_says_so(overview: AppTest) -> None:
    last = utcnow() - timedelta(minutes=1)
    grow("t-slow", 1000, 1010, 1020, last_at=last)  # 10 a turn: hours away
    grow("t-young", 7000, 7500, last_at=last)
    at = open_overview(overview)
    assert crossing_table(at) is None
    said = [i.value for i in at.main.info]
    assert "No thread is forecast to cross 85% or 100% of its summary threshold this hour." in said
    captions = " ".join(c.value for c in at.caption)
    assert "2 threads below 100% and active in the last hour were forecast" in captions
    assert "Not listed: 1 thread with no forecast (too little history" in captions


def test_the_agent_filter_narrows_the_list(overview: AppTest) -> None:
    last = utcnow() - timedelta(minutes=1)
    grow("t-soon", 5000, 5500, 6000, last_at=last)
    grow("t-b", 6000, 6400, 6800, last_at=last, agent="agent-b")
    at = open_overview(overview)
    assert crossing_table(at)["thread"].tolist() == ["t-b", "t-soon"]
    at.selectbox[0].set_value("agent-a").run()
    assert not at.exception
    assert crossing_table(at)["thread"].tolist() == ["t-soon"]


def test_a_capped_list_says_how_many_were_forecast(
    overview: AppTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(thread_list, "CROSSING_FORECASTS_MAX", 2)
    last = utcnow() - timedelta(minutes=1)
    grow("t-soon", 5000, 5500, 6000, last_at=last)
    grow("t-next", 6000, 6400, 6800, last_at=last)
    grow("t-later", 1000, 1100, 1200, last_at=last)  # the least pressured: not forecast
    at = open_overview(overview)
    assert crossing_table(at)["thread"].tolist() == ["t-next", "t-soon"]
    captions = " ".join(c.value for c in at.caption)
    assert (
        "2 threads below 100% and active in the last hour were forecast (only the 2 most "
        "pressured: more were active)"
    ) in captions
