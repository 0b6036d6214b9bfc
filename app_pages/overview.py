"""Pressure overview: KPIs, the population heatmap with the hottest threads as points, filters.

Reads through yuxi_dash.ui.loaders (aggregates computed in SQL by
yuxi_dash.store.overview); clicking a point opens that thread's detail. The
hottest-thread picker starts on the hottest thread that can be compressed and
marks the others (`store.origin`). "Crossing within the hour" lists the threads forecast
to cross 100% or 85% of their summary threshold within the hour, soonest first
(`store.thread_list.crossing_within`), and says how many it could not forecast and why.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import pandas as pd
import streamlit as st

from yuxi_dash.ui import loaders
from yuxi_dash.ui.charts import PICK, POINTS_LABEL, pressure_overview_chart
from yuxi_dash.ui.costs.panels import draw_spend_panel
from yuxi_dash.ui.identity import require_actor
from yuxi_dash.ui.page_text import (
    PERCENT_FORMAT,
    busy_label,
    count,
    crossing_text,
    md,
    pct,
    percent_value,
)
from yuxi_dash.usage import SUGGESTION_LABEL

ACTIVITY_WINDOWS = {
    "any time": None,
    "last hour": timedelta(hours=1),
    "last 24 hours": timedelta(hours=24),
    "last 7 days": timedelta(days=7),
    "last 30 days": timedelta(days=30),
}
CROSSING_WITHIN = timedelta(hours=1)  # "Crossing within the hour"

require_actor()
st.title("Pressure overview")

choices = loaders.filter_choices()
with st.container(horizontal=True):
    agent = st.selectbox("Agent", choices["agents"], index=None, placeholder="all agents")
    user_id = st.selectbox("User", choices["users"], index=None, placeholder="all users")
    status = st.selectbox(  # deleted threads too, so every count can be reconciled
        "Status",
        [*choices["statuses"], *(["deleted"] if "deleted" not in choices["statuses"] else [])],
        index=None,
        placeholder="active + archived",
        help="Deleted threads are counted only when you choose deleted.",
    )
    window = st.selectbox("Last activity", list(ACTIVITY_WINDOWS), index=0)
    auto_refresh = st.toggle("Auto-refresh (30 s)", value=False)

since_delta = ACTIVITY_WINDOWS[window]
active_since = None
if since_delta is not None:  # rounded to the minute so the cache key is stable within it
    active_since = (datetime.now(UTC) - since_delta).replace(second=0, microsecond=0)


@st.fragment(run_every=30 if auto_refresh else None)
def pressure_panel() -> None:
    data = loaders.pressure_overview(
        agent=agent, user_id=user_id, status=status, active_since=active_since
    )
    kpis = data["kpis"]
    if not kpis["threads"]:
        st.info("No threads match these filters. Seed the demo with `yuxi-dash demo`.")
        return
    cols = st.columns(6)
    cols[0].metric("Threads", count(kpis["threads"]))
    cols[1].metric(md("At or over {}", SUGGESTION_LABEL), count(kpis["at_or_over_suggestion"]))
    cols[2].metric("Over 100%", count(kpis["over_threshold"]))
    cols[3].metric(  # a share here; thread detail shows the same name as yes/no
        "Summary active",
        pct(kpis["summary_active_share"]),
        help="Share of these threads whose context already holds a summary of earlier "
        "messages (thread detail shows yes or no for one thread).",
    )
    cols[4].metric("Compressions, 24 h", count(kpis["compressions"]))
    cols[5].metric(
        "Auto / manual, 24 h",
        f"{count(kpis['compressions_auto'])} / {count(kpis['compressions_manual'])}",
    )
    if status is None:  # so this count and a count of every thread can be reconciled
        deleted = data["deleted"]
        if deleted:
            st.caption(
                md(
                    "{} active and archived threads; {} deleted {} not counted (choose the "
                    "status deleted to see {}).",
                    count(kpis["threads"]),
                    count(deleted),
                    "thread is" if deleted == 1 else "threads are",
                    "it" if deleted == 1 else "them",
                )
            )
    points = data["points"]
    if data["points_total"] > len(points):
        st.caption(
            md(
                "Drawing the {:,} highest of {:,} threads at or above {} as points; every "
                "thread is counted in the heatmap. Points start below the {} line so the "
                "threads approaching it show too.",
                len(points),
                data["points_total"],
                POINTS_LABEL,
                SUGGESTION_LABEL,
            )
        )
    else:
        st.caption(
            md(
                "Grey cells: every thread, counted per cell. Points: threads at or above {} "
                "summary pressure, coloured by agent; they start below the {} line so the "
                "threads approaching it show too. Click a point to open the thread.",
                POINTS_LABEL,
                SUGGESTION_LABEL,
            )
        )
    event = st.altair_chart(
        pressure_overview_chart(data["heatmap"], points),
        on_select="rerun",
        selection_mode=PICK,
        key="pressure_chart",
        width="stretch",
    )
    picked = (event.get("selection") or {}).get(PICK) or [] if event else []
    if picked and picked[0].get("thread_id"):
        st.switch_page(
            "app_pages/thread_detail.py", query_params={"thread": picked[0]["thread_id"]}
        )
    if not points.empty:
        pressure_of = dict(zip(points["thread_id"], points["summary_pressure_ratio"], strict=True))
        top = points.head(50)
        ids = top["thread_id"].tolist()
        blocked = loaders.compress_blockers(
            list(zip(ids, top["agent_slug"], top["origin"] != "ours", strict=True))
        )
        hottest = st.selectbox(
            "Or open one of the hottest threads",
            ids,
            index=next((i for i, t in enumerate(ids) if t not in blocked), 0),
            format_func=lambda t: (
                f"{t} · {pct(pressure_of[t])}" + (" · cannot be compressed" if t in blocked else "")
            ),
            key="overview_open",
            help="It starts on the hottest thread that can be compressed.",
        )
        if hottest in blocked:
            st.caption(md("{} cannot be compressed: {}.", hottest, blocked[hottest]))
        st.page_link(
            "app_pages/thread_detail.py",
            label=md("Open {}", hottest),
            icon=":material/open_in_new:",
            query_params={"thread": hottest},
        )
    crossing_panel()


def crossing_panel() -> None:
    """The threads forecast to cross 100% (then 85%) within the hour, soonest first."""
    st.subheader("Crossing within the hour")
    data = loaders.crossing_soon(
        int(CROSSING_WITHIN.total_seconds()), agent=agent, user_id=user_id, status=status
    )
    rows = data["rows"]
    if not rows:
        st.info("No thread is forecast to cross 85% or 100% of its summary threshold this hour.")
    else:
        st.dataframe(
            pd.DataFrame(
                {
                    "open": [
                        f"thread_detail?thread={quote(r['thread_id'], safe='')}" for r in rows
                    ],
                    "thread": [r["thread_id"] for r in rows],
                    "agent": [r["agent_slug"] for r in rows],
                    "pressure": [percent_value(r["summary_pressure_ratio"]) for r in rows],
                    "100% in": [
                        crossing_text(r["turns_to_100"], r["seconds_to_100"]) for r in rows
                    ],
                    "85% in": [crossing_text(r["turns_to_85"], r["seconds_to_85"]) for r in rows],
                    "busy": [busy_label(r["busy_reason"]) for r in rows],
                }
            ),
            hide_index=True,
            width="stretch",
            key="crossing_table",
            column_config={
                "open": st.column_config.LinkColumn("", display_text="open", width=44),
                "pressure": st.column_config.ProgressColumn(
                    "Summary pressure", format=PERCENT_FORMAT, min_value=0.0, max_value=100.0
                ),
            },
        )
    st.caption(
        md(
            "Forecast from each thread's growth since its last compression, at its recorded "
            "pace: turns from its newest model call, minutes from now (the time since that call "
            "is taken off; idle time does not change the turns). Those crossing 100% come first. "
            "{} {} below 100% and active in the last hour {} forecast{}; threads already over "
            "100% are counted above.",
            count(data["forecast"]),
            "thread" if data["forecast"] == 1 else "threads",
            "was" if data["forecast"] == 1 else "were",
            md(" (only the {} most pressured: more were active)", count(data["forecast"]))
            if data["more"]
            else "",
        )
    )
    left_out = data["left_out"]
    if left_out:
        total = sum(left_out.values())
        st.caption(
            md(
                "Not listed: {} {} with no forecast ({}).",
                count(total),
                "thread" if total == 1 else "threads",
                "; ".join(f"{note}: {count(n)}" for note, n in sorted(left_out.items())),
            )
        )


pressure_panel()
draw_spend_panel()  # model spend per agent and day (`ui.costs`)
