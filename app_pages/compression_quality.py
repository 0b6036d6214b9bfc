"""Compression quality: what the fleet's compressions kept in view, per day and per agent.

Reads through `ui.compressions.loaders` (every figure counted by the database,
`store.compression_quality`): compressions and tokens saved per day, the share of cited
evidence kept in view per agent, and the compressions that lost or hid the most cited
evidence, each linking to its thread's Compressions tab. Filters: agent, automatic or
manual, ours or the attached platform's, and a window.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import streamlit as st

from yuxi_dash.store.compression_quality import AGENTS_SHOWN, WORST_SHOWN
from yuxi_dash.store.compressions import TRIGGER_AUTOMATIC, TRIGGER_MANUAL
from yuxi_dash.store.origin import ATTACHED_NAME, OWN_NAME
from yuxi_dash.ui.compressions import loaders
from yuxi_dash.ui.compressions.quality_charts import (
    kept_per_agent_chart,
    per_day_chart,
    worst_table,
)
from yuxi_dash.ui.identity import require_actor
from yuxi_dash.ui.page_text import MarkdownSafe, count, md, pct

WINDOWS = {
    "last 7 days": timedelta(days=7),
    "last 30 days": timedelta(days=30),
    "last 90 days": timedelta(days=90),
    "any time": None,
}
ORIGIN_CHOICES = {"ours": OWN_NAME, "attached platform": ATTACHED_NAME}
WORST_COLUMNS = {  # widths in pixels: every column fits at 1440 px with the sidebar open
    "open": st.column_config.LinkColumn("", display_text="open", width=44),
    "at": st.column_config.TextColumn("At", width=150),
    "thread": st.column_config.TextColumn("Thread", width=110),
    "agent": st.column_config.TextColumn("Agent", width=90),
    "trigger": st.column_config.TextColumn("Trigger", width=110),
    "origin": st.column_config.TextColumn("Thread of", width=90),
    "cited lost": st.column_config.NumberColumn(
        "Cited lost", help="cited items in no saved file the summary points to", width=76
    ),
    "cited hidden": st.column_config.NumberColumn(
        "Cited hidden",
        help="cited items out of the model's view, recoverable from a saved file",
        width=88,
    ),
    "cited kept": st.column_config.TextColumn(
        "Cited kept", help="cited items kept in the model's view", width=84
    ),
    "tokens": st.column_config.TextColumn("Tokens", width=110),
}

require_actor()
st.title("Compression quality")

agents = loaders.quality_agents()
if not agents:
    st.info("No compression recorded yet.")
    st.stop()

with st.container(horizontal=True):
    agent = st.selectbox("Agent", agents, index=None, placeholder="all agents", key="quality_agent")
    trigger = st.selectbox(
        "Trigger",
        [TRIGGER_AUTOMATIC, TRIGGER_MANUAL],
        index=None,
        placeholder="automatic and manual",
        key="quality_trigger",
    )
    origin = st.selectbox(
        "Thread of",
        list(ORIGIN_CHOICES),
        index=None,
        placeholder="ours and attached",
        key="quality_origin",
    )
    window = st.selectbox("Window", list(WINDOWS), index=1, key="quality_window")

delta = WINDOWS[window]
since = None
if delta is not None:  # rounded to the minute so the cache key is stable within it
    since = (datetime.now(UTC) - delta).replace(second=0, microsecond=0)
data = loaders.compression_quality(
    agent=agent,
    trigger=trigger,
    origin=ORIGIN_CHOICES[origin] if origin else None,
    since=since,
)
totals = data["totals"]
if not totals["compressions"]:
    st.info("No compressions match these filters.")
    st.stop()

cols = st.columns(4)
cols[0].metric("Compressions", count(totals["compressions"]))
cols[1].metric(
    "Tokens saved", count(totals["tokens_saved"]), help="tokens before minus tokens after"
)
cols[2].metric(
    "Cited kept in view",
    pct(totals["cited_kept_share"]),
    help="of every evidence item an assistant message cited in the summarized messages, "
    "the share the next model call still sees",
)
cols[3].metric(
    "Lost cited evidence",
    count(totals["losing"]),
    help="compressions that left a cited item in no saved file the summary points to",
)
cited = totals["cited_total"]
st.caption(
    md(
        "{} of {} cited items kept in view, {} recoverable from a saved file, {} lost.",
        count(totals["cited_visible"]),
        count(cited),
        count(cited - totals["cited_visible"] - totals["cited_lost"]),
        count(totals["cited_lost"]),
    )
)

days, per_agent = st.columns([3, 2])
with days:
    st.subheader("Per day")
    st.altair_chart(per_day_chart(data["days"]), width="stretch")
with per_agent:
    st.subheader("Cited kept in view, per agent")
    shown = data["agents"]
    with_cited = int((shown["cited_total"] > 0).sum()) if not shown.empty else 0
    if with_cited:
        st.altair_chart(kept_per_agent_chart(shown), width="stretch")
    notes = []
    if data["agents_total"] > len(shown):
        notes.append(
            md("the {} agents with the most compressions of {}", AGENTS_SHOWN, data["agents_total"])
        )
    if with_cited < len(shown):
        notes.append(md("{} with nothing cited left out", len(shown) - with_cited))
    if notes:
        st.caption(md("Shown: {}.", MarkdownSafe("; ".join(notes))))

st.subheader("Lost or hid the most cited evidence")
worst = data["worst"]
if worst.empty:
    st.caption("No compression here took cited evidence out of view.")
else:
    st.caption(
        md(
            "Most cited items lost first, then most hidden (out of view, recoverable); at most "
            "{}. Open one to see its ledger in the thread's Compressions tab.",
            WORST_SHOWN,
        )
    )
    st.dataframe(worst_table(worst), hide_index=True, width="stretch", column_config=WORST_COLUMNS)
