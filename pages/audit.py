"""Audit log (admin only): who did what to which thread or user, with outcome; filters, CSV export."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import streamlit as st

from yuxi_dash.auth import Role
from yuxi_dash.ui import loaders
from yuxi_dash.ui.identity import require_actor

WINDOWS = {
    "last 24 hours": timedelta(hours=24),
    "last 7 days": timedelta(days=7),
    "last 30 days": timedelta(days=30),
    "any time": None,
}

require_actor(Role.ADMIN, action="read the audit log")
st.title("Audit log")

with st.container(horizontal=True):
    actor = st.text_input("Actor", placeholder="e.g. operator@localhost").strip() or None
    action = st.text_input("Action", placeholder="e.g. compress").strip() or None
    target = st.text_input("Target", placeholder="e.g. thread:t-001 or user:alice").strip() or None
    window = st.selectbox("When", list(WINDOWS), index=1)

delta = WINDOWS[window]
since = (datetime.now(UTC) - delta).replace(second=0, microsecond=0) if delta else None
rows = loaders.audit_rows(actor=actor, action=action, target=target, since=since)
if rows.empty:
    st.info("No audit entries match these filters.")
    st.stop()

outcomes = sorted(rows["outcome"].unique())
picked = st.pills("Outcome", outcomes, selection_mode="multi", default=outcomes)
shown = rows[rows["outcome"].isin(picked)].copy()
shown["detail"] = [json.dumps(d, sort_keys=True, default=str) for d in shown["detail"]]
st.caption(f"{len(shown):,} entries, newest first (at most 1,000 loaded).")
st.dataframe(
    shown[["at", "actor", "action", "target", "outcome", "detail"]],
    hide_index=True,
    width="stretch",
    column_config={
        "at": st.column_config.DatetimeColumn("At (UTC)", format="YYYY-MM-DD HH:mm:ss"),
        "actor": st.column_config.TextColumn("Who"),
        "action": st.column_config.TextColumn("Action"),
        "target": st.column_config.TextColumn("Target"),
        "outcome": st.column_config.TextColumn("Outcome"),
        "detail": st.column_config.TextColumn("Detail", help="never user data or query text"),
    },
)
st.download_button(
    "Export CSV",
    data=shown.to_csv(index=False).encode("utf-8"),
    file_name="yuxi-dash-audit.csv",
    mime="text/csv",
    icon=":material/download:",
)
