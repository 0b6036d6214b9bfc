"""Attached platform: what is attached, how far the last scan got, what it moved past.

The platform by its label (host, port and database) and identity (its
database's system identifier and name), the watermark, the attached threads,
and the threads a scan quarantined (could not project, a checkpoint naming a
type outside the allow-list among them: ``checkpoint_refused``) or flagged (a
checkpoint dated past the platform's clock), each with its reason's code.
When the last scan found no index led by ``checkpoint_id`` on the platform's
``checkpoints``, its window query's time and the statement its owner can run.
Every string is shown as written. Nothing here starts a scan.
"""

from __future__ import annotations

import streamlit as st

from yuxi_dash.ui import attach
from yuxi_dash.ui.identity import require_actor
from yuxi_dash.ui.page_text import code, md, stamp

require_actor()
st.title("Attached platform")

status = attach.status()
if not status.configured:
    st.info(
        md(
            "No platform attached (YUXI_DASH_ATTACH_CHECKPOINTER is not set); "
            "{:,} attached threads kept.",
            status.attached_threads,
        )
    )
    st.stop()

last = stamp(status.scanned_at) if status.scanned_at else "never"
st.caption(
    md(
        "{} · platform {} · last scan {} · watermark {} · {:,} attached threads",
        code(status.source or "-"),
        code(status.platform_id or "-"),
        last,
        code(status.watermark or "-"),
        status.attached_threads,
    )
)
if status.create_index_statement:
    took = "-" if status.window_query_ms is None else f"{status.window_query_ms:g} ms"
    st.info(
        md(
            "The platform's checkpoints table has no index on checkpoint_id: the last scan's "
            "window query took {}. The platform owner can run:",
            took,
        )
    )
    st.code(status.create_index_statement, language="sql")
st.caption(
    "A scan of another platform is refused until an operator confirms it with "
    "`yuxi-dash attach scan --accept-new-platform`."
)

st.subheader(md("Quarantined ({:,})", len(status.quarantined)))
if status.quarantined:
    st.caption("Not projected; skipped until the thread moves on the platform, then tried again.")
    st.dataframe(attach.problems_frame(status.quarantined), hide_index=True)
else:
    st.caption("No thread is quarantined.")

st.subheader(md("Flagged ({:,})", len(status.flagged)))
if status.flagged:
    st.caption(
        "Projected, but the newest checkpoint is dated past the platform database's clock: "
        "the watermark stays at the clock."
    )
    st.dataframe(attach.problems_frame(status.flagged), hide_index=True)
else:
    st.caption("No thread is flagged.")
