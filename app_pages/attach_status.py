"""Attached platform: what is attached, how far the last scan got, what it moved past.

The platform by its label (host, port and database) and identity (its
database's system identifier and name), the watermark, the attached threads,
and the threads a scan quarantined (could not project, a checkpoint naming a
type outside the allow-list among them: ``checkpoint_refused``) or flagged (a
checkpoint dated past the platform's clock), each with its reason's code.
When the last scan found no index led by ``checkpoint_id`` on the platform's
``checkpoints``, its window query's time, what the index would save, and the
statement its owner can run. A running scan's progress (threads and checkpoints
done, rate, time left) redraws every 2 s (every 15 s when none runs). Every string is shown as written.
Nothing here starts a scan.
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


@st.fragment(run_every=2.0 if status.scan_running else 15.0)
def scan_progress() -> None:
    """The running scan's progress, or how the last one ended (read again while shown)."""
    stored = attach.progress()  # the progress row alone, not the whole status again
    running = stored is not None and stored.running
    if running != status.scan_running:
        st.rerun(scope="app")  # a scan started or ended: poll at the other pace
    if stored is None:
        return
    progress, state = stored.progress, stored.state
    if running:
        left = progress.seconds_left
        st.progress(
            min(1.0, progress.fraction),
            text=md(
                "Scanning: {:,} of {:,} threads ({:,} of {:,} checkpoints) · {:,.0f} threads/s · {}",
                progress.threads_done,
                progress.threads_total,
                progress.checkpoints_done,
                progress.checkpoints_total,
                progress.rate,
                "time left unknown" if left is None else md("about {:,.0f} s left", left),
            ),
        )
        if progress.shown:  # a first scan showed the threads it never saw before projecting
            st.caption(
                md(
                    "{:,} threads new to the dashboard show on the other pages at their newest "
                    "usage; their history (usage timeline, chat record, saved results) follows "
                    "as each batch is projected.",
                    progress.shown,
                )
            )
        else:
            st.caption("Threads show on the other pages as each batch is projected.")
    elif state == attach.FINISHED:
        st.caption(
            md(
                "The last scan projected {:,} threads ({:,} checkpoints) in {:,.1f} s.",
                progress.threads_total,
                progress.checkpoints_total,
                progress.seconds,
            )
        )
    else:  # stopped, failed, or a running row nobody writes any more
        st.caption(
            md(
                "The last scan ended after {:,} of {:,} threads ({}); the next scan goes on "
                "with the threads it left.",
                progress.threads_done,
                progress.threads_total,
                state if state != attach.RUNNING else "no word from it since",
            )
        )


scan_progress()
if status.create_index_statement:
    took = "-" if status.window_query_ms is None else md("{:g} ms", status.window_query_ms)
    st.info(
        md(
            "The platform's checkpoints table has no index on checkpoint_id: the last scan's "
            "window query took {}. The platform owner can run:",
            took,
        )
    )
    saving, daily = status.index_saving_ms, status.index_saving_seconds_a_day
    if saving is not None and daily is not None:
        st.caption(
            md(
                "That query read about {:,} checkpoints for the {:,} in its window. With the "
                "index it reads only those: up to {:,.1f} ms saved per scan, {:,.0f} s of the "
                "platform database's time a day at one scan every {:g} s.",
                status.table_rows or 0,
                status.window_rows or 0,
                saving,
                daily,
                status.scan_seconds,
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
