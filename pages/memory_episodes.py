"""Episodes: recent episodes with source, memory and source kind (JSON envelope), mentions, size."""

from __future__ import annotations

import streamlit as st

from yuxi_dash.ui import memory as ui
from yuxi_dash.ui.tables import draw_records

actor, access = ui.open_memory_page("Episodes", "episodes")
limit = st.select_slider("Recent episodes", options=[10, 20, 50, 100], value=20)
data = ui.load_episodes(access, int(limit))
episodes = data["episodes"]
oversized = sum(e["oversized"] for e in episodes)
if oversized:
    st.warning(f"{oversized} episode(s) over 64 KB in this list.")
draw_records(
    [{**e, "mentions": ", ".join(e["mentions"])} for e in episodes],
    [
        "created_at",
        "name",
        "source",
        "memory_kind",
        "source_kind",
        "oversized",
        "content_bytes",
        "mention_count",
        "mentions",
        "source_description",
        "preview",
    ],
    helps={"oversized": "over 64 KB", "mentions": "entities this episode MENTIONS"},
)
st.caption("memory_kind and source_kind come from each episode's JSON envelope (— when plain).")
