"""Thread detail: pressure timeline, next model input by part, model-visible context, chat
record, and the thread's compressions with what each kept, left recoverable and lost.

The thread comes from `?thread=` (links from the overview and the 85% list) or
the picker. Reads through yuxi_dash.ui.loaders only; its compress button opens
the same confirm dialog as the 85% list (`ui.compress`, through the one seam).
`?compression=ID` (from the Compression quality page) opens the Compressions tab at that
compression, and `&item=K` one of its recoverable items at its line
(`ui.compressions.thread_tab`).
"""

from __future__ import annotations

import streamlit as st

from yuxi_dash.errors import YuxiDashError
from yuxi_dash.ui import loaders
from yuxi_dash.ui.charts import (
    NOT_MEASURED,
    breakdown_frame,
    context_breakdown_chart,
    counted_tokens,
    next_input_caption,
    pressure_timeline_chart,
)
from yuxi_dash.ui.compress import maybe_open_dialog, request_compression, show_results
from yuxi_dash.ui.compressibility import attached_note, compress_blocker
from yuxi_dash.ui.compressions.thread_tab import draw_compressions, linked_compression
from yuxi_dash.ui.costs.panels import draw_thread_cost
from yuxi_dash.ui.identity import require_actor
from yuxi_dash.ui.messages import chat_line, draw_message
from yuxi_dash.ui.page_text import (
    MISSING,
    ago,
    busy_label,
    code,
    crossing_text,
    error_line,
    literal,
    md,
    pct,
    short_id,
    stamp,
    tokens,
)
from yuxi_dash.usage import next_input_tokens

actor = require_actor()
st.title("Thread detail")
show_results()

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
    for name in ("compression", "item"):  # they named another thread's compression
        if name in st.query_params:
            del st.query_params[name]

try:
    detail = loaders.thread_detail(thread_id)
except YuxiDashError as exc:
    st.error(literal(error_line(exc)))  # the id may come from a crafted ?thread= link
    st.stop()

row = detail["summary"]
agent = detail["agent"]
st.caption(
    md(
        "User **{}** · agent **{}** · {} · {} · {} · checkpoint {} · last compression {}",
        row["user_id"],
        row["agent_slug"],
        row["status"],
        busy_label(row["busy_reason"]),
        # an attached platform's thread says so: "attached: <platform>", never "unsupported"
        row["compression"] if row["attached"] else f"compression {row['compression']}",
        short_id(detail["checkpoint_id"]),
        ago(row["last_compression_at"]),
    )
)
blocker = compress_blocker(row, actor)
if row["attached"]:  # read from the platform's checkpointer; compressed only through it
    note = attached_note(row["platform"], route=row["compress_route"])
    st.info(literal(note), icon=":material/link:")
    if row["checkpoint_id"] is None:  # shown at its newest usage, its history not projected
        st.caption(
            "Its history (usage timeline, chat record, saved results) is not projected yet: "
            "it appears once a scan projects the thread."
        )
st.button(
    "Compress…",
    key="detail_compress",
    disabled=blocker is not None,
    help=literal(blocker) if blocker else None,
    on_click=request_compression,
    args=([{"thread_id": thread_id, "checkpoint_id": detail["checkpoint_id"]}],),
)
next_input = next_input_tokens(row)  # the figure pressure divides, as every page shows it
breakdown, unmeasured = detail["breakdown"], detail["unmeasured"]
timeline = detail["timeline"]
newest = timeline.iloc[-1] if not timeline.empty else None
cols = st.columns(5)
cols[0].metric("Summary pressure", pct(row["summary_pressure_ratio"]))
cols[1].metric("Context usage", pct(row["context_usage_ratio"]))
cols[2].metric(
    "Next input tokens",
    tokens(next_input),
    help="What summary pressure divides; the caption below says what it holds.",
)
cols[3].metric("Summary threshold", tokens(row["summary_trigger_tokens"]))
cols[4].metric("Summary active", "yes" if row["summary_active"] else "no")
st.caption(  # what the next input tokens hold, in words on the page (not only a tooltip)
    literal(
        next_input_caption(
            row,
            counted_tokens(breakdown),
            source=None if newest is None else newest["source"],
            measured_at=None if newest is None else newest["measured_at"],
            unmeasured=unmeasured,
        )
    )
)

crossing = crossing_text(row["turns_to_100"], row["seconds_to_100"])
st.caption(  # when the growth since the last compression reaches the threshold
    literal(
        f"Crosses the summary threshold in: {crossing}."
        if crossing != "–"
        else f"Crosses the summary threshold: {row['forecast_note'] or 'no forecast'}."
    )
)
draw_thread_cost(thread_id)  # its model cost (or tokens and the hint), what compressions saved

CHAT_CONTEXT_BEFORE = 2  # messages shown above a linked one
LINKED_STYLE = "background-color: #fef3c7; font-weight: 600"
linked = st.query_params.get("message")  # from a fact's provenance on the Facts page
linked_sequence = int(linked) if linked and linked.isdigit() else None
opened_compression = linked_compression()  # from the Compression quality page
timeline_tab, context_tab, chat_tab, compressions_tab = st.tabs(
    ["Pressure timeline", "Next model input", "Full chat record", "Compressions"],
    default="Compressions"  # a link opens at its compression or its message
    if opened_compression is not None
    else "Full chat record"
    if linked_sequence is not None
    else None,
)

with timeline_tab:
    if timeline.empty:
        st.info("No usage recorded for this thread yet.")
    else:
        st.altair_chart(pressure_timeline_chart(timeline), width="stretch")
        st.caption(
            "Lines: summary pressure (next input ÷ summary threshold) and context usage "
            "(last input ÷ context window). Markers: automatic and manual compressions."
        )

with context_tab:
    st.altair_chart(
        context_breakdown_chart(breakdown, unmeasured, next_input=next_input), width="stretch"
    )
    parts = breakdown_frame(breakdown, unmeasured, next_input=next_input)
    sent_total = int(parts.loc[parts["sent"], "tokens"].sum())
    parts["share"] = [
        NOT_MEASURED
        if not measured
        else pct(t / sent_total)
        if sent and sent_total
        else "not sent"
        if not sent
        else MISSING
        for t, sent, measured in zip(parts["tokens"], parts["sent"], parts["measured"], strict=True)
    ]
    parts["tokens"] = [  # as text: an unmeasured part reads "–", never an empty "None"
        text if measured else MISSING
        for text, measured in zip(parts["tokens_text"], parts["measured"], strict=True)
    ]
    if unmeasured:
        st.caption(
            "The agent's system prompt and tool schemas are not known to the dashboard: "
            "they are not measured one by one; the next input holds them in “Not broken down”."
        )
    st.dataframe(
        parts[["part", "tokens", "share"]],
        hide_index=True,
        width="content",
        column_config={
            "part": st.column_config.TextColumn("Part", width=330),
            "tokens": st.column_config.TextColumn("Tokens", width=100),
            "share": st.column_config.TextColumn("Share of the next input", width=170),
        },
    )
    visible = detail["visible"]
    hidden = detail["hidden_messages"]
    note = md("; {:,} earlier messages are replaced by the summary", hidden) if hidden > 0 else ""
    history = (
        md("; full history in {}", code(detail["summary_file"])) if detail["summary_file"] else ""
    )
    st.subheader("What the next model call gets")
    st.caption(md("{:,} messages{}{}", len(visible), note, history))
    show = st.number_input(
        "Show the last N messages",
        min_value=1,
        max_value=max(1, len(visible)),
        value=min(40, max(1, len(visible))),
    )
    if len(visible) > show:
        st.caption(md("{:,} earlier model-visible messages not drawn.", len(visible) - int(show)))
    for message in visible[-int(show) :]:
        draw_message(message)

with chat_tab:
    chat = detail["chat"]
    if chat.empty:
        st.info("No chat record for this thread.")
    else:
        st.caption(
            md(
                "{:,} messages as the user and agent wrote them: this record is never compressed.",
                len(chat),
            )
        )
        frame = chat.assign(
            at=[stamp(moment) for moment in chat["created_at"]],
            shown=[chat_line(r, c) for r, c in zip(chat["role"], chat["content"], strict=True)],
        )[["sequence", "role", "at", "shown"]]
        hit = chat[chat["sequence"] == linked_sequence] if linked_sequence is not None else chat[:0]
        if not hit.empty:
            row = hit.iloc[0]
            st.info(md("Linked message #{} ({}): {}", linked_sequence, row["role"], row["content"]))
            whole = st.toggle("Show the record from its first message", key="chat_from_start")
            if not whole:  # start just before the linked message, so it is in view
                frame = frame[frame["sequence"] >= linked_sequence - CHAT_CONTEXT_BEFORE]
                st.caption(
                    md(
                        "From message #{}; the linked message is highlighted.",
                        int(frame["sequence"].iloc[0]),
                    )
                )
        styled = frame.style.apply(
            lambda r: [LINKED_STYLE if r["sequence"] == linked_sequence else ""] * len(r),
            axis=1,
        )
        st.dataframe(
            styled,
            hide_index=True,
            width="stretch",
            column_config={
                "sequence": st.column_config.NumberColumn("#", format="%d", width=56),
                "role": st.column_config.TextColumn("Role", width=90),
                "at": st.column_config.TextColumn("At", width=170),
                "shown": st.column_config.TextColumn(
                    "Content",
                    help="as written; a tool call reads “calls NAME — argument: value”, a JSON "
                    "tool result as its records or fields",
                    width="large",
                ),
            },
        )

with compressions_tab:
    draw_compressions(thread_id, actor)

maybe_open_dialog(actor)
