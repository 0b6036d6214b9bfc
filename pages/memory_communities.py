"""Communities (only where `graphiti-communities-enabled` is on): members, summaries, rebuild decision."""

from __future__ import annotations

import streamlit as st

from yuxi_dash.ui import memory as ui
from yuxi_dash.ui.format import markdown_literal
from yuxi_dash.ui.tables import draw_records

actor, access = ui.open_memory_page("Communities", "communities")
data = ui.load_communities(access)

rebuild = data["rebuild"]
if rebuild["would_run"]:
    st.success(f"Rebuild {rebuild['message']}")
else:
    st.info(f"Rebuild {rebuild['message']}")
st.caption(
    f"{rebuild['episodes']} episodes, {rebuild['new_episodes']} since the last build "
    f"({rebuild['last_built_at'] or 'never'}); threshold {rebuild['threshold']}."
)
if not data["communities"]:
    st.info("This user has no communities yet.")
    st.stop()
draw_records(data["communities"], ["name", "members", "summary", "created_at"])
for community in data["communities"]:
    with st.expander(f"{community['name']} — {community['members']} members"):
        st.markdown(markdown_literal(community["summary"] or ""))
        st.markdown(markdown_literal(", ".join(community["member_names"])))
