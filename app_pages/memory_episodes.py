"""Episodes: recent episodes with source, memory and source kind (JSON envelope), mentions, size."""

from __future__ import annotations

import streamlit as st

from yuxi_dash.ui import memory as ui
from yuxi_dash.ui.page_text import md
from yuxi_dash.ui.tables import draw_records

actor, access = ui.open_memory_page("Episodes", "episodes")
limit = st.select_slider("Recent episodes", options=[10, 20, 50, 100], value=20)
data = ui.load_episodes(access, int(limit))
episodes = data["episodes"]
oversized = sum(e["oversized"] for e in episodes)
if oversized:
    st.warning(md("{} episode(s) over 64 KB in this list.", oversized))
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
    helps={
        "oversized": "over 64 KB",
        "mentions": "entities this episode MENTIONS",
        "memory_kind": "from the episode's JSON envelope; – for a plain message",
        "source_kind": "from the episode's JSON envelope; – for a plain message",
    },
    widths={
        "created_at": 140,
        "name": 90,
        "source": 70,
        "memory_kind": 100,
        "source_kind": 120,
        "oversized": 80,
        "content_bytes": 70,
        "mention_count": 112,
        "mentions": "large",
    },
)
st.caption(
    "Memory kind and source kind come from each episode's JSON envelope; a plain message "
    "has neither (–)."
)
