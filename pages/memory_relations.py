"""Relations: fact-name distribution (over-extraction) and likely duplicates, counted directed."""

from __future__ import annotations

import streamlit as st

from yuxi_dash.ui import memory as ui
from yuxi_dash.ui.tables import draw_records

actor, access = ui.open_memory_page("Relations", "relations")
data = ui.load_relations(access)

names = {row["name"]: row["facts"] for row in data["names"]}
st.altair_chart(
    ui.count_bar_chart(names, "name", title="Facts per relation name (top 50)"),
    width="stretch",
)

dups = data["duplicates"]
st.subheader("Likely duplicates")
st.caption("Counted directed: A→B and B→A are not the same triple.")
st.markdown(f"**Same source, name and target** — {len(dups['same_triple'])} triple(s)")
draw_records(dups["same_triple"])
st.markdown(f"**Same fact text** — {len(dups['same_fact_text'])} text(s)")
draw_records(dups["same_fact_text"])
st.markdown(f"**Mirrored edges** (A→B and B→A, same name) — {len(dups['mirrored'])} pair(s)")
draw_records(dups["mirrored"])
