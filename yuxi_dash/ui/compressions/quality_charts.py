"""The Compression quality page's charts and table (pure: frames in, charts and frames out).

- `per_day_chart`: compressions per UTC day, stacked automatic / manual, and the tokens
  they saved below it, on one day axis.
- `kept_per_agent_chart`: the share of cited evidence each agent's compressions kept in
  view, one bar per agent (agents with nothing cited are left out; the caption says so).
- `worst_table`: the compressions that lost or hid the most cited evidence, each with a
  link to its thread's Compressions tab.
Tooltips are text made by `yuxi_dash.wording`, as on the other pages.
"""

from __future__ import annotations

from urllib.parse import urlencode

import altair as alt
import pandas as pd

from yuxi_dash.store.compressions import TRIGGER_AUTOMATIC, TRIGGER_MANUAL
from yuxi_dash.ui.charts import count_axis
from yuxi_dash.ui.compressions.ledger_view import DETAIL_PAGE, kept_text
from yuxi_dash.wording import count, pct, stamp

TRIGGER_COLORS = {TRIGGER_AUTOMATIC: "#4c78a8", TRIGGER_MANUAL: "#f58518"}
WORST_COLUMNS = [
    "open",
    "at",
    "thread",
    "agent",
    "trigger",
    "origin",
    "cited lost",
    "cited hidden",
    "cited kept",
    "tokens",
]


def _days(frame: pd.DataFrame) -> pd.DataFrame:
    days = frame.copy()
    days["day"] = pd.to_datetime(days["day"].astype(str), utc=True)
    days["day_text"] = [moment.strftime("%Y-%m-%d") for moment in days["day"]]
    days["compressions_text"] = [count(n) for n in days["compressions"]]
    days["saved_text"] = [count(n) for n in days["tokens_saved"]]
    return days


def per_day_chart(frame: pd.DataFrame) -> alt.VConcatChart:
    """Compressions per day by trigger, then tokens saved per day."""
    days = _days(frame)
    x = alt.X("utcyearmonthdate(day):T", title="Day (UTC)", axis=alt.Axis(format="%b %d"))
    tooltip = [
        alt.Tooltip("day_text:N", title="Day (UTC)"),
        alt.Tooltip("trigger:N", title="Trigger"),
        alt.Tooltip("compressions_text:N", title="Compressions"),
        alt.Tooltip("saved_text:N", title="Tokens saved"),
    ]
    colors = alt.Scale(domain=list(TRIGGER_COLORS), range=list(TRIGGER_COLORS.values()))
    counted = (
        alt.Chart(days)
        .mark_bar()
        .encode(
            x=x,
            y=alt.Y("sum(compressions):Q", title="Compressions", axis=count_axis()),
            color=alt.Color("trigger:N", title="Trigger", scale=colors),
            tooltip=tooltip,
        )
        .properties(height=180)
    )
    saved = (
        alt.Chart(days)
        .mark_bar(color="#54a24b")
        .encode(
            x=x,
            y=alt.Y("sum(tokens_saved):Q", title="Tokens saved", axis=count_axis()),
            tooltip=tooltip,
        )
        .properties(height=140)
    )
    return alt.vconcat(counted, saved).resolve_scale(x="shared")


def kept_frame(agents: pd.DataFrame) -> pd.DataFrame:
    """The agents with cited evidence: their share kept in view, with text for the tooltip."""
    cited = agents[agents["cited_total"] > 0].copy()
    cited["kept"] = cited["cited_visible"] / cited["cited_total"]
    cited["kept_text"] = [pct(share) for share in cited["kept"]]
    cited["of_text"] = [
        kept_text(v, t) for v, t in zip(cited["cited_visible"], cited["cited_total"], strict=True)
    ]
    cited["lost_text"] = [count(n) for n in cited["cited_lost"]]
    cited["compressions_text"] = [count(n) for n in cited["compressions"]]
    return cited


def kept_per_agent_chart(agents: pd.DataFrame) -> alt.LayerChart:
    """One bar per agent with cited evidence: the share of it kept in view (0-100%)."""
    cited = kept_frame(agents)
    base = alt.Chart(cited).encode(
        y=alt.Y("agent_slug:N", title="Agent", sort="-x"),
        x=alt.X(
            "kept:Q",
            title="Cited evidence kept in view",
            scale=alt.Scale(domain=[0, 1]),
            axis=alt.Axis(format="%"),
        ),
        tooltip=[
            alt.Tooltip("agent_slug:N", title="Agent"),
            alt.Tooltip("kept_text:N", title="Kept in view"),
            alt.Tooltip("of_text:N", title="Cited items kept"),
            alt.Tooltip("lost_text:N", title="Cited items lost"),
            alt.Tooltip("compressions_text:N", title="Compressions"),
        ],
    )
    bars = base.mark_bar(color="#4c78a8")
    labels = base.mark_text(align="left", dx=4).encode(text="kept_text:N")
    return (bars + labels).properties(height=alt.Step(26))


def compression_link(thread_id: str, compression_id: int) -> str:
    """Thread detail's Compressions tab at this compression."""
    return f"{DETAIL_PAGE}?{urlencode({'thread': thread_id, 'compression': compression_id})}"


def worst_table(worst: pd.DataFrame) -> pd.DataFrame:
    """The worst compressions as the page's table shows them (text where a page formats)."""
    rows = [
        {
            "open": compression_link(str(r["thread_id"]), int(r["id"])),
            "at": stamp(r["at"]),
            "thread": str(r["thread_id"]),
            "agent": str(r["agent_slug"]),
            "trigger": f"{TRIGGER_MANUAL}, by {r['actor']}"
            if r["trigger"] == TRIGGER_MANUAL and r["actor"]
            else str(r["trigger"]),
            "origin": str(r["origin"]),
            "cited lost": int(r["cited_lost"]),
            "cited hidden": int(r["cited_hidden"]),
            "cited kept": kept_text(int(r["cited_visible"]), int(r["cited_total"])),
            "tokens": f"{count(r['before_tokens'])} → {count(r['after_tokens'])}",
        }
        for r in worst.to_dict("records")
    ]
    return pd.DataFrame(rows, columns=WORST_COLUMNS)
