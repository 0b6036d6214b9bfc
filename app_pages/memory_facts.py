"""Facts: one fact's provenance and corrections; relation-name distribution and duplicates.

Pick a user, then a fact (both kept in the URL): its provenance (episodes, the
chat message and the words it came from), its corrections with Undo, and for
operators the correction form (retract, supersede, restore, reject). Below:
facts per relation name and likely duplicates, counted directed; then the user's
retired facts beside what retired them (suspicious ones flagged), with Restore or Undo.
"As of" (kept in the URL) shows the facts the memory held at a moment, and "Diff with"
what changed between two moments and who did it.
Last, the assistant-only facts (a toggle) and, for operators, their bulk retract with
a preview and an undo in one step.
"""

from __future__ import annotations

import streamlit as st

from yuxi_dash.ui import memory as ui
from yuxi_dash.ui import memory_facts
from yuxi_dash.ui.memory_review import as_of as as_of_review
from yuxi_dash.ui.memory_review import assistant_only as assistant_only_review
from yuxi_dash.ui.memory_review import retirements as retirement_review
from yuxi_dash.ui.page_text import md
from yuxi_dash.ui.tables import draw_records

actor, access = ui.open_memory_page("Facts", "facts")

moment = as_of_review.moment_control()
if moment is not None:
    as_of_review.draw_facts(actor, access, moment)

fact_uuid = memory_facts.fact_picker(access)
if fact_uuid:
    provenance = memory_facts.draw_provenance(actor, access, fact_uuid)
    if provenance is not None:
        memory_facts.draw_corrections(actor, access, provenance["fact"])

data = ui.load_facts(access)

names = {row["name"]: row["facts"] for row in data["names"]}
st.altair_chart(
    ui.count_bar_chart(names, "name", title="Facts per relation name (top 50)"),
    width="stretch",
)

dups = data["duplicates"]
st.subheader("Likely duplicates")
st.caption("Counted directed: A→B and B→A are not the same triple.")
st.markdown(md("**Same source, name and target** — {} triple(s)", len(dups["same_triple"])))
draw_records(dups["same_triple"])
st.markdown(md("**Same fact text** — {} text(s)", len(dups["same_fact_text"])))
draw_records(dups["same_fact_text"])
st.markdown(md("**Mirrored edges** (A→B and B→A, same name) — {} pair(s)", len(dups["mirrored"])))
draw_records(dups["mirrored"])

retirement_review.draw_retirements(actor, access)  # retired facts and what retired them

assistant_only_review.draw_assistant_only(actor, access)  # assistant-only facts; bulk retract
