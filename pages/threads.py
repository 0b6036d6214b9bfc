"""Threads at or above 85% summary pressure, highest first, with the compress action.

One thread or a selection: a dialog previews what would be summarized, then the
locked service core compresses with the version the operator saw. Buttons are
disabled where the action cannot succeed; the service decides regardless.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from yuxi_dash.ui import loaders
from yuxi_dash.ui.compress import maybe_open_dialog, request_compression, show_results
from yuxi_dash.ui.format import ago, busy_label, compress_blocker, pct, tokens_to_threshold
from yuxi_dash.ui.identity import require_actor

actor = require_actor()
st.title("Threads at or above 85%")
show_results()

data = loaders.threads()
rows: pd.DataFrame = data["rows"]
if rows.empty:
    st.info("No thread is at or above 85% of its summary threshold. Nothing to compress.")
    st.stop()

records = rows.to_dict("records")
by_id = rows.set_index("thread_id")
blockers = {r["thread_id"]: compress_blocker(r, actor) for r in records}
shown = f"{len(rows):,}" if data["total"] == len(rows) else f"{len(rows):,} of {data['total']:,}"
st.caption(f"{shown} threads, highest summary pressure first.")

table = pd.DataFrame(
    {
        "open": [f"thread_detail?thread={t}" for t in rows["thread_id"]],
        "thread": rows["thread_id"],
        "user": rows["user_id"],
        "agent": rows["agent_slug"],
        "pressure": rows["summary_pressure_ratio"],
        "context usage": rows["context_usage_ratio"],
        "tokens to threshold": [
            tokens_to_threshold(n, t)
            for n, t in zip(
                rows["next_llm_input_tokens"], rows["summary_trigger_tokens"], strict=True
            )
        ],
        "busy": [busy_label(b) for b in rows["busy_reason"]],
        "compression": ["supported" if c else "unsupported" for c in rows["capable"]],
        "last compression": [ago(t) for t in rows["last_compression_at"]],
    }
)
st.dataframe(
    table,
    hide_index=True,
    width="stretch",
    column_config={
        "open": st.column_config.LinkColumn("", display_text="open", width="small"),
        "thread": st.column_config.TextColumn("Thread"),
        "user": st.column_config.TextColumn("User"),
        "agent": st.column_config.TextColumn("Agent"),
        "busy": st.column_config.TextColumn("Busy", help="running, queued or interrupted: wait"),
        "compression": st.column_config.TextColumn("Compression"),
        "last compression": st.column_config.TextColumn("Last compression"),
        "pressure": st.column_config.ProgressColumn(
            "Summary pressure", format="percent", min_value=0.0, max_value=1.0
        ),
        "context usage": st.column_config.ProgressColumn(
            "Context usage", format="percent", min_value=0.0, max_value=1.0
        ),
        "tokens to threshold": st.column_config.NumberColumn(
            "Tokens to threshold", format="localized", help="negative: already over"
        ),
    },
)

st.subheader("Compress")
one, many = st.columns(2)
with one:
    ids = rows["thread_id"].tolist()
    first_eligible = next((i for i, t in enumerate(ids) if blockers[t] is None), 0)
    thread_id = st.selectbox(
        "One thread",
        ids,
        index=first_eligible,
        format_func=lambda t: f"{t} · {pct(by_id.at[t, 'summary_pressure_ratio'])}",
        key="compress_thread",
    )
    blocker = blockers.get(thread_id)
    version = int(by_id.at[thread_id, "version"]) if thread_id else 0
    st.button(
        "Compress…",
        type="primary",
        key="compress_one",
        disabled=thread_id is None or blocker is not None,
        help=blocker,
        on_click=request_compression,
        args=([{"thread_id": thread_id, "version": version}],),
    )
    if blocker:
        st.caption(f"Cannot compress: {blocker}.")
with many:
    eligible = [r["thread_id"] for r in records if blockers[r["thread_id"]] is None]
    selection = st.multiselect(
        "Several threads (idle, supported)",
        eligible,
        key="compress_selection",
        placeholder="choose threads" if eligible else "no thread can be compressed now",
    )
    st.button(
        f"Compress {len(selection)} selected…",
        key="compress_bulk",
        disabled=not selection,
        on_click=request_compression,
        args=([{"thread_id": t, "version": int(by_id.at[t, "version"])} for t in selection],),
    )

maybe_open_dialog(actor)
