"""Memory vs chat: the facts stored about a user beside the user's own words; suspects first.

The facts table takes the page's full width, so every column an operator judges a fact
by stays on screen at 1440 px. The user's messages follow in a box that scrolls.
"""

from __future__ import annotations

import streamlit as st

from yuxi_dash.ui import memory as ui
from yuxi_dash.ui.page_text import clip, code, md, stamp
from yuxi_dash.ui.tables import draw_records

actor, access = ui.open_memory_page("Memory vs chat", "chat")
data = ui.load_chat(access)
st.caption(
    md(
        "A fact is supported when at least half of its key terms occur in the user's own "
        "messages. {} fact(s) are marked user_asserted but nothing the user wrote supports them.",
        data["suspects"],
    )
)


def _terms(fact: dict) -> str:
    """The key terms, the ones found in the user's words marked ✓."""
    found = set(fact["terms_in_chat"])
    return ", ".join(f"{t} ✓" if t in found else t for t in fact["key_terms"]) or "–"


st.subheader("What memory says")
draw_records(
    [{**f, "key_terms": _terms(f)} for f in data["facts"]],
    ["suspect", "supported_by_chat", "fact", "key_terms", "source_kind", "status"],
    helps={
        "suspect": "user_asserted, yet nothing the user wrote supports it",
        "supported_by_chat": "at least half of the fact's key terms occur in the user's words",
        "key_terms": "the fact's key terms; ✓ marks those found in the user's words",
    },
    widths={  # pixels: every column on screen at 1440 px with the sidebar open
        "suspect": 64,
        "supported_by_chat": 130,
        "fact": 310,
        "key_terms": 230,
        "source_kind": 120,
        "status": 92,
    },
)

st.subheader("What the user wrote")
own = [m for m in data["messages"] if m["role"] in ("user", "human")]
if not own:
    st.info("No chat messages from this user in the store.")
with st.container(height=420 if len(own) > 6 else "content", border=bool(own)):
    for message in own[-100:]:  # the user's text shown literally: no links, images or HTML
        st.markdown(md("{} {}", code(stamp(message["created_at"])), clip(message["content"], 500)))
