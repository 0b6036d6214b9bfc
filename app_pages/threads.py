"""Threads at or above 85% summary pressure, highest first, with the compress action.

One thread or a selection: a dialog previews what would be summarized, then the
locked service core compresses with the checkpoint the operator saw. Buttons are
disabled where the action cannot succeed; the service decides regardless.
"""

from __future__ import annotations

from collections import Counter
from urllib.parse import quote

import pandas as pd
import streamlit as st

from yuxi_dash.access.roles import Role
from yuxi_dash.ui import loaders
from yuxi_dash.ui.compress import maybe_open_dialog, request_compression, show_results
from yuxi_dash.ui.compressibility import (
    blocked_kind,
    cannot_compress_line,
    compress_blocker,
    hidden_line,
)
from yuxi_dash.ui.identity import require_actor
from yuxi_dash.ui.page_text import (
    PERCENT_FORMAT,
    ago,
    crossing_note,
    literal,
    md,
    pct,
    percent_value,
    threshold_room_text,
)
from yuxi_dash.usage import SUGGESTION_LABEL, next_input_tokens

READINESS_ROWS = 100  # the first N compressible rows are read to find the ones with no history
# Widths in pixels: each header and short value is whole, and every column fits at 1440 px
# with the sidebar open (979 px); a long word is in the header's help.
COLUMNS = {
    "open": st.column_config.LinkColumn("", display_text="open", width=44),
    "thread": st.column_config.TextColumn("Thread", width=80),
    "user": st.column_config.TextColumn("User", width=76),
    "agent": st.column_config.TextColumn("Agent", width=80),
    "pressure": st.column_config.ProgressColumn(
        "Pressure",
        help="summary pressure: next input tokens ÷ summary threshold",
        format=PERCENT_FORMAT,
        min_value=0.0,
        max_value=100.0,
        width=96,
    ),
    "context usage": st.column_config.ProgressColumn(
        "Context",
        help="context usage: the last model input ÷ the context window",
        format=PERCENT_FORMAT,
        min_value=0.0,
        max_value=100.0,
        width=88,
    ),
    "tokens to threshold": st.column_config.TextColumn(
        "To threshold",
        help="tokens the next call may add before the summary threshold, or how far "
        "over it the next call already is",
        width=124,
    ),
    "compression": st.column_config.TextColumn(
        "Compression",
        help="unsupported: the thread's agent does not support context compression, so "
        "it cannot be compressed; attached: <platform>: the thread belongs to that attached "
        "platform, which compresses it when YUXI_DASH_PLATFORM_URL is set (never without it)",
        width=116,
    ),
    "last compression": st.column_config.TextColumn(
        "Compressed", help="the last compression of the thread", width=108
    ),
    "note": st.column_config.TextColumn(
        "Note",
        help="busy (running, queued or interrupted): wait; nothing to summarize: a compress "
        "would change nothing (too few messages since the last summary), it is not offered "
        "first nor in a selection, and the list below the table says why; 100% in N "
        "turns: model calls until the next input reaches the summary threshold, from the "
        "growth since the last compression (thread detail says the time too)",
        width=160,
    ),
}


def short_note(note: str | None) -> str:
    """A no-op note as the table shows it: its kind ("nothing to summarize"); the whole
    note is in the list under the table and beside the picker."""
    return (note or "").partition(":")[0]


actor = require_actor()
st.title(md("Threads ≥ {}", SUGGESTION_LABEL))  # as the sidebar names it
show_results()

data = loaders.threads()
rows: pd.DataFrame = data["rows"]
if rows.empty:
    st.info(
        md(
            "No thread is at or above {} of its summary threshold. Nothing to compress.",
            SUGGESTION_LABEL,
        )
    )
    st.stop()

records = rows.to_dict("records")
by_id = rows.set_index("thread_id")
blockers = {r["thread_id"]: compress_blocker(r, actor) for r in records}
shown = f"{len(rows):,}" if data["total"] == len(rows) else f"{len(rows):,} of {data['total']:,}"
st.caption(md("{} threads, highest summary pressure first.", shown))
# why each row cannot be compressed now, so the hidden count and "cannot be compressed here"
# add up: only what really cannot be compressed from here counts as such (an attached
# platform's thread with its endpoint set can be, through the platform)
kinds = {r["thread_id"]: blocked_kind(r) for r in records}
operator = actor.role >= Role.OPERATOR
hidden_kinds = Counter(kinds[t] for t in kinds if kinds[t] is not None) if operator else Counter()
# a compress that would write nothing (insufficient_history): not offered first, nor in bulk
# an attached platform's thread is the platform's to judge: its own history rules apply
checked = [r for r in records if blockers[r["thread_id"]] is None and not r["attached"]]
checked = checked[:READINESS_ROWS]
shown_checkpoints = [
    c if isinstance(c, str) else None for c in (r["checkpoint_id"] for r in checked)
]
readiness = loaders.compress_readiness(
    list(zip([r["thread_id"] for r in checked], shown_checkpoints, strict=True))
)
no_op = {t: r["note"] for t, r in readiness.items() if r["reason"]}
actionable_only = st.toggle(
    "Can compress now",
    value=True,
    key="threads_actionable_only",
    help="Only the threads you can compress now: idle, not deleted, their agent "
    "supports context compression, and an attached platform's only with its compress "
    "endpoint set (YUXI_DASH_PLATFORM_URL).",
)
listed = rows
if actionable_only:
    listed = rows[[blockers[t] is None for t in rows["thread_id"]]]
    hidden = hidden_line(hidden_kinds, role_blocked=0 if operator else len(records))
    if hidden:
        st.caption(literal(hidden))
cannot = cannot_compress_line(
    sum(kind == "unsupported" for kind in kinds.values()),
    Counter(r["compression"] for r in records if kinds[r["thread_id"]] == "no_endpoint"),
    sum(kind == "deleted" for kind in kinds.values()),
)
if cannot:
    st.caption(literal(cannot))


table = pd.DataFrame(
    {
        "open": [f"thread_detail?thread={quote(t, safe='')}" for t in listed["thread_id"]],
        "thread": listed["thread_id"],
        "user": listed["user_id"],
        "agent": listed["agent_slug"],
        # percentages rounded here, so the browser shows what pct() writes everywhere else
        "pressure": [percent_value(r) for r in listed["summary_pressure_ratio"]],
        "context usage": [percent_value(r) for r in listed["context_usage_ratio"]],
        "tokens to threshold": [
            threshold_room_text(next_input_tokens(r), r["summary_trigger_tokens"])
            for r in listed.to_dict("records")
        ],
        "compression": listed["compression"],
        "last compression": [ago(t) for t in listed["last_compression_at"]],
        "note": [
            f"busy ({b})"
            if isinstance(b, str) and b
            else short_note(no_op.get(t)) or crossing_note(n)
            for t, b, n in zip(
                listed["thread_id"], listed["busy_reason"], listed["turns_to_100"], strict=True
            )
        ],
    }
)
if table.empty:
    st.info("No thread in this list can be compressed now.")
st.dataframe(
    table,
    hide_index=True,
    width="stretch",
    column_config=COLUMNS,
)
explained = {t: no_op[t] for t in listed["thread_id"] if t in no_op}
if explained:
    with st.expander(md("Why {:,} threads have nothing to summarize", len(explained))):
        st.dataframe(
            pd.DataFrame({"thread": list(explained), "why": list(explained.values())}),
            hide_index=True,
            width="stretch",
            column_config={
                "thread": st.column_config.TextColumn("Thread", width=120),
                "why": st.column_config.TextColumn("Why a compress would change nothing"),
            },
        )

st.subheader("Compress")
one, many = st.columns(2)
with one:
    ids = rows["thread_id"].tolist()
    first_eligible = next(
        (i for i, t in enumerate(ids) if blockers[t] is None and t not in no_op),
        next((i for i, t in enumerate(ids) if blockers[t] is None), 0),
    )
    thread_id = st.selectbox(
        "One thread",
        ids,
        index=first_eligible,
        format_func=lambda t: f"{t} · {pct(by_id.at[t, 'summary_pressure_ratio'])}",
        key="compress_thread",
        help="Every thread in the list; it starts on the highest one that can be compressed "
        "now (idle, its agent supports context compression, and it has history to summarize).",
    )
    blocker = blockers.get(thread_id)
    checkpoint_id = by_id.at[thread_id, "checkpoint_id"] if thread_id else None
    st.button(
        "Compress…",
        type="primary",
        key="compress_one",
        disabled=thread_id is None or blocker is not None,
        help=literal(blocker) if blocker else None,
        on_click=request_compression,
        args=([{"thread_id": thread_id, "checkpoint_id": checkpoint_id}],),
    )
    if blocker:
        st.caption(md("Cannot compress: {}.", blocker))
    elif thread_id in no_op:
        st.caption(md("Compress would change nothing: {}.", no_op[thread_id]))
with many:
    eligible = [
        r["thread_id"]
        for r in records
        if blockers[r["thread_id"]] is None and r["thread_id"] not in no_op
    ]
    selection = st.multiselect(
        "Several threads (idle, supported, with history to summarize)",
        eligible,
        key="compress_selection",
        placeholder="choose threads" if eligible else "no thread can be compressed now",
    )
    st.button(
        md("Compress {} selected…", len(selection)),
        key="compress_bulk",
        disabled=not selection,
        on_click=request_compression,
        args=(
            [{"thread_id": t, "checkpoint_id": by_id.at[t, "checkpoint_id"]} for t in selection],
        ),
    )

maybe_open_dialog(actor)
