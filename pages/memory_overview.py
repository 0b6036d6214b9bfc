"""Memory overview: one user's graph in numbers, the gates, and the index health check.

Counts are directed and label-free (yuxi_dash.memory.queries); the index
health compares the relationship-index path with the label-free count and
offers admins an audited repair when they differ (FalkorDB drops the outgoing
facts of internal node 0 from that index after a restart). The page opens
with the quick check (node 0 only, under a millisecond); operators can run
the full count, which takes seconds on a large graph, on request.
"""

from __future__ import annotations

import streamlit as st

from yuxi_dash.auth import Role
from yuxi_dash.ui import memory as ui
from yuxi_dash.ui.format import literal, md, reason_text
from yuxi_dash.ui.tables import draw_records

actor, access = ui.open_memory_page("Memory overview", "overview")
stats = ui.load_stats(access)

cols = st.columns(6)
for col, (label, key) in zip(
    cols,
    [
        ("Entities", "entities"),
        ("Episodes", "episodes"),
        ("Communities", "communities"),
        ("RELATES_TO (directed)", "relates_to_edges"),
        ("MENTIONS (directed)", "mentions_edges"),
        ("HAS_MEMBER", "has_member_edges"),
    ],
    strict=True,
):
    col.metric(literal(label), f"{stats[key]:,}")

live, expired = stats["live_facts"], stats["expired_facts"]
st.caption(
    md(
        "Facts: **{:,} live** (not expired, not forgotten, status active/tentative/unset), "
        "**{:,} expired or retired**.",
        live,
        expired,
    )
)
left, right = st.columns(2)
left.altair_chart(
    ui.count_bar_chart(stats["facts_by_status"], "status", title="Facts by status"),
    width="stretch",
)
right.altair_chart(
    ui.count_bar_chart(stats["facts_by_source_kind"], "source_kind", title="Facts by source kind"),
    width="stretch",
)

st.subheader("Index health")
full_key = f"index_health_full:{access.user_id}"
full = bool(st.session_state.get(full_key))
a, b, c = st.columns(3)
if full:
    health = ui.load_index_health(access)
    a.metric("Facts via relationship index", f"{health['index_path_facts']:,}")
    st.caption("Full check: every fact counted through the relationship index (graphiti's path).")
else:
    health = ui.load_index_probe(access)
    a.metric(
        "Node 0 facts via index",
        f"{health['probe_index_path_facts']:,} of {health['probe_label_free_facts']:,}",
    )
    st.caption(
        "Quick check: after a restart the index loses the outgoing facts of internal node 0, "
        "so node 0's facts are counted through the index and label-free. The full "
        "check counts every fact through the index (seconds on a large graph)."
    )
b.metric("Facts label-free", f"{health['label_free_facts']:,}")
c.metric("Drift", f"{health['drift']:,}")
if health["healthy"]:
    st.success("The relationship index agrees with the label-free count.")
else:
    st.error(
        md(
            "The relationship index misses {:,} fact(s) (FalkorDB index loss after a restart). "
            "Counts on these pages are label-free and correct; graphiti-core lookups through "
            "the index are not.",
            health["drift"],
        )
    )
    if actor.role >= Role.ADMIN:
        if st.button("Rebuild relationship indexes", type="primary"):
            with st.spinner("Dropping and rebuilding the relationship indexes…"):
                result = ui.repair_indexes(actor, access.user_id)
            if result:
                st.success(
                    md(
                        "Rebuilt {} index statements; drift is now {}.",
                        len(result["statements"]),
                        result["after"]["drift"],
                    )
                )
    else:
        st.caption("An admin can rebuild the relationship indexes from this page.")
if not full and actor.role >= Role.OPERATOR:
    st.button(
        "Run the full index check",
        on_click=lambda: st.session_state.update({full_key: True}),
        help="Counts every fact through the relationship index: seconds on a large graph.",
    )
with st.expander("Relationship indexes (CALL db.indexes())"):
    st.dataframe(health["relationship_indexes"], hide_index=True)

if actor.role >= Role.OPERATOR:
    with st.expander("Index health of every user graph"):
        st.caption("Reads two counts per graph; gated-off users are skipped. Audited as one scan.")
        if st.button("Scan every user graph"):
            rows = ui.index_health_scan(actor)
            drifted = [r for r in rows if not r["gated_off"] and r["drift"]]
            st.write(md("{} graph(s) scanned; {} with drift.", len(rows), len(drifted)))
            draw_records(
                [
                    {**r, "reason": reason_text(r["reason"]) if r.get("reason") else None}
                    for r in rows
                ],
                [
                    "user_id",
                    "drift",
                    "index_path_facts",
                    "label_free_facts",
                    "gated_off",
                    "reason",
                ],
            )
