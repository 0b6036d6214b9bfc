"""Entities and facts: a searchable entity table; for one entity its directed facts and neighbourhood.

Facts are listed as source or target in created_at order with valid/invalid
times; the validity filter keeps facts whose [valid_at, invalid_at] window
overlaps the chosen dates (an unknown valid_at overlaps everything).
"""

from __future__ import annotations

import streamlit as st

from yuxi_dash.ui import memory as ui
from yuxi_dash.ui.tables import draw_records

PAGE_SIZE = 50

actor, access = ui.open_memory_page("Entities and facts", "entities")

with st.container(horizontal=True):
    search = st.text_input("Search entities by name", key="entity_search").strip()
    page = st.number_input("Page", min_value=1, value=1, step=1, key="entity_page")
data = ui.load_entities(access, search, PAGE_SIZE, (int(page) - 1) * PAGE_SIZE)
st.caption(f"{data['total']:,} entities match; showing {len(data['entities'])}.")
if not data["entities"]:
    st.stop()
draw_records(
    [{**e, "labels": ", ".join(e["labels"])} for e in data["entities"]],
    ["name", "labels", "summary", "created_at", "uuid"],
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
st.subheader(entity["name"])
st.caption(f"{', '.join(entity['labels']) or 'Entity'} · {entity['summary']}")
st.caption(f"{detail['total']:,} facts as source or target (oldest first, at most 200 shown).")
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
)
if detail["facts"]:
    st.graphviz_chart(ui.neighbourhood_dot(entity["name"], detail["facts"]))
    st.caption("Neighbourhood: first 30 facts; dashed arrows are expired facts.")
