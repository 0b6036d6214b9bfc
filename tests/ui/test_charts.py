"""Chart builders (yuxi_dash.ui.charts): the layers, lines and selections the pages rely on."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pandas as pd

from yuxi_dash.ui.charts import (
    PICK,
    breakdown_frame,
    context_breakdown_chart,
    pressure_overview_chart,
    pressure_timeline_chart,
)


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
