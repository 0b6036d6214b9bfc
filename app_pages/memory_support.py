"""Memory support: a support bundle for a ticket, and (admins) forget everything about a user.

The bundle (flags with reasons, every fact, recent episodes, corrections,
threads with pressure, last summary and tool-result checks) is written by
`yuxi_dash.memory.support.bundle`, audited, and downloaded from a temporary file.
Forgetting deletes the user's memory graph and hit counters and verifies
nothing is left (`yuxi_dash.memory.support.forget`); it works even when memory is
gated off for the user, since erasure is their right. It is the page's least prominent
control: last, folded in an expander, a tertiary button after the typed confirmation.
"""

from __future__ import annotations

import streamlit as st

from yuxi_dash.access.roles import Role
from yuxi_dash.memory.support.forget import confirmation_text
from yuxi_dash.memory.views.gate import gates_for
from yuxi_dash.ui import memory as ui
from yuxi_dash.ui import memory_support as support
from yuxi_dash.ui.identity import require_actor
from yuxi_dash.ui.page_text import literal, md

actor = require_actor()
st.title("Memory support")
user_id, _ = ui.user_picker()
if not user_id:
    st.info("Choose a user. Every bundle and every forget is audited.")
    st.stop()
chosen: str = user_id
ui.draw_gates(ui.guarded(lambda: gates_for(chosen)))

st.subheader("Support bundle")
st.caption(
    "One file for a ticket: flag states with reasons, every fact (status, validity, the "
    "episodes it came from), the newest episodes, the correction history, and each thread's "
    "pressure, last summary and offloaded results with their SHA-256 check. Audited."
)
with st.form("bundle"):
    fmt = st.radio(
        "Format", ["json", "md"], horizontal=True, format_func=lambda f: literal(f.upper())
    )
    episodes = st.number_input("Newest episodes", min_value=0, max_value=100, value=20)
    prepare = st.form_submit_button("Prepare bundle")
if prepare:  # a progress bar shows the facts written while it runs
    support.prepare_bundle(actor, user_id, str(fmt), int(episodes))
prepared = support.prepared_bundle(user_id)
if prepared is not None:
    result = prepared.result
    if result.gated_off:
        st.warning("Memory is gated off for this user: the bundle holds no facts or episodes.")
    st.caption(
        md(
            "{:,} facts, {} episodes, {} corrections, {} threads, {} tool results · audit row {}",
            result.facts,
            result.episodes,
            result.corrections,
            result.threads,
            result.tool_results,
            result.audit_id,
        )
    )
    st.download_button(
        "Download bundle",
        data=prepared.read,
        file_name=prepared.file_name,
        mime=prepared.mime,
        type="primary",
    )

if actor.role < Role.ADMIN:
    st.caption("An admin can forget everything about a user from this page.")
    st.stop()
# the least prominent control of the page, last and folded away: it cannot be undone
with st.expander("Forget this user", icon=":material/delete_forever:"):
    st.warning(literal(confirmation_text(user_id)), icon=":material/delete_forever:")
    typed = st.text_input("Type the user id to confirm", key="forget_confirm")
    if st.button("Forget this user", type="tertiary", icon=":material/delete_forever:"):
        report = support.forget(actor, user_id, typed)
        if report:
            deleted = report["deleted"]
            st.success(
                md(
                    "Forgot {}: {:,} nodes ({:,} entities, {:,} episodes, {:,} communities), "
                    "{:,} edges ({:,} facts), {:,} hit counters. Verified: nothing is left. "
                    "Audit row {}.",
                    user_id,
                    deleted["nodes"],
                    deleted["entities"],
                    deleted["episodes"],
                    deleted["communities"],
                    deleted["edges"],
                    deleted["facts"],
                    deleted["redis_keys"],
                    report["audit_id"],
                )
            )
