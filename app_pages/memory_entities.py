"""Entities: a searchable entity table; for one entity its directed facts and neighbourhood.

Facts are listed as source or target in created_at order with valid/invalid
times; the validity filter keeps facts whose [valid_at, invalid_at] window
overlaps the chosen dates (an unknown valid_at overlaps everything). "As of" (kept in the
URL) shows the entities written by a moment and the facts one of them had then.
"""

from __future__ import annotations

import streamlit as st

from yuxi_dash.ui import memory as ui
from yuxi_dash.ui.memory_review import as_of as as_of_review
from yuxi_dash.ui.page_text import literal, md, page_count
from yuxi_dash.ui.tables import draw_records

PAGE_SIZE = 50
PAGE_KEY = "entity_page"

actor, access = ui.open_memory_page("Entities", "entities")
moment = as_of_review.moment_control()
if moment is not None:
    as_of_review.draw_entities(actor, access, moment)
    st.stop()

with st.container(horizontal=True):
    search = st.text_input("Search entities by name", key="entity_search").strip()
    pager = st.container()  # drawn once the total is known, so it stops at the last page

page = max(1, int(st.session_state.get(PAGE_KEY) or 1))
data = ui.load_entities(access, search, PAGE_SIZE, (page - 1) * PAGE_SIZE)
last = page_count(data["total"], PAGE_SIZE)
if page > last:  # the search narrowed, or a page past the end was asked for: the last page
    page = last
    data = ui.load_entities(access, search, PAGE_SIZE, (page - 1) * PAGE_SIZE)
st.session_state[PAGE_KEY] = page
with pager:
    st.number_input(md("Page (of {:,})", last), min_value=1, max_value=last, step=1, key=PAGE_KEY)
first = (page - 1) * PAGE_SIZE
st.caption(
    md(
        "{:,} entities match; showing {:,}–{:,}.",
        data["total"],
        first + 1 if data["entities"] else 0,
        first + len(data["entities"]),
    )
)
if not data["entities"]:
    st.stop()
draw_records(
    data["entities"],
    ["name", "labels", "summary", "created_at", "uuid"],
    widths={"name": 160, "labels": 100, "summary": 300, "created_at": 140, "uuid": 270},
)

names = {e["uuid"]: e["name"] for e in data["entities"]}
chosen = st.selectbox(
    "Entity", list(names), format_func=lambda u: names[u], index=None, placeholder="pick one"
)
if not chosen:
    st.stop()

with st.container(horizontal=True):
    valid_from = st.date_input("Valid after", value=None, key="valid_from")
    valid_to = st.date_input("Valid before", value=None, key="valid_to")
detail = ui.load_entity_detail(
    access,
    chosen,
    valid_from.isoformat() if valid_from else "",
    valid_to.isoformat() if valid_to else "",
)
entity = detail["entity"]
st.subheader(literal(entity["name"]))
st.caption(md("{} · {}", ", ".join(entity["labels"]) or "Entity", entity["summary"]))
st.caption(md("{:,} facts as source or target (oldest first, at most 200 shown).", detail["total"]))
draw_records(
    detail["facts"],
    [
        "role",
        "source",
        "name",
        "target",
        "fact",
        "status",
        "source_kind",
        "created_at",
        "valid_at",
        "invalid_at",
        "expired_at",
    ],
    helps={"role": "whether this entity is the fact's source or its target"},
    widths={
        "role": 64,
        "source": 130,
        "name": 110,
        "target": 130,
        "fact": "large",
        "status": 90,
        "source_kind": 120,
    },
)
if detail["facts"]:
    st.graphviz_chart(ui.neighbourhood_dot(entity["name"], detail["facts"]))
    st.caption("Neighbourhood: first 30 facts; dashed arrows are expired facts.")
