"""Chat vs memory: the user's own words beside the facts stored about them; suspects first."""

from __future__ import annotations

import streamlit as st

from yuxi_dash.ui import memory as ui
from yuxi_dash.ui.format import clip, markdown_literal, stamp
from yuxi_dash.ui.tables import draw_records

actor, access = ui.open_memory_page("Memory vs chat", "chat")
data = ui.load_chat(access)
st.caption(
    "A fact is supported when at least half of its key terms occur in the user's own messages. "
    f"{data['suspects']} fact(s) are marked user_asserted but nothing the user wrote supports them."
)
chat_col, facts_col = st.columns([2, 3])
with chat_col:
    st.subheader("What the user wrote")
    own = [m for m in data["messages"] if m["role"] in ("user", "human")]
    if not own:
        st.info("No chat messages from this user in the store.")
    for message in own[-100:]:  # the user's text shown literally: no links, images or HTML
        st.markdown(
            f"`{stamp(message['created_at'])}` {markdown_literal(clip(message['content'], 500))}"
        )
with facts_col:
    st.subheader("What memory says")
    draw_records(
        [
            {
                **f,
                "terms_in_chat": ", ".join(f["terms_in_chat"]),
                "key_terms": ", ".join(f["key_terms"]),
            }
            for f in data["facts"]
        ],
        [
            "suspect",
            "supported_by_chat",
            "source_kind",
            "fact",
            "terms_in_chat",
            "key_terms",
            "status",
            "created_at",
        ],
        helps={
            "suspect": "user_asserted, yet nothing the user wrote supports it",
            "supported_by_chat": "at least half of the fact's key terms occur in the user's words",
        },
    )
