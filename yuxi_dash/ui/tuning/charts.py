"""The tuning lab's chart: one thread's model input tokens per turn under both settings.

Pure: a thread entry of `tuning.report.thread_entry` in, an Altair chart out. Two step
lines (in force, proposed), a point on each turn a compression (a summary) or an
offload-only pass ran before, and each side's trigger as a dashed rule. Turns are model
calls numbered from 1, as in the entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import altair as alt
import pandas as pd

from yuxi_dash.ui.charts import count_axis

SIDE_LABELS = {"current": "In force", "proposed": "Proposed"}
SIDE_COLORS = ["#2563eb", "#d97706"]


def turn_frame(entry: Mapping[str, Any]) -> pd.DataFrame:
    """turn, side, input tokens, and what ran before that turn (none, offload, summary)."""
    rows = []
    for side, label in SIDE_LABELS.items():
        figures = entry[side]
        summarized = set(figures["compression_turns"])
        offloaded = set(figures["offload_turns"])
        for turn, tokens in enumerate(figures["input_tokens_per_turn"], start=1):
            event = "summary" if turn in summarized else "offload" if turn in offloaded else ""
            rows.append({"turn": turn, "side": label, "tokens": tokens, "event": event})
    return pd.DataFrame(rows, columns=["turn", "side", "tokens", "event"])


def turns_chart(entry: Mapping[str, Any], triggers: Mapping[str, int]) -> alt.LayerChart:
    """The thread's input tokens per turn, both sides; ``triggers``: each side's in tokens."""
    frame = turn_frame(entry)
    color = alt.Color(
        "side:N",
        title="Settings",
        scale=alt.Scale(domain=list(SIDE_LABELS.values()), range=SIDE_COLORS),
    )
    tooltip = [
        alt.Tooltip("turn:Q", title="Turn"),
        alt.Tooltip("side:N", title="Settings"),
        alt.Tooltip("tokens:Q", title="Input tokens", format=","),
        alt.Tooltip("event:N", title="Before this turn"),
    ]
    lines = (
        alt.Chart(frame)
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X("turn:Q", title="Turn (model call)", axis=count_axis()),
            y=alt.Y("tokens:Q", title="Model input tokens", axis=count_axis()),
            color=color,
            tooltip=tooltip,
        )
    )
    events = frame[frame["event"] != ""]
    marks = (
        alt.Chart(events)
        .mark_point(size=90)
        .encode(
            x="turn:Q",
            y="tokens:Q",
            color=color,
            shape=alt.Shape(
                "event:N",
                title="Before this turn",
                scale=alt.Scale(domain=["offload", "summary"], range=["circle", "diamond"]),
            ),
            tooltip=tooltip,
        )
    )
    rules = pd.DataFrame(
        [{"side": SIDE_LABELS[side], "tokens": tokens} for side, tokens in triggers.items()]
    )
    rule = alt.Chart(rules).mark_rule(strokeDash=[4, 4]).encode(y="tokens:Q", color=color)
    return alt.LayerChart(layer=[lines, marks, rule]).properties(height=300)
