"""Thread detail: pressure timeline, next model input by part, model-visible context, chat record.

The thread comes from `?thread=` (links from the overview and the 85% list) or
the picker. Reads through yuxi_dash.ui.loaders only.
"""

from __future__ import annotations

import streamlit as st

from yuxi_dash.errors import YuxiDashError
from yuxi_dash.ui import loaders
from yuxi_dash.ui.charts import breakdown_frame, context_breakdown_chart, pressure_timeline_chart
from yuxi_dash.ui.format import ago, busy_label, error_line, pct, tokens
from yuxi_dash.ui.identity import require_actor
from yuxi_dash.ui.messages import draw_message

require_actor()
st.title("Thread detail")

ids = loaders.thread_ids()
if not ids:
    st.info("No threads yet. Seed the demo with `yuxi-dash demo`.")
    st.stop()
wanted = st.query_params.get("thread")
if wanted and wanted not in ids:
    ids = [wanted, *ids]
thread_id = st.selectbox(
    "Thread", ids, index=ids.index(wanted) if wanted in ids else 0, key="detail_thread"
)
if thread_id != wanted:
    st.query_params["thread"] = thread_id

try:
    detail = loaders.thread_detail(thread_id)
except YuxiDashError as exc:
    st.error(error_line(exc))
    st.stop()

row = detail["summary"]
agent = detail["agent"]
st.caption(
    f"User **{row['user_id']}** · agent **{row['agent_slug']}** · {row['status']} · "
    f"{busy_label(row['busy_reason'])} · compression "
    f"{'supported' if row['capable'] else 'unsupported'} · state v{detail['version']} · "
    f"last compression {ago(row['last_compression_at'])}"
)
cols = st.columns(5)
cols[0].metric("Summary pressure", pct(row["summary_pressure_ratio"]))
cols[1].metric("Context usage", pct(row["context_usage_ratio"]))
cols[2].metric("Next input tokens", tokens(row["next_llm_input_tokens"]))
cols[3].metric("Summary threshold", tokens(row["summary_trigger_tokens"]))
cols[4].metric("Summary active", "yes" if row["summary_active"] else "no")

timeline_tab, context_tab, chat_tab = st.tabs(
    ["Pressure timeline", "Next model input", "Full chat record"]
)

with timeline_tab:
    timeline = detail["timeline"]
    if timeline.empty:
        st.info("No usage recorded for this thread yet.")
    else:
        st.altair_chart(pressure_timeline_chart(timeline), width="stretch")
        st.caption(
            "Lines: summary pressure (next input ÷ summary threshold) and context usage "
            "(last input ÷ context window). Markers: automatic and manual compressions."
        )

with context_tab:
    breakdown = detail["breakdown"]
    st.altair_chart(context_breakdown_chart(breakdown), width="stretch")
    st.dataframe(breakdown_frame(breakdown)[["part", "tokens"]], hide_index=True, width="content")
    visible = detail["visible"]
    hidden = detail["messages_total"] - sum(not m["summary"] for m in visible)
    note = f"; {hidden:,} earlier messages are replaced by the summary" if hidden > 0 else ""
    st.subheader("What the next model call gets")
    st.caption(
        f"{len(visible):,} messages{note}"
        + (f"; full history in `{detail['summary_file']}`" if detail["summary_file"] else "")
    )
    show = st.number_input(
        "Show the last N messages",
        min_value=1,
        max_value=max(1, len(visible)),
        value=min(40, max(1, len(visible))),
    )
    if len(visible) > show:
        st.caption(f"{len(visible) - int(show):,} earlier model-visible messages not drawn.")
    for message in visible[-int(show) :]:
        draw_message(message)

with chat_tab:
    chat = detail["chat"]
    if chat.empty:
        st.info("No chat record for this thread.")
    else:
        st.caption(
            f"{len(chat):,} messages, never compressed: what the user and agent actually said."
        )
        st.dataframe(
            chat[["sequence", "role", "created_at", "content"]],
            hide_index=True,
            width="stretch",
            column_config={"content": st.column_config.TextColumn("Content", width="large")},
        )
