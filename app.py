"""yuxi-dash entry point: settings, identity, then st.navigation over app_pages/.

Run with `yuxi-dash serve` (or `streamlit run app.py`). A visitor nobody
vouches for gets the refusal page and no navigation at all. The Operations
group is always there (Tuning lab for operators and admins, Audit log for admins
only); the Memory group lists the memory pages that exist in app_pages/. The
folder is not named pages/: Streamlit would take a pages/ folder beside app.py
for an old-style multipage app, and a fresh server's first request for a page
would then run that page without app.py.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from yuxi_dash.access.roles import Role
from yuxi_dash.settings import get_settings
from yuxi_dash.ui.guard import run_guarded
from yuxi_dash.ui.identity import current_identity, show_refusal
from yuxi_dash.ui.page_text import literal, md
from yuxi_dash.usage import SUGGESTION_LABEL

PAGES_DIR = Path(__file__).resolve().parent / "app_pages"

OPERATIONS = [
    ("overview.py", "Pressure overview", ":material/monitoring:", Role.VIEWER),
    ("threads.py", f"Threads ≥ {SUGGESTION_LABEL}", ":material/compress:", Role.VIEWER),
    ("thread_detail.py", "Thread detail", ":material/timeline:", Role.VIEWER),
    ("tool_results.py", "Offloaded tool results", ":material/description:", Role.VIEWER),
    ("compression_quality.py", "Compression quality", ":material/fact_check:", Role.VIEWER),
    ("tuning_lab.py", "Tuning lab", ":material/tune:", Role.OPERATOR),
    ("attach_status.py", "Attached platform", ":material/link:", Role.VIEWER),
    ("alerts.py", "Alerts", ":material/notifications_active:", Role.VIEWER),
    ("audit.py", "Audit log", ":material/policy:", Role.ADMIN),
]
MEMORY = [
    ("memory_overview.py", "Memory overview", ":material/hub:"),
    ("memory_entities.py", "Entities", ":material/category:"),
    ("memory_facts.py", "Facts", ":material/share:"),
    ("memory_ratification.py", "Ratification", ":material/verified:"),
    ("memory_communities.py", "Communities", ":material/groups:"),
    ("memory_episodes.py", "Episodes", ":material/history_edu:"),
    ("memory_chat.py", "Memory vs chat", ":material/forum:"),
    ("memory_warm_context.py", "Warm context", ":material/psychology:"),
    ("memory_support.py", "Memory support", ":material/support_agent:"),
]

st.set_page_config(page_title="yuxi-dash", page_icon=":material/compress:", layout="wide")

settings = get_settings()
identity = current_identity(settings)

if identity.actor is None:
    st.navigation([st.Page(lambda: show_refusal(identity), title="yuxi-dash")], position="hidden")
    show_refusal(identity)
    st.stop()

actor = identity.actor
operations = [
    st.Page(PAGES_DIR / name, title=title, icon=icon, default=(name == "overview.py"))
    for name, title, icon, needed in OPERATIONS
    if actor.role >= needed
]
memory = [
    st.Page(PAGES_DIR / name, title=title, icon=icon)
    for name, title, icon in MEMORY
    if (PAGES_DIR / name).is_file()
]
sections = {"Operations": operations}
if memory:
    sections["Memory"] = memory
page = st.navigation(sections, expanded=True)  # every page listed: no "View N more"

with st.sidebar:
    st.caption(md("Signed in as **{}** · {} · {}", actor.id, actor.role.label, actor.via))
    if identity.banner:
        st.info(literal(identity.banner), icon=":material/lock_open:")
    if actor.via == "oidc":
        st.button("Sign out", on_click=st.logout)

run_guarded(page)
