"""Memory overview: one user's graph in numbers, the gates, and the index health check.

Counts are directed and label-free (yuxi_dash.memory.graph.queries); the index
health compares the relationship-index path with the label-free count and
offers admins an audited repair when they differ (FalkorDB drops the outgoing
facts of internal node 0 from that index after a restart). The page opens
with the quick check (node 0 only, under a millisecond); operators can run
the full count, which takes seconds on a large graph, on request. Operators can
also count every user's suspicious retirements (facts retired by unrelated facts).
The share of assistant-only live facts is shown for the user (a failed read is one
line), and operators can list every user by it.
"""

from __future__ import annotations

import streamlit as st

from yuxi_dash.access.roles import Role
from yuxi_dash.ui import memory as ui
from yuxi_dash.ui.memory_review import assistant_only as assistant_only_review
from yuxi_dash.ui.memory_review import retirements as retirement_review
from yuxi_dash.ui.page_text import literal, md, reason_text
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

st.subheader("Fact index health")
full_key = f"index_health_full:{access.user_id}"
full = bool(st.session_state.get(full_key))
a, b, c = st.columns(3)
if full:
    health = ui.load_index_health(access)
    a.metric("Facts the index finds", f"{health['index_path_facts']:,}")
    st.caption("Full check: every fact looked up through the index.")
else:
    health = ui.load_index_probe(access)
    a.metric(
        "Quick check: facts the index finds",
        f"{health['probe_index_path_facts']:,} of {health['probe_label_free_facts']:,}",
    )
    st.caption("Quick check: the facts most likely to go missing, looked up through the index.")
b.metric("Facts in the graph", f"{health['label_free_facts']:,}")
c.metric("Facts the index misses", f"{health['drift']:,}")
with st.expander("How this is checked"):
    st.markdown(
        "FalkorDB keeps an index of the facts (the `RELATES_TO` relationship index) that "
        "graphiti-core's lookups go through. After a restart it can lose facts: exactly "
        "the outgoing facts of internal node 0, often the user. The check counts the facts "
        "twice, through the index and without it (a label-free count, always right); the "
        "difference is what the index misses. The quick check counts node 0's facts only; "
        "the full check counts every fact (seconds on a large graph)."
    )
if health["healthy"]:
    st.success("The fact index is healthy: it finds every fact.")
else:
    st.error(
        md(
            "The fact index misses {:,} fact(s). The counts on these pages are still right; "
            "lookups through the index (graphiti-core's) are not. Rebuilding the index fixes it.",
            health["drift"],
        )
    )
    if actor.role >= Role.ADMIN:
        if st.button("Rebuild the fact index", type="primary"):
            with st.spinner("Dropping and rebuilding the relationship indexes…"):
                result = ui.repair_indexes(actor, access.user_id)
            if result:
                st.success(
                    md(
                        "Rebuilt {} index statements; the index now misses {} fact(s).",
                        len(result["statements"]),
                        result["after"]["drift"],
                    )
                )
    else:
        st.caption("An admin can rebuild the fact index from this page.")
if not full and actor.role >= Role.OPERATOR:
    st.button(
        "Run the full index check",
        on_click=lambda: st.session_state.update({full_key: True}),
        help="Counts every fact through the relationship index: seconds on a large graph.",
    )
with st.expander("Relationship indexes (CALL db.indexes())"):
    st.dataframe(health["relationship_indexes"], hide_index=True)

assistant_only_review.draw_share(access)  # the share of assistant-only facts

if actor.role >= Role.OPERATOR:
    with st.expander("Index health of every user graph"):
        st.caption("Reads two counts per graph; gated-off users are skipped. Audited as one scan.")
        if st.button("Scan every user graph"):
            rows = ui.index_health_scan(actor)
            drifted = [r for r in rows if not r["gated_off"] and r["drift"]]
            st.write(md("{} graph(s) scanned; {} with missing facts.", len(rows), len(drifted)))
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

retirement_review.draw_fleet_count(actor)  # operators: suspicious retirements per user
assistant_only_review.draw_fleet(actor)  # operators: every user by assistant-only share
