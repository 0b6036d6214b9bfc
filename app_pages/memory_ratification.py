"""Ratification: facts by status; tentative facts with age, hit counts and the next pass's action.

Hit counters live on YUXI_DASH_REDIS_URL, or on the FalkorDB server when that is unset: the
page says which (`hits_store`).
"""

from __future__ import annotations

import streamlit as st

from yuxi_dash.memory.views.ratification import hits_store
from yuxi_dash.ui import memory as ui
from yuxi_dash.ui.page_text import code, md
from yuxi_dash.ui.tables import draw_records

actor, access = ui.open_memory_page("Ratification", "ratification")
data = ui.load_ratification(access)

st.altair_chart(
    ui.count_bar_chart(data["by_status"], "status", title="Facts by status"),
    width="stretch",
)
nxt = data["next_pass"]
a, b, c = st.columns(3)
a.metric("Would promote", nxt["promote"], help="tentative with at least one hit")
b.metric("Would supersede", nxt["supersede"], help="no hits and older than 30 days")
c.metric("Would leave", nxt["leave"])
store = hits_store(access.settings.redis_url)
st.caption(
    md(
        "Hits from {}, key {} (30-day TTL).",
        store,
        code(f"mem:hits:{access.user_id}:<edge uuid>"),
    )
)
draw_records(
    data["tentative"],
    [
        "action",
        "reason",
        "hits",
        "age_days",
        "source",
        "name",
        "target",
        "fact",
        "source_kind",
        "created_at",
    ],
    helps={"hits": md("reads of this fact counted in the last 30 days, on {}", store)},
)
