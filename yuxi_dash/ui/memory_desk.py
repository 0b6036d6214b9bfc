"""The memory desk on the Facts page: pick a fact, read its provenance, correct it, undo.

- `fact_picker(access)`: the user's facts, newest first (mirrored in `?fact=UUID` so a
  ticket can link to one fact), or a pasted uuid. With none asked for, it opens on the
  newest active fact the user asserted, else the newest fact.
- `draw_provenance(actor, access, uuid)`: the audited `provenance` look (`open_view` on every
  render) and its drawing: the fact and its validity, each episode's chat message with the
  fact's key words in bold, who said it, a link to that message in the thread's chat, what
  invalidated the fact and the facts retired in the same batch.
- `draw_corrections(actor, user_id, fact)`: for operators only, a form per correction
  (reason, ticket; for supersede the corrected text and a confirmation box). The result
  shows its audit row id and an Undo button for its author, or for an admin with a reason.
  The service checks the role and these rules again.
Every string from the graph or the chat is shown literally (`ui.page_text`).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import streamlit as st
from streamlit.errors import StreamlitAPIException

from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.errors import YuxiDashError
from yuxi_dash.memory.desk import corrections
from yuxi_dash.memory.graph.correction_rules import INVALIDATED_STATUSES
from yuxi_dash.memory.views.gate import MemoryAccess, open_view
from yuxi_dash.memory.views.gated_views import facts
from yuxi_dash.memory.views.provenance import fact_provenance
from yuxi_dash.ui.cache import settings_cached
from yuxi_dash.ui.memory import clear_memory_caches, guarded, server_key
from yuxi_dash.ui.page_text import MarkdownSafe, code, error_line, highlighted, literal, md
from yuxi_dash.ui.tables import draw_records

FACT_KEY = "desk_fact"
RESULT_KEY = "desk_result"
RESET_KEY = "desk_form_reset"
# the correction form's inputs: emptied after every correction or undo, so the
# form is never left armed for a second click with the last change's reason
FORM_KEYS = ("desk_action", "desk_reason", "desk_ticket", "desk_text", "desk_confirm")
FACT_LIST_LIMIT = 500


@settings_cached
def _fact_list(_access: MemoryAccess, user_id: str, server: str) -> list[dict[str, Any]]:
    return list(facts(_access, limit=FACT_LIST_LIMIT)["facts"])


@settings_cached
def _provenance(_access: MemoryAccess, user_id: str, server: str, uuid: str) -> dict[str, Any]:
    return fact_provenance(_access, uuid)


def clear_desk_caches() -> None:
    _fact_list.clear()
    _provenance.clear()
    clear_memory_caches()


def _label(row: dict[str, Any]) -> str:
    status = row.get("status") or "unset"
    text = str(row.get("fact") or "")
    return f"{row.get('source')} —{row.get('name')}→ {row.get('target')} · {status} · {text[:80]}"


def headline_fact(rows: list[dict[str, Any]]) -> str | None:
    """The fact to open on: the newest active user_asserted one, else the newest (rows newest first)."""
    for row in rows:
        if row.get("source_kind") == "user_asserted" and row.get("status") == "active":
            return str(row["uuid"])
    return str(rows[0]["uuid"]) if rows else None


def fact_picker(access: MemoryAccess) -> str | None:
    """The chosen fact uuid (select box over the newest facts, or a pasted uuid)."""
    rows = guarded(lambda: _fact_list(access, access.user_id, server_key()))
    by_uuid = {str(r["uuid"]): r for r in rows}
    wanted = st.session_state.get(FACT_KEY) or st.query_params.get("fact") or None
    wanted = wanted or headline_fact(rows)
    options = list(by_uuid)
    if wanted and wanted not in by_uuid:
        options.insert(0, wanted)
    chosen = st.selectbox(
        md("Fact ({:,} newest)", len(rows)),
        options,
        index=options.index(wanted) if wanted in options else None,
        format_func=lambda u: _label(by_uuid[u]) if u in by_uuid else u,
        placeholder="choose a fact to see where it came from",
        key="desk_fact_select",
    )
    pasted = st.text_input("…or paste a fact uuid", key="desk_fact_uuid").strip()
    chosen = pasted or chosen
    if chosen and st.query_params.get("fact") != chosen:
        st.query_params["fact"] = chosen
    return chosen or None


def _thread_link(message: dict[str, Any]) -> None:
    """A link to the thread's full chat at the message (a plain link when the page runs alone)."""
    query = message["link"]["query"]
    try:
        st.page_link(
            message["link"]["page"],
            label=md("Open thread {} at message #{}", message["thread_id"], message["sequence"]),
            icon=":material/open_in_new:",
            query_params=query,
        )
    except StreamlitAPIException:  # this page was run on its own, outside st.navigation
        label = md("Open thread {} at message #{}", message["thread_id"], message["sequence"])
        url = "thread_detail?" + urlencode(query)
        st.markdown(MarkdownSafe(f"[{label}]({url})"))


def _draw_episode(episode: dict[str, Any]) -> None:
    said = episode.get("said_by") or "unknown"
    basis = episode.get("said_by_basis") or "no evidence"
    st.markdown(
        md(
            "Episode {} · said by **{}** ({}) · {}",
            code(episode["uuid"]),
            said,
            basis,
            episode.get("source_description") or "",
        )
    )
    message = episode.get("message")
    if message is None:
        st.warning("No chat message in the record matches this episode.")
        if episode.get("body"):
            st.markdown(md("Episode text: {}", str(episode["body"])[:2000]))
        return
    with st.container(border=True):
        st.caption(
            md(
                "Thread {} · message #{} · {} · {} · found by {}",
                message["thread_id"],
                message["sequence"],
                message["role"],
                message["created_at"],
                episode.get("match") or "",
            )
        )
        spans = [(span["start"], span["end"]) for span in message["spans"]]
        st.markdown(highlighted(message["content"], spans))
        span = message.get("span")
        if span:
            st.caption(md("Key words at characters {}–{}", span["start"], span["end"]))
        _thread_link(message)


def draw_provenance(actor: Actor, access: MemoryAccess, uuid: str) -> dict[str, Any] | None:
    """The audited provenance look and its drawing; None when refused (one line shown)."""
    look = guarded(lambda: open_view(access.user_id, "provenance", actor=actor))
    try:
        data = _provenance(look, look.user_id, server_key(), uuid)
    except YuxiDashError as exc:
        st.error(literal(error_line(exc)))
        return None
    fact = data["fact"]
    st.subheader("Where this fact came from")
    st.markdown(
        md("**{}** —{}→ **{}**", data["source"]["name"], fact["name"], data["target"]["name"])
    )
    st.info(literal(fact["fact"]))  # the fact's text, shown as written
    a, b, c = st.columns(3)
    a.metric("Status", fact["status"] or "unset")
    b.metric("Ratification hits", data["hits"])
    c.metric("Episodes", len(data["episodes"]))
    # a text line, not a metric: a metric cuts a long value short ("assistant_de…")
    st.markdown(md("**Source kind:** {}", fact["source_kind"] or "unknown"))
    draw_records(
        [{k: fact[k] for k in ("created_at", "valid_at", "invalid_at", "expired_at")}],
    )
    for episode in data["episodes"]:
        _draw_episode(episode)
    by = data.get("invalidated_by")
    if by:
        st.markdown(
            md(
                "**Invalidated by** {} (valid from {}): {}",
                code(by["uuid"]),
                by.get("valid_at"),
                by.get("fact"),
            )
        )
        if by.get("episode"):
            st.caption(md("from episode {}", code(by["episode"]["uuid"])))
    if data.get("same_batch"):
        st.markdown(md("**Retired in the same batch** ({} other fact(s))", len(data["same_batch"])))
        draw_records(data["same_batch"], ["source", "name", "target", "fact", "status", "uuid"])
    return data


def _applicable(fact: dict[str, Any]) -> list[str]:
    invalid = (
        fact.get("invalid_at")
        or fact.get("expired_at")
        or fact.get("status") in INVALIDATED_STATUSES
    )
    if invalid:
        return ["restore"]
    actions = ["retract", "supersede"]
    if fact.get("status") == "tentative":
        actions.append("reject")
    return actions


def _draw_undo(actor: Actor, result: dict[str, Any]) -> None:
    """Undo for the correction's author; for an admin, another's with a reason; else a line.

    The service checks the same again (`not_your_correction`, `reason_required`).
    """
    reason = ""
    if result.get("actor") != actor.id:
        if actor.role < Role.ADMIN:
            st.caption("Only its author, or an admin with a reason, may undo this correction.")
            return
        reason = st.text_input(
            "Reason to undo another operator's correction (at least 3 words)",
            key="desk_undo_reason",
        )
    if not st.button("Undo", key="desk_undo"):
        return
    try:
        undone = corrections.undo_correction(result["audit_id"], actor=actor, reason=reason)
    except YuxiDashError as exc:
        st.error(literal(error_line(exc)))
        return
    st.session_state[RESULT_KEY] = undone
    st.session_state[RESET_KEY] = True
    clear_desk_caches()
    st.rerun()


def draw_corrections(actor: Actor, user_id: str, fact: dict[str, Any]) -> None:
    """Operators: the correction form; everyone: the last result and, for who may, Undo."""
    if st.session_state.pop(RESET_KEY, False):
        for key in FORM_KEYS:  # before the widgets exist in this run, so they start empty
            st.session_state.pop(key, None)
    result = st.session_state.get(RESULT_KEY)
    if result:
        st.success(md("{} done — audit row {}", result["action"], result["audit_id"]))
        if result["action"] != "undo":
            _draw_undo(actor, result)
    if actor.role < Role.OPERATOR:
        st.caption("Corrections need the operator role.")
        return
    st.subheader("Correct this fact")
    action = st.radio(
        "Correction", _applicable(fact), horizontal=True, key="desk_action", format_func=literal
    )
    with st.form("desk_correction"):
        reason = st.text_input("Reason (at least 3 words)", key="desk_reason")
        ticket = st.text_input("Ticket (optional, e.g. SUP-1234)", key="desk_ticket")
        text = (
            st.text_area("Corrected fact", value=str(fact.get("fact") or ""), key="desk_text")
            if action == "supersede"
            else None
        )
        confirmed = st.checkbox("I confirm this change to the user's memory", key="desk_confirm")
        submitted = st.form_submit_button(md("Apply {}", action))
    if not submitted:
        return
    if not confirmed:
        st.warning("Tick the confirmation box first.")
        return
    try:
        done = corrections.correct(
            action, user_id, fact["uuid"], actor=actor, reason=reason, ticket=ticket, text=text
        )
    except YuxiDashError as exc:
        st.error(literal(error_line(exc)))
        return
    st.session_state[RESULT_KEY] = done
    st.session_state[RESET_KEY] = True
    clear_desk_caches()
    st.rerun()
