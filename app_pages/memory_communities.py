"""Communities (only where `graphiti-communities-enabled` is on): members, summaries, rebuild decision."""

from __future__ import annotations

import streamlit as st

from yuxi_dash.ui import memory as ui
from yuxi_dash.ui.page_text import literal, md, stamp
from yuxi_dash.ui.tables import draw_records

actor, access = ui.open_memory_page("Communities", "communities")
data = ui.load_communities(access)

rebuild = data["rebuild"]
if rebuild["would_run"]:
    st.success(md("Rebuild {}", rebuild["message"]))
else:
    st.info(md("Rebuild {}", rebuild["message"]))
st.caption(
    md(
        "{} episodes, {} since the last build ({}); threshold {}.",
        rebuild["episodes"],
        rebuild["new_episodes"],
        stamp(rebuild["last_built_at"], missing="never"),
        rebuild["threshold"],
    )
)
if not data["communities"]:
    st.info("This user has no communities yet.")
    st.stop()
draw_records(
    data["communities"],
    ["name", "members", "summary", "created_at"],
    widths={"name": 230, "members": 80, "summary": "large", "created_at": 140},
)
for community in data["communities"]:
    with st.expander(md("{} — {} members", community["name"], community["members"])):
        st.markdown(literal(community["summary"]))
        st.markdown(literal(", ".join(community["member_names"])))
