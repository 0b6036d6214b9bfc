"""Warm context: the exact `<temporal_context>` block the agent would get for a query."""

from __future__ import annotations

import streamlit as st

from yuxi_dash.ui import memory as ui
from yuxi_dash.ui.page_text import literal, md

actor, access = ui.open_memory_page("Warm context", "warm_context")
query = st.text_input("What the user might ask", key="warm_query", max_chars=500).strip()
if not query:
    st.info("Type a query to see the facts and recent episodes the agent would be given.")
    st.stop()
data = ui.load_warm_context(access, query)
st.info(literal(data["note"]), icon=":material/info:")
st.caption(md("{} fact(s), {} recent episode(s).", len(data["facts"]), len(data["episodes"])))
st.code(data["block"], language="xml", wrap_lines=True)
stale = [fact for fact in data["facts"] if fact.get("not_live")]
if stale:
    st.warning(
        md(
            "{} of these facts are no longer live, yet the search hands them to the agent:",
            len(stale),
        ),
        icon=":material/warning:",
    )
    st.dataframe(
        [
            {
                "Fact": fact["fact"],
                "Why not live": fact["not_live"],
                "Valid from": fact["valid_at"],
                "Invalid from": fact["invalid_at"],
            }
            for fact in stale
        ],
        hide_index=True,
        width="stretch",
    )
