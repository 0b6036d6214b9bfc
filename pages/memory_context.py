"""Warm-context preview: the exact `<temporal_context>` block the agent would get for a query."""

from __future__ import annotations

import streamlit as st

from yuxi_dash.ui import memory as ui

actor, access = ui.open_memory_page("Warm-context preview", "warm_context")
query = st.text_input("What the user might ask", key="warm_query", max_chars=500).strip()
if not query:
    st.info("Type a query to see the facts and recent episodes the agent would be given.")
    st.stop()
data = ui.load_warm_context(access, query)
st.info(data["note"], icon=":material/info:")
st.caption(f"{len(data['facts'])} fact(s), {len(data['episodes'])} recent episode(s).")
st.code(data["block"], language="xml")
