"""Chart builders (yuxi_dash.ui.charts): the layers, lines and selections the pages rely on."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pandas as pd

from yuxi_dash.ui.charts import (
    BREAKDOWN_LABELS,
    PICK,
    breakdown_frame,
    context_breakdown_chart,
    count_axis,
    counted_tokens,
    pressure_overview_chart,
    pressure_timeline_chart,
)
from yuxi_dash.ui.loaders import POINT_COLUMNS


def _spec(chart: object) -> str:
    return json.dumps(chart.to_dict())  # type: ignore[attr-defined]


def test_overview_chart_has_heatmap_points_and_both_lines() -> None:
    heatmap = pd.DataFrame(
        {"x0": [0.0], "x1": [0.025], "y0": [0.1], "y1": [0.15], "threads": [900]}
    )
    points = pd.DataFrame(
        {
            "thread_id": ["t1"],
            "user_id": ["u"],
            "agent_slug": ["a"],
            "context_usage_ratio": [0.7],
            "summary_pressure_ratio": [0.9],
            "next_llm_input_tokens": [92_000],
            "summary_trigger_tokens": [102_400],
            "llm_input_tokens": [90_000],
            "context_window": [128_000],
        }
    )
    spec = _spec(pressure_overview_chart(heatmap, points))
    assert '"rect"' in spec and '"circle"' in spec
    assert '"y": 0.85' in spec and '"y": 1.0' in spec
    assert f'"name": "{PICK}"' in spec
    assert '"field": "agent_slug"' in spec


def test_timeline_marks_manual_and_automatic_compressions() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    timeline = pd.DataFrame(
        {
            "measured_at": [start + timedelta(minutes=i) for i in range(3)],
            "summary_pressure_ratio": [0.5, 0.9, 0.2],
            "context_usage_ratio": [0.4, 0.7, 0.15],
            "source": ["model_call", "model_call", "manual_compression"],
        }
    )
    spec = _spec(pressure_timeline_chart(timeline))
    assert "manual compression" in spec and "automatic compression" in spec
    assert '"y": 0.85' in spec and '"y": 1.0' in spec


def test_timeline_time_axis_reads_24_hour_utc() -> None:
    start = datetime(2026, 1, 1, 23, tzinfo=UTC)
    timeline = pd.DataFrame(
        {
            "measured_at": [start + timedelta(hours=i) for i in range(3)],
            "summary_pressure_ratio": [0.5, 0.9, 0.2],
            "context_usage_ratio": [0.4, 0.7, 0.15],
            "source": ["model_call", "model_call", "model_call"],
        }
    )
    spec = pressure_timeline_chart(timeline).to_dict()
    x = spec["layer"][0]["encoding"]["x"]
    assert x["title"] == "Measured at (UTC)" and x["scale"] == {"type": "utc"}
    # Vega's default labels are 12-hour with no AM/PM: these are %H (00-23), formatted in UTC
    labels = x["axis"]["labelExpr"]
    assert labels.startswith("utcFormat(datum.value, ")
    assert "'%H:%M'" in labels and "'%H:%M:%S'" in labels and "%I" not in labels


def test_breakdown_lists_every_part_in_order() -> None:
    frame = breakdown_frame({"messages": 100, "summary": 20, "compressed_away": 5000})
    assert frame["part"].tolist()[0] == "System prompt"
    assert dict(zip(frame["part"], frame["tokens"], strict=True))["Summary"] == 20
    assert '"bar"' in _spec(context_breakdown_chart({"messages": 100}))


def test_count_axes_and_legends_have_whole_ticks_only() -> None:
    """Issue 37 item 14: no "0.5" tick on an axis or legend of counts."""
    spec = context_breakdown_chart({"messages": 1, "summary": 2}).to_dict()
    axis = spec["encoding"]["x"]["axis"]
    assert (axis["tickMinStep"], axis["format"], axis["title"]) == (1, ",d", "Tokens")
    heatmap = pd.DataFrame({"x0": [0.0], "x1": [0.025], "y0": [0.1], "y1": [0.15], "threads": [3]})
    points = pd.DataFrame(columns=POINT_COLUMNS)
    layers = pressure_overview_chart(heatmap, points).to_dict()["layer"]
    legend = layers[0]["encoding"]["color"]["legend"]
    assert (legend["tickMinStep"], legend["format"]) == (1, ",d")
    assert count_axis().to_dict() == {"format": ",d", "tickMinStep": 1}


def test_tooltips_give_the_figures_a_ratio_is_made_of() -> None:
    """Issue 37 item 4: the timeline's pressure reads "18,745 ÷ 8,192" beside 228.8%."""
    timeline = pd.DataFrame(
        {
            "measured_at": [datetime(2026, 12, 6, 14, 3, 7, 123456, tzinfo=UTC)],
            "summary_pressure_ratio": [2.2882],
            "context_usage_ratio": [0.7813],
            "next_llm_input_tokens": [18_745],
            "summary_trigger_tokens": [8_192],
            "llm_input_tokens": [18_750],
            "context_window": [24_000],
            "source": ["model_call"],
        }
    )
    data = pressure_timeline_chart(timeline).to_dict()["datasets"]
    rows = [row for rows in data.values() for row in rows if "of_text" in row]
    assert {(r["series"], r["ratio_text"], r["of_text"]) for r in rows} == {
        ("Summary pressure", "228.8%", "18,745 ÷ 8,192"),
        ("Context usage", "78.1%", "18,750 ÷ 24,000"),
    }
    assert {r["at_text"] for r in rows} == {"2026-12-06 14:03:07 UTC"}


def test_the_parts_add_up_to_the_next_input_every_page_shows() -> None:
    """Issue 37 item 4: what the dashboard cannot break down is a part of its own."""
    breakdown = {"messages": 369, "tool_results": 18_135, "summary": 0, "compressed_away": 10}
    frame = breakdown_frame(breakdown, ["system", "tools"], next_input=18_745)
    sent = frame[frame["sent"]]
    assert int(sent["tokens"].sum()) == 18_745
    rest = frame.set_index("part").at[BREAKDOWN_LABELS["not_broken_down"], "tokens"]
    assert rest == 241 and "system prompt" in BREAKDOWN_LABELS["not_broken_down"]
    assert counted_tokens(breakdown) == 18_504
    short = breakdown_frame(breakdown, next_input=100)  # fewer than counted: no negative part
    assert short.set_index("part").at[BREAKDOWN_LABELS["not_broken_down"], "tokens"] == 0
