"""Altair chart builders for the dashboard (pure: DataFrames in, charts out).

- `pressure_overview_chart`: the population as a binned heatmap (cells counted
  by the database, see yuxi_dash.store.overview) with the threads above the
  points floor drawn one by one, coloured by agent, the 0.85 suggestion line
  and the 1.0 threshold. Clicking a point selects it (selection `pick`).
- `pressure_timeline_chart`: one thread's summary pressure and context usage
  over time, rules at 0.85 and 1.0, markers for automatic / manual compressions.
- `context_breakdown_chart`: the next model input as one stacked bar by part, summing to
  the next input tokens every page shows (`usage.next_input_tokens`; what the dashboard
  cannot break down is its own part), and `next_input_caption` saying what they hold.
Tooltips show text made by `yuxi_dash.wording`; a count axis or legend has whole ticks only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import altair as alt
import pandas as pd

from yuxi_dash.store.overview import POINTS_FLOOR
from yuxi_dash.ui.page_text import MarkdownSafe, md
from yuxi_dash.usage import SUGGESTION_LABEL, next_input_tokens
from yuxi_dash.usage import SUGGESTION_RATIO as SUGGESTION_LINE
from yuxi_dash.wording import count, pct, stamp

THRESHOLD_LINE = 1.0
PICK = "pick"  # name of the point selection on the overview chart
POINTS_LABEL = f"{POINTS_FLOOR:.0%}"  # "75%": the overview draws threads from here up as points
# Time-axis labels on a 24-hour clock, in UTC, as precise as the tick needs: "Dec 01" at
# midnight, "00:30" within a day, "00:30:15" between minutes (Vega's default is 12-hour,
# "12:30" with no AM/PM). A Vega expression: datum.value is the tick's time in ms.
TIME_AXIS_LABELS = (
    "utcFormat(datum.value, utcseconds(datum.value) ? '%H:%M:%S'"
    " : (utchours(datum.value) || utcminutes(datum.value)) ? '%H:%M' : '%b %d')"
)

BREAKDOWN_PARTS = (
    "system",
    "tools",
    "summary",
    "messages",
    "tool_results",
    "not_broken_down",
    "compressed_away",
)
BREAKDOWN_LABELS = {
    "system": "System prompt",
    "tools": "Tool schemas",
    "summary": "Summary",
    "messages": "Messages",
    "tool_results": "Tool results",
    "not_broken_down": "Not broken down (system prompt, tool schemas, …)",
    "compressed_away": "Compressed away (not sent)",
}


def count_axis(title: str | None = None, **options: object) -> alt.Axis:
    """An axis of counts (tokens, threads, facts): whole ticks only (never "0.5 facts"),
    with separators. ``title``: the axis title (none given: the field's)."""
    if title is not None:
        options["title"] = title
    return alt.Axis(tickMinStep=1, format=",d", **options)  # type: ignore[arg-type]


def count_legend(title: str | None = None, **options: object) -> alt.Legend:
    """A colour legend of counts: whole ticks only, with separators."""
    if title is not None:
        options["title"] = title
    return alt.Legend(tickMinStep=1, format=",d", **options)  # type: ignore[arg-type]


_SOURCE_LABELS = {
    "auto_compaction": "automatic compression",
    "manual_compression": "manual compression",
}


def _rule(y: float, color: str, label: str, *, label_at_x: float | None = None) -> alt.LayerChart:
    """A dashed horizontal line with its label (at the left edge, or right-aligned at `label_at_x`)."""
    frame = pd.DataFrame({"y": [y], "label": [label]})
    line = (
        alt.Chart(frame)
        .mark_rule(color=color, strokeDash=[6, 4], strokeWidth=1.5)
        .encode(y="y:Q", tooltip=[alt.Tooltip("label:N", title="Line")])
    )
    left = label_at_x is None
    text = (
        alt.Chart(frame)
        .mark_text(
            align="left" if left else "right",
            dx=4 if left else -4,
            dy=-6,
            color=color,
            fontSize=11,
            fontWeight="bold",
        )
        .encode(y="y:Q", x=alt.value(0) if left else alt.datum(label_at_x), text="label:N")
    )
    return line + text


def pressure_overview_chart(heatmap: pd.DataFrame, points: pd.DataFrame) -> alt.LayerChart:
    """Heatmap cells (x0, x1, y0, y1, threads) under points (one row per thread).

    Tooltips show text made by `yuxi_dash.wording`, so a pressure reads as it does
    everywhere else (the browser would round halves its own way).
    """
    heatmap = heatmap.assign(
        **{f"{edge}_text": [pct(v) for v in heatmap[edge]] for edge in ("x0", "x1", "y0", "y1")},
        threads_text=[count(v) for v in heatmap["threads"]],
    )
    points = points.assign(
        pressure_text=[pct(v) for v in points["summary_pressure_ratio"]],
        usage_text=[pct(v) for v in points["context_usage_ratio"]],
        next_text=[count(next_input_tokens(r)) for r in points.to_dict("records")],
        trigger_text=[count(v) for v in points["summary_trigger_tokens"]],
    )
    x_scale = alt.Scale(domain=[0, 1])
    y_top = max(1.2, float(heatmap["y1"].max()) if not heatmap.empty else 0.0)
    if not points.empty:
        y_top = max(y_top, float(points["summary_pressure_ratio"].max()) + 0.05)
    y_scale = alt.Scale(domain=[0, round(y_top, 2)])
    cells = (
        alt.Chart(heatmap)
        .mark_rect(opacity=0.85)
        .encode(
            x=alt.X("x0:Q", title="Context usage ratio", scale=x_scale, axis=alt.Axis(format="%")),
            x2="x1:Q",
            y=alt.Y(
                "y0:Q", title="Summary pressure ratio", scale=y_scale, axis=alt.Axis(format="%")
            ),
            y2="y1:Q",
            color=alt.Color(
                "threads:Q",
                legend=count_legend("Threads per cell"),
                scale=alt.Scale(scheme="greys", type="log"),
            ),
            tooltip=[
                alt.Tooltip("threads_text:N", title="Threads"),
                alt.Tooltip("x0_text:N", title="Usage from"),
                alt.Tooltip("x1_text:N", title="Usage to"),
                alt.Tooltip("y0_text:N", title="Pressure from"),
                alt.Tooltip("y1_text:N", title="Pressure to"),
            ],
        )
    )
    pick = alt.selection_point(name=PICK, fields=["thread_id"], on="click", empty=False)
    dots = (
        alt.Chart(points)
        .mark_circle(size=70, opacity=0.9, stroke="white", strokeWidth=0.5)
        .encode(
            x=alt.X("context_usage_ratio:Q", scale=x_scale),
            y=alt.Y("summary_pressure_ratio:Q", scale=y_scale),
            color=alt.Color("agent_slug:N", title="Agent", scale=alt.Scale(scheme="tableau10")),
            size=alt.condition(pick, alt.value(180), alt.value(70)),
            tooltip=[
                alt.Tooltip("thread_id:N", title="Thread"),
                alt.Tooltip("user_id:N", title="User"),
                alt.Tooltip("agent_slug:N", title="Agent"),
                alt.Tooltip("origin:N", title="Thread of"),
                alt.Tooltip("pressure_text:N", title="Summary pressure"),
                alt.Tooltip("usage_text:N", title="Context usage"),
                alt.Tooltip("next_text:N", title="Next input tokens"),
                alt.Tooltip("trigger_text:N", title="Summary threshold"),
            ],
        )
        .add_params(pick)
    )
    layers = [
        cells,
        dots,
        _rule(
            SUGGESTION_LINE,
            "#d97706",
            f"{SUGGESTION_LABEL} — compression suggested",
            label_at_x=1.0,
        ),
        _rule(THRESHOLD_LINE, "#dc2626", "100% — summary threshold", label_at_x=1.0),
    ]
    return alt.layer(*layers).resolve_scale(color="independent").properties(height=460)


_RATIO_OF = {  # the two figures each series divides, as its tooltip shows them
    "Summary pressure": ["next_llm_input_tokens", "summary_trigger_tokens"],
    "Context usage": ["llm_input_tokens", "context_window"],
}


def _ratio_of(row: Mapping[str, object]) -> str:
    """ "18,745 ÷ 8,192": the figures a ratio was computed from, when the row has them."""
    top, bottom = (row.get(c) for c in _RATIO_OF.get(str(row.get("series")), ["", ""]))
    if top is None or bottom is None:
        return "–"
    return f"{count(top)} ÷ {count(bottom)}"  # type: ignore[arg-type]


def pressure_timeline_chart(timeline: pd.DataFrame) -> alt.LayerChart:
    """timeline: measured_at, summary_pressure_ratio, context_usage_ratio, source."""
    figures = [c for c in _RATIO_OF["Summary pressure"] + _RATIO_OF["Context usage"]]
    long = timeline.melt(
        id_vars=["measured_at", "source", *[c for c in figures if c in timeline.columns]],
        value_vars=["summary_pressure_ratio", "context_usage_ratio"],
        var_name="series",
        value_name="ratio",
    )
    long["series"] = long["series"].map(
        {"summary_pressure_ratio": "Summary pressure", "context_usage_ratio": "Context usage"}
    )
    long["at_text"] = [stamp(v) for v in long["measured_at"]]
    long["ratio_text"] = [pct(v) for v in long["ratio"]]
    long["of_text"] = [_ratio_of(row) for row in long.to_dict("records")]
    lines = (
        alt.Chart(long)
        .mark_line(point=False, interpolate="step-after")
        .encode(
            x=alt.X(
                "measured_at:T",
                title="Measured at (UTC)",
                scale=alt.Scale(type="utc"),
                axis=alt.Axis(labelExpr=TIME_AXIS_LABELS),
            ),
            y=alt.Y("ratio:Q", title="Ratio", axis=alt.Axis(format="%")),
            color=alt.Color("series:N", title="Series"),
            tooltip=[
                alt.Tooltip("at_text:N", title="At"),
                alt.Tooltip("series:N", title="Series"),
                alt.Tooltip("ratio_text:N", title="Ratio"),
                alt.Tooltip("of_text:N", title="Tokens"),
            ],
        )
    )
    events = timeline[timeline["source"].isin(list(_SOURCE_LABELS))].copy()
    events["event"] = events["source"].map(_SOURCE_LABELS)
    events["at_text"] = [stamp(v) for v in events["measured_at"]]
    events["pressure_text"] = [pct(v) for v in events["summary_pressure_ratio"]]
    markers = (
        alt.Chart(events)
        .mark_point(size=140, filled=True)
        .encode(
            x=alt.X("measured_at:T", scale=alt.Scale(type="utc")),
            y="summary_pressure_ratio:Q",
            shape=alt.Shape(
                "event:N",
                title="Compression",
                scale=alt.Scale(
                    domain=list(_SOURCE_LABELS.values()), range=["triangle-down", "diamond"]
                ),
            ),
            color=alt.value("#111827"),
            tooltip=[
                alt.Tooltip("at_text:N", title="At"),
                alt.Tooltip("event:N", title="Event"),
                alt.Tooltip("pressure_text:N", title="Pressure after"),
            ],
        )
    )
    # LayerChart itself, not alt.layer(): no layer here has a facet channel to hoist,
    # and alt.layer() is typed to maybe return a FacetChart.
    return alt.LayerChart(
        layer=[
            lines,
            markers,
            _rule(SUGGESTION_LINE, "#d97706", SUGGESTION_LABEL),
            _rule(THRESHOLD_LINE, "#dc2626", "100%"),
        ]
    ).properties(height=320)


SENT_ROW = "Next model input"
AWAY_ROW = "Compressed away"


NOT_MEASURED = "not measured"


def counted_tokens(breakdown: Mapping[str, int]) -> int:
    """The dashboard's own count of the next input: every sent part it broke down."""
    return sum(int(breakdown.get(p, 0)) for p in BREAKDOWN_PARTS if p in _COUNTED)


_COUNTED = ("system", "tools", "summary", "messages", "tool_results")


def breakdown_frame(
    breakdown: Mapping[str, int],
    unmeasured: Sequence[str] = (),
    *,
    next_input: int | None = None,
) -> pd.DataFrame:
    """The breakdown dict as rows in a fixed order, zero parts left in (so every part is listed).

    ``next_input``: the next input tokens every page shows (`usage.next_input_tokens`); what
    it holds beyond the dashboard's own count is the "not broken down" part, so the sent
    parts add up to it. ``row`` says which bar a part belongs to: what the next call is sent,
    or what compression took out of it; ``tokens_text`` is the count as every page writes it,
    or "not measured" for a part that was not counted (an agent's unknown system prompt).
    """
    rest = max(0, int(next_input) - counted_tokens(breakdown)) if next_input is not None else 0
    tokens = [rest if p == "not_broken_down" else int(breakdown.get(p, 0)) for p in BREAKDOWN_PARTS]
    return pd.DataFrame(
        {
            "part": [BREAKDOWN_LABELS[p] for p in BREAKDOWN_PARTS],
            "tokens": tokens,
            "measured": [p not in unmeasured for p in BREAKDOWN_PARTS],
            "tokens_text": [
                count(t) if p not in unmeasured else NOT_MEASURED
                for p, t in zip(BREAKDOWN_PARTS, tokens, strict=True)
            ],
            "order": list(range(len(BREAKDOWN_PARTS))),
            "sent": [p != "compressed_away" for p in BREAKDOWN_PARTS],
            "row": [SENT_ROW if p != "compressed_away" else AWAY_ROW for p in BREAKDOWN_PARTS],
        }
    )


def context_breakdown_chart(
    breakdown: Mapping[str, int], unmeasured: Sequence[str] = (), *, next_input: int | None = None
) -> alt.Chart:
    """Two horizontal bars on one token scale: the next model input stacked by part, and
    below it what compression took out (summarized messages, offloaded tool output).

    Compressed-away tokens are not part of the next input, so they get their own bar
    instead of extending the input's; every legend label is shown whole.
    """
    frame = breakdown_frame(breakdown, unmeasured, next_input=next_input)
    labels = [BREAKDOWN_LABELS[p] for p in BREAKDOWN_PARTS]
    return (
        alt.Chart(frame)  # zero parts too: an empty row still says "nothing compressed away"
        .mark_bar()
        .encode(
            x=alt.X("sum(tokens):Q", stack="zero", axis=count_axis("Tokens")),
            y=alt.Y(
                "row:N",
                title=None,
                sort=[SENT_ROW, AWAY_ROW],
                axis=alt.Axis(labelLimit=0, labelFontSize=12, labelPadding=6),
            ),
            color=alt.Color(
                "part:N",
                title=None,
                legend=alt.Legend(orient="right", labelLimit=0, symbolType="square"),
                sort=labels,
                scale=alt.Scale(
                    domain=labels,
                    range=[
                        "#64748b",
                        "#a78bfa",
                        "#f59e0b",
                        "#3b82f6",
                        "#10b981",
                        "#94a3b8",
                        "#cbd5e1",
                    ],
                ),
            ),
            order=alt.Order("order:Q"),
            tooltip=[
                alt.Tooltip("part:N", title="Part"),
                alt.Tooltip("tokens_text:N", title="Tokens"),
            ],
        )
        .properties(height=alt.Step(34))
    )


def next_input_caption(
    row: Mapping[str, Any],
    counted: int,
    *,
    source: str | None = None,
    measured_at: datetime | str | None = None,
    unmeasured: Sequence[str] = ("system", "tools"),
) -> MarkdownSafe:
    """What the next input tokens hold and how they reconcile with the dashboard's own count.

    ``row``: the thread's row (its `usage.next_input_tokens`, threshold and pressure);
    ``counted``: the dashboard's count of the model view (`counted_tokens`), the compress
    preview's "before"; ``source`` and ``measured_at``: the newest usage snapshot's.
    """
    total = next_input_tokens(row)
    trigger = int(row.get("summary_trigger_tokens") or 0)
    pressure = (
        md(
            "Summary pressure is next input tokens ÷ summary threshold: {} ÷ {} = {}. ",
            count(total),
            count(trigger),
            pct(row.get("summary_pressure_ratio")),
        )
        if trigger
        else md("No summary threshold is known for this thread. ")
    )
    when = md(" ({})", stamp(measured_at)) if measured_at is not None else ""
    if source == "manual_compression":
        held = md(
            "The {} next input tokens are this dashboard's count when it compressed the "
            "thread{}: the summary and the messages it kept; the agent adds its system prompt "
            "and tool schemas at its next call. ",
            count(total),
            when,
        )
    else:
        held = md(
            "The {} next input tokens are the agent's own count at its last model call{}: its "
            "system prompt and tool schemas, the summary, the messages and tool results, and "
            "its answer. ",
            count(total),
            when,
        )
    rest = total - int(counted)
    unseen = (
        "its system prompt and tool schemas, which the dashboard does not know, and long "
        "tool-call arguments the agent counted in full (the next call gets them shortened)"
        if unmeasured
        else "long tool-call arguments the agent counted in full (the next call gets them "
        "shortened)"
    )
    if rest > 0:
        split = md(
            "The dashboard counts {} of them in the parts below (the compress preview's "
            "“before”); the other {} are not broken down: {}.",
            count(counted),
            count(rest),
            unseen,
        )
    elif rest < 0:
        split = md(
            "The dashboard counts {} in the parts below (the compress preview's “before”): {} "
            "more, from messages added since.",
            count(counted),
            count(-rest),
        )
    else:
        split = md("The dashboard counts all of them in the parts below.")
    return MarkdownSafe(pressure + held + split)
