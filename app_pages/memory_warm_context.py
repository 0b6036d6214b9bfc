"""Warm context: the exact `<temporal_context>` block the agent would get for a query.

Below the block, the same recent episodes for people: an envelope's fields, the text with
its line breaks, cut at a word (`readable_episode`). The block itself is never reworded.
"As of" (kept in the URL) shows the block the agent would have been handed at a moment.
"""

from __future__ import annotations

import streamlit as st

from yuxi_dash.memory.views.warm_context import EPISODE_CONTENT_CHARS, readable_episode
from yuxi_dash.ui import memory as ui
from yuxi_dash.ui.memory_review import as_of as as_of_review
from yuxi_dash.ui.page_text import MarkdownSafe, literal, md, stamp

actor, access = ui.open_memory_page("Warm context", "warm_context")
moment = as_of_review.moment_control()
query = st.text_input("What the user might ask", key="warm_query", max_chars=500).strip()
if not query:
    st.info("Type a query to see the facts and recent episodes the agent would be given.")
    st.stop()
if moment is not None:
    as_of_review.draw_warm_context(actor, access, query, moment)
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

if data["episodes"]:
    st.subheader("Recent episodes, as people read them")
    st.caption(
        md(
            "The episodes of the block above, decoded: an envelope's fields, real line breaks. "
            "The agent gets the first {:,} characters of each, as written in the block.",
            EPISODE_CONTENT_CHARS,
        )
    )
for item in data["episodes"]:
    episode = readable_episode(item.get("created_at"), item.get("content"))
    with st.container(border=True):
        about = [md("{}", stamp(episode["created_at"]))]
        about += [md("{}: **{}**", name, value) for name, value in episode["fields"].items()]
        st.caption(MarkdownSafe(" · ".join(about)))
        st.markdown(literal(episode["text"]) if episode["text"] else "*(no text)*")
