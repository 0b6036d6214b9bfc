"""Audit log (admin only): who did what to which thread or user, with outcome; filters, CSV export.

The rows come from `yuxi_dash.access.audit_review`, which checks the admin role and
records every read (`view_audit_log`) and every export (`export_audit_log`).
A read happens when this session first opens the page, when a filter changes,
on Reload, and whenever the log has rows newer than the one that recorded this
session's last read (an action elsewhere, such as opening a tool result, so the
page opened again shows it); other reruns show the rows already read and
record nothing. The CSV is produced only when Export is clicked, re-read and
recorded at that moment.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
import streamlit as st

from yuxi_dash.access.audit_review import (
    AuditFilter,
    export_audit_log_csv,
    newest_audit_id,
    view_audit_log,
)
from yuxi_dash.access.roles import Role
from yuxi_dash.ui.identity import require_actor
from yuxi_dash.ui.page_text import literal, md, stamp
from yuxi_dash.wording import detail_text

WINDOWS = {
    "last 24 hours": timedelta(hours=24),
    "last 7 days": timedelta(days=7),
    "last 30 days": timedelta(days=30),
    "any time": None,
}
_READ_KEY = "audit_log_read"

viewer = require_actor(Role.ADMIN, action="read the audit log")
st.title("Audit log")

with st.container(horizontal=True):
    actor = st.text_input("Actor", placeholder="e.g. operator@localhost").strip() or None
    action = st.text_input("Action", placeholder="e.g. compress").strip() or None
    target = st.text_input("Target", placeholder="e.g. thread:t-001 or user:alice").strip() or None
    window = st.selectbox("When", list(WINDOWS), index=1)
    reload = st.button("Reload", icon=":material/refresh:")

query = (viewer.id, actor, action, target, window)
read = st.session_state.get(_READ_KEY)
# the log moved past the row that recorded our last read: what we hold is stale
moved = read is not None and newest_audit_id() != read[3]
if reload or read is None or read[0] != query or moved:
    delta = WINDOWS[window]
    since = (datetime.now(UTC) - delta).replace(second=0, microsecond=0) if delta else None
    filters = AuditFilter(actor=actor, action=action, target=target, since=since)
    view = view_audit_log(viewer, filters)  # admin only; this read is itself audited
    records = [r.to_dict() for r in view.rows]
    st.session_state[_READ_KEY] = read = (query, filters, records, view.view_id)
_, filters, records, _ = read

rows = pd.DataFrame(records, columns=["id", "at", "actor", "action", "target", "outcome", "detail"])
if rows.empty:
    st.info("No audit entries match these filters.")
    st.stop()

outcomes = sorted(rows["outcome"].unique())
with st.container(horizontal=True):
    picked = st.pills(
        "Outcome", outcomes, selection_mode="multi", default=outcomes, format_func=literal
    )
    hidden = st.multiselect(
        "Hide actions",
        sorted(rows["action"].unique()),
        placeholder="e.g. view_memory",
        format_func=literal,
        key="audit_hidden_actions",
    )
shown = rows[rows["outcome"].isin(picked) & ~rows["action"].isin(hidden)].copy()
shown["detail"] = [detail_text(d) for d in shown["detail"]]
shown["at"] = [stamp(moment) for moment in shown["at"]]  # to the second, in UTC
st.caption(md("{:,} entries, newest first (at most 1,000 loaded).", len(shown)))
st.dataframe(
    shown[["at", "actor", "action", "target", "outcome", "detail"]],
    hide_index=True,
    width="stretch",
    column_config={
        "at": st.column_config.TextColumn("At"),
        "actor": st.column_config.TextColumn("Actor"),  # as the filter above names it
        "action": st.column_config.TextColumn("Action"),
        "target": st.column_config.TextColumn("Target"),
        "outcome": st.column_config.TextColumn("Outcome"),
        "detail": st.column_config.TextColumn(
            "Detail",
            help="never user data or query text; numbers as recorded, moments in UTC",
            width="large",
        ),
    },
)
export_filters = AuditFilter(
    actor=filters.actor,
    action=filters.action,
    target=filters.target,
    since=filters.since,
    outcomes=tuple(picked),
    hidden_actions=tuple(hidden),
)
st.download_button(
    "Export CSV",
    data=lambda: export_audit_log_csv(viewer, export_filters),  # read and recorded on click
    file_name="yuxi-dash-audit.csv",
    mime="text/csv",
    icon=":material/download:",
    on_click="ignore",  # no rerun: the export's own row would make the page read again
)
