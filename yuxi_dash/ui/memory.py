"""Shared pieces of the memory pages: the user picker, the gate door, cached loaders, charts.

Every memory page starts with `open_memory_page(view)`: identity, the
searchable picker over existing user graphs, the gate panel (both flags with
LaunchDarkly's reason) and `memory.views.gate.open_view`, which checks the gate
and writes the audit row on every render. Only after that do the cached
loaders run; they take the `MemoryAccess` (unhashed) plus the user id and
parameters as their cache key, so a cached result is only ever reachable
through the door. A FalkorDB outage is one line on the memory pages and
nothing else breaks. Every change of a user's memory (a correction, its undo, a
restore, a bulk retract) calls `clear_after_correction()`: it clears these loaders and
every loader registered with `clear_on_correction` (the fact desk, retirements, the
assistant-only review, the look back), so no page keeps showing the memory as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import altair as alt
import pandas as pd
import streamlit as st

from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.errors import MemoryGatedOff, YuxiDashError
from yuxi_dash.flags import MemoryGates
from yuxi_dash.memory.views import gated_views, index_views
from yuxi_dash.memory.views.gate import MemoryAccess, gates_for, list_memory_users, open_view
from yuxi_dash.settings import get_settings
from yuxi_dash.ui.cache import SettingsCached, settings_cached
from yuxi_dash.ui.charts import count_axis
from yuxi_dash.ui.identity import require_actor
from yuxi_dash.ui.page_text import MarkdownSafe, code, literal, md, reason_text

T = TypeVar("T")
USER_KEY = "memory_user"
PICKER_LIMIT = 200


def server_key() -> str:
    """Which FalkorDB the cached memory reads came from (part of every cache key)."""
    s = get_settings()
    return f"{s.falkordb_host or 'embedded'}:{s.falkordb_port}:{s.falkordb_data_dir}"


def guarded(load: Callable[[], T]) -> T:
    """Run a memory read; on a typed error draw one line and stop the page."""
    try:
        return load()
    except MemoryGatedOff as exc:
        st.warning(literal(exc.message), icon=":material/block:")
        st.stop()
    except YuxiDashError as exc:
        st.error(md("{} [{}]", exc.message, exc.code))
        st.stop()
    raise AssertionError("unreachable")  # pragma: no cover


# --- picker and gates -------------------------------------------------------
@settings_cached
def _memory_users(server: str, search: str) -> tuple[list[str], int]:
    return list_memory_users(search=search, limit=PICKER_LIMIT)


def user_picker() -> tuple[str | None, bool]:
    """(chosen user, whether the server holds no user graph at all): search box plus select box.

    There may be thousands of graphs, so the select box lists the first matches only.

    The choice is mirrored in the URL (`?user=ID`) so a reload, or a link in a support
    ticket, opens the same view; the URL wins over this session's last choice (a page
    switch drops the URL's query, then the session's choice is used). Choosing another
    user drops the rest of the URL (a fact of the last user means nothing for this one).
    The id is validated and audited by the service like any other.
    """
    linked = st.query_params.get("user") or None
    current = linked or st.session_state.get(USER_KEY) or None
    with st.container(horizontal=True):
        search = st.text_input(
            "Find a user", key="memory_user_search", placeholder="part of a user id"
        )
        users, total = guarded(lambda: _memory_users(server_key(), search.strip()))
        options = list(users)
        if current and current not in options:
            options.insert(0, current)
        chosen = st.selectbox(
            md("User ({:,} match{})", total, "es" if total != 1 else ""),
            options,
            index=options.index(current) if current in options else None,
            placeholder="choose a user",
        )
    if chosen and chosen != st.session_state.get(USER_KEY):
        st.session_state[USER_KEY] = chosen
    if chosen and linked and chosen != linked:
        st.query_params.from_dict({"user": chosen})
    elif chosen and not linked:
        st.query_params["user"] = chosen
    return chosen, total == 0 and not search.strip()


def _gates(user_id: str) -> MemoryGates | None:
    """The user's gates, or None when they cannot be read (the door then refuses, audited)."""
    try:
        return gates_for(user_id)
    except YuxiDashError:
        return None


def draw_gates(gates: MemoryGates) -> None:
    cols = st.columns(2)
    for col, flag in zip(cols, (gates.memory, gates.communities), strict=True):
        icon = ":material/toggle_on:" if flag.value else ":material/toggle_off:"
        state = "on" if flag.value else "off"
        col.markdown(
            md(
                "{} {} **{}** — {}",
                MarkdownSafe(icon),
                code(flag.key),
                state,
                reason_text(flag.reason),
            )
        )
    if gates.source == "not_configured":
        st.info(
            "LaunchDarkly is not configured (no LAUNCHDARKLY_SDK_KEY or YUXI_DASH_LD_FLAGS_FILE), "
            "so every memory gate is off."
        )


def open_memory_page(title: str, view: str) -> tuple[Actor, MemoryAccess]:
    """Identity, picker, gates, then the audited door. Stops the run when any step says no."""
    actor = require_actor()
    st.title(literal(title))
    user_id, no_graphs = user_picker()
    if not user_id:
        if no_graphs:
            st.info(
                "No user graphs on this FalkorDB yet. Seed the demo with `yuxi-dash demo`, "
                "or point GRAPHITI_FALKORDB_HOST at the platform's server."
            )
        else:
            st.info("Choose a user to read their memory. Every view of a user's memory is audited.")
        st.stop()
    gates = _gates(user_id)  # a bad id from a link: no panel, and the door's refusal below
    if gates is not None:
        draw_gates(gates)
    access = guarded(lambda: open_view(user_id, view, actor=actor))
    return actor, access


def clear_memory_caches() -> None:
    for loader in _LOADERS:
        loader.clear()


_STALE_AFTER_CORRECTION: list[SettingsCached[..., Any]] = []  # other memory modules' loaders


def clear_on_correction(*loaders: SettingsCached[..., Any]) -> None:
    """Register cached loaders (`settings_cached`) that a change of memory makes stale."""
    for loader in loaders:
        if loader not in _STALE_AFTER_CORRECTION:
            _STALE_AFTER_CORRECTION.append(loader)


def clear_after_correction() -> None:
    """The one clearing call of every correction path: every memory loader, registered too."""
    clear_memory_caches()
    for loader in _STALE_AFTER_CORRECTION:
        loader.clear()


# --- cached loaders (reachable only with a MemoryAccess) ---------------------
# The views that read nothing but the access: one cached loader serves them all, keyed by
# the view's name (each view still has its own cache entries).
_PLAIN_VIEWS: dict[str, Callable[[MemoryAccess], dict[str, Any]]] = {
    "stats": gated_views.stats,
    "index_health": index_views.index_health,
    "index_probe": index_views.index_probe,
    "facts": gated_views.relations,
    "ratification": gated_views.ratification,
    "communities": gated_views.communities,
    "chat": gated_views.chat_vs_memory,
}


@settings_cached
def _plain_view(_access: MemoryAccess, user_id: str, server: str, view: str) -> dict[str, Any]:
    return _PLAIN_VIEWS[view](_access)


@settings_cached
def _entities(
    _access: MemoryAccess, user_id: str, server: str, search: str, limit: int, offset: int
) -> dict[str, Any]:
    return gated_views.entities(_access, search=search, limit=limit, offset=offset)


@settings_cached
def _entity_detail(
    _access: MemoryAccess, user_id: str, server: str, uuid: str, valid_from: str, valid_to: str
) -> dict[str, Any]:
    return gated_views.entity_detail(_access, uuid, valid_from=valid_from, valid_to=valid_to)


@settings_cached
def _episodes(_access: MemoryAccess, user_id: str, server: str, limit: int) -> dict[str, Any]:
    return gated_views.episodes(_access, limit=limit)


@settings_cached
def _warm_context(_access: MemoryAccess, user_id: str, server: str, query: str) -> dict[str, Any]:
    return gated_views.warm_context(_access, query)


_LOADERS = (
    _memory_users,
    _plain_view,
    _entities,
    _entity_detail,
    _episodes,
    _warm_context,
)


def _load_plain(access: MemoryAccess, view: str) -> dict[str, Any]:
    return guarded(lambda: _plain_view(access, access.user_id, server_key(), view))


def load_stats(access: MemoryAccess) -> dict[str, Any]:
    return _load_plain(access, "stats")


def load_index_health(access: MemoryAccess) -> dict[str, Any]:
    """The full index check: every fact through the index path (seconds on a large graph)."""
    return _load_plain(access, "index_health")


def load_index_probe(access: MemoryAccess) -> dict[str, Any]:
    """The quick index check (node 0 only, under a millisecond): what the overview opens with."""
    return _load_plain(access, "index_probe")


def load_entities(access: MemoryAccess, search: str, limit: int, offset: int) -> dict[str, Any]:
    return guarded(lambda: _entities(access, access.user_id, server_key(), search, limit, offset))


def load_entity_detail(
    access: MemoryAccess, uuid: str, valid_from: str, valid_to: str
) -> dict[str, Any]:
    return guarded(
        lambda: _entity_detail(access, access.user_id, server_key(), uuid, valid_from, valid_to)
    )


def load_facts(access: MemoryAccess) -> dict[str, Any]:
    """The Facts page: facts per relation name and likely duplicates.

    Read through `memory.views.gated_views.relations`.
    """
    return _load_plain(access, "facts")


def load_ratification(access: MemoryAccess) -> dict[str, Any]:
    return _load_plain(access, "ratification")


def load_communities(access: MemoryAccess) -> dict[str, Any]:
    return _load_plain(access, "communities")


def load_episodes(access: MemoryAccess, limit: int) -> dict[str, Any]:
    return guarded(lambda: _episodes(access, access.user_id, server_key(), limit))


def load_chat(access: MemoryAccess) -> dict[str, Any]:
    return _load_plain(access, "chat")


def load_warm_context(access: MemoryAccess, query: str) -> dict[str, Any]:
    return guarded(lambda: _warm_context(access, access.user_id, server_key(), query))


def index_health_scan(actor: Actor) -> list[dict[str, Any]]:
    """Every user graph's index health (operator+, audited as one scan; not cached)."""
    return guarded(lambda: index_views.index_health_scan(actor=actor))


def repair_indexes(actor: Actor, user_id: str) -> dict[str, Any] | None:
    """The admin-only repair (the service checks the role again and audits it)."""
    if actor.role < Role.ADMIN:
        return None
    result = guarded(lambda: index_views.repair_indexes(user_id, actor=actor))
    clear_memory_caches()
    return result


# --- drawing ----------------------------------------------------------------
def count_bar_chart(counts: dict[str, int], label: str, *, title: str = "") -> alt.Chart:
    frame = pd.DataFrame({label: list(counts), "facts": list(counts.values())})
    return (
        alt.Chart(frame, title=title)
        .mark_bar()
        .encode(
            x=alt.X("facts:Q", axis=count_axis("facts")),
            y=alt.Y(f"{label}:N", sort="-x", title=None),
            tooltip=[label, "facts"],
        )
    )


def _dot_label(text: str, limit: int = 32) -> str:
    text = (text or "").replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def neighbourhood_dot(center: str, facts: list[dict[str, Any]], *, limit: int = 30) -> str:
    """A small Graphviz drawing of an entity's facts, arrows in their stored direction."""
    lines = [
        "digraph G {",
        "rankdir=LR;",
        'node [shape=box, style="rounded,filled", fillcolor="#eef2ff", fontsize=10];',
        'edge [fontsize=8, color="#64748b"];',
        f'"c" [label="{_dot_label(center)}", fillcolor="#c7d2fe"];',
    ]
    others: dict[str, str] = {}
    for fact in facts[:limit]:
        other_name = fact["target"] if fact["role"] == "source" else fact["source"]
        node_id = others.setdefault(fact["other_uuid"], f"n{len(others)}")
        lines.append(f'"{node_id}" [label="{_dot_label(other_name)}"];')
        style = "" if fact.get("expired_at") is None else ", style=dashed"
        ends = ('"c"', f'"{node_id}"') if fact["role"] == "source" else (f'"{node_id}"', '"c"')
        lines.append(f'{ends[0]} -> {ends[1]} [label="{_dot_label(fact["name"], 20)}"{style}];')
    lines.append("}")
    return "\n".join(lines)
