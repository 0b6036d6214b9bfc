"""The fact panel of the Facts page: pick a fact, read its provenance, correct it, undo.

- `fact_picker(access)`: the user's facts, newest first, or a pasted uuid; the choice is in
  the URL (`?fact=UUID`, a link or reload opens it). With none asked for: the newest active
  fact the user asserted, else the newest. Another user starts the picker afresh.
- `draw_provenance(actor, access, uuid)`: the audited `provenance` look and its drawing:
  each episode's chat message (never one written after the fact) with what matched, who
  said it, a link to it, what invalidated the fact and the facts retired with it.
- `draw_corrections(actor, access, fact)`: the fact's corrections from the store (any
  session) with Undo on the newest undoable one for its author, or an admin with a reason;
  for operators, the correction form. The form, its messages and Undo belong to one fact:
  another fact starts them empty. The service checks role and rules again.
Widgets whose key the page sets are never also given a default. Every string from the
graph or the chat is shown literally (`ui.page_text`).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import streamlit as st
from streamlit.errors import StreamlitAPIException

from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.errors import YuxiDashError
from yuxi_dash.memory.graph.correction_rules import INVALIDATED_STATUSES
from yuxi_dash.memory.support import corrections
from yuxi_dash.memory.views.gate import MemoryAccess, open_view
from yuxi_dash.memory.views.gated_views import facts
from yuxi_dash.memory.views.provenance import fact_provenance
from yuxi_dash.ui.cache import settings_cached
from yuxi_dash.ui.memory import clear_after_correction, clear_on_correction, guarded, server_key
from yuxi_dash.ui.page_text import (
    MarkdownSafe,
    code,
    error_line,
    highlighted,
    ident,
    literal,
    md,
    stamp,
)
from yuxi_dash.ui.tables import draw_records

FACT_KEY = "desk_fact"  # a fact to open on (set by a caller; the URL's `fact` wins)
SELECT_KEY = "desk_fact_select"
PASTE_KEY = "desk_fact_uuid"
OWNER_KEY = "desk_fact_user"  # whose facts the picker's state belongs to
SHOWN_KEY = "desk_fact_shown"  # the fact this session last showed (and wrote to the URL)
RESULT_KEY = "desk_result"
RESET_KEY = "desk_form_reset"
# The correction form's inputs (and the undo reason) are keyed `<name>:<form id>`, the form
# id naming the fact and a round: another fact, a correction or an undo starts a new round,
# so the browser draws new, empty widgets and never keeps another change's reason or tick.
FORM_ID_KEY = "desk_form_id"
FORM_ROUND_KEY = "desk_form_round"
FACT_LIST_LIMIT = 500


@settings_cached
def _fact_list(_access: MemoryAccess, user_id: str, server: str) -> list[dict[str, Any]]:
    return list(facts(_access, limit=FACT_LIST_LIMIT)["facts"])


@settings_cached
def _provenance(_access: MemoryAccess, user_id: str, server: str, uuid: str) -> dict[str, Any]:
    return fact_provenance(_access, uuid)


clear_on_correction(_fact_list, _provenance)


def clear_desk_caches() -> None:
    """Every memory page's kept reads (`ui.memory.clear_after_correction`)."""
    clear_after_correction()


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


def _forget_other_users_choice(user_id: str) -> None:
    """The picker's state belongs to one user: another user starts it afresh."""
    owner = st.session_state.get(OWNER_KEY)
    if owner == user_id:
        return
    stale = (SELECT_KEY, SHOWN_KEY) if owner is None else (SELECT_KEY, SHOWN_KEY, FACT_KEY)
    for key in stale:
        st.session_state.pop(key, None)
    if PASTE_KEY in st.session_state:
        _clear_paste()
    st.session_state[OWNER_KEY] = user_id


def _clear_paste() -> None:
    st.session_state[PASTE_KEY] = ""  # set, not dropped: the browser's box empties too


def fact_picker(access: MemoryAccess) -> str | None:
    """The chosen fact uuid (select box over the newest facts, or a pasted uuid), in the URL.

    A URL fact this session did not write (a link, a reload) is opened; otherwise the
    select box keeps the operator's choice. The select box's value is set through
    session state only (no `index=`), so Streamlit never sees two defaults.
    """
    rows = guarded(lambda: _fact_list(access, access.user_id, server_key()))
    by_uuid = {str(r["uuid"]): r for r in rows}
    _forget_other_users_choice(access.user_id)
    linked = st.query_params.get("fact") or None
    if linked and linked != st.session_state.get(SHOWN_KEY):
        wanted: str | None = linked  # a link or a reload: the URL says which fact
    else:
        wanted = (
            st.session_state.get(SELECT_KEY)
            or st.session_state.get(FACT_KEY)
            or st.session_state.get(SHOWN_KEY)
            or headline_fact(rows)
        )
    options = list(by_uuid)
    if wanted and wanted not in by_uuid:
        options.insert(0, wanted)
    if wanted and st.session_state.get(SELECT_KEY) != wanted:
        st.session_state[SELECT_KEY] = wanted
    chosen = st.selectbox(
        md("Fact ({:,} newest)", len(rows)),
        options,
        index=None,
        format_func=lambda u: _label(by_uuid[u]) if u in by_uuid else u,
        placeholder="choose a fact to see where it came from",
        key=SELECT_KEY,
        on_change=_clear_paste,  # a fact chosen in the list replaces a pasted one
    )
    pasted = st.text_input("…or paste a fact uuid", key=PASTE_KEY).strip()
    chosen = pasted or chosen
    if chosen and linked != chosen:
        st.query_params["fact"] = chosen
    st.session_state[SHOWN_KEY] = chosen
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
        st.warning("No chat message written before this fact matches this episode.")
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
    if episode.get("missing_words") and not episode.get("shared_words"):
        st.warning(
            md(
                "This message never says the fact's key words ({}): the fact may not come "
                "from what was said.",
                ", ".join(episode["missing_words"]),
            )
        )


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


def _may_undo(actor: Actor, row: dict[str, Any]) -> bool:
    """Its author (an operator), or an admin; the service checks the same again."""
    own = row.get("actor") == actor.id
    return actor.role >= Role.OPERATOR and (own or actor.role >= Role.ADMIN)


def _draw_undo(actor: Actor, row: dict[str, Any], fid: str) -> None:
    """Undo for the correction's author; for an admin, another's with a reason; else a line.

    The service checks the same again (`not_your_correction`, `reason_required`).
    """
    if actor.role < Role.OPERATOR:
        return  # the page says corrections need the operator role
    if not _may_undo(actor, row):
        st.caption("Only its author, or an admin with a reason, may undo this correction.")
        return
    reason = ""
    if row.get("actor") != actor.id:
        reason = st.text_input(
            "Reason to undo another operator's correction (at least 3 words)",
            key=f"desk_undo_reason:{fid}",
        )
    if not st.button(md("Undo {} (audit row {})", row["action"], row["audit_id"]), key="desk_undo"):
        return
    try:
        undone = corrections.undo_correction(row["audit_id"], actor=actor, reason=reason)
    except YuxiDashError as exc:
        st.error(literal(error_line(exc)))
        return
    st.session_state[RESULT_KEY] = undone
    st.session_state[RESET_KEY] = True
    clear_after_correction()
    st.rerun()


def _history_line(row: dict[str, Any]) -> MarkdownSafe:
    line = md(
        "**{}** by {} · {} · audit row {}",
        row["action"],
        row["actor"],
        stamp(row["at"]),
        ident(row["audit_id"]),
    )
    if row.get("ticket"):
        line = md("{} · ticket {}", line, row["ticket"])
    if row.get("reason"):
        line = md("{} — {}", line, row["reason"])
    if row.get("new_fact_uuid"):
        line = md("{} · new fact {}", line, code(row["new_fact_uuid"]))
    if row.get("undone_by_audit_id") is not None:
        line = md(
            "{} · *undone* by audit row {} ({})",
            line,
            ident(row["undone_by_audit_id"]),
            stamp(row["undone_at"]),
        )
    return line


def draw_history(actor: Actor, access: MemoryAccess, fact_uuid: str, fid: str) -> None:
    """The fact's corrections, newest first, read from the store in any session, with Undo."""
    history = guarded(lambda: corrections.fact_corrections(access, fact_uuid))
    st.subheader("Corrections of this fact")
    if not history:
        st.caption("No corrections of this fact yet.")
        return
    for row in history:
        st.markdown(md("{}", _history_line(row)))
        if row["undoable"]:
            _draw_undo(actor, row, fid)


def form_id(fact_uuid: str) -> str:
    """This run's form id: a new round for another fact, or after a correction or undo.

    A result shown is the one made on this fact; another fact's is dropped.
    """
    reset = st.session_state.pop(RESET_KEY, False)
    current = str(st.session_state.get(FORM_ID_KEY) or "")
    if current.startswith(f"{fact_uuid}:") and not reset:
        return current
    round_no = int(st.session_state.get(FORM_ROUND_KEY) or 0) + 1
    st.session_state[FORM_ROUND_KEY] = round_no
    st.session_state[FORM_ID_KEY] = current = f"{fact_uuid}:{round_no}"
    result = st.session_state.get(RESULT_KEY)
    if result and fact_uuid not in (result.get("fact_uuid"), result.get("new_fact_uuid")):
        st.session_state.pop(RESULT_KEY, None)
    return current


def draw_corrections(actor: Actor, access: MemoryAccess, fact: dict[str, Any]) -> None:
    """The last result on this fact, the fact's corrections with Undo, then the form."""
    uuid = str(fact["uuid"])
    fid = form_id(uuid)
    result = st.session_state.get(RESULT_KEY)
    if result:
        st.success(md("{} done — audit row {}", result["action"], ident(result["audit_id"])))
    draw_history(actor, access, uuid, fid)
    if actor.role < Role.OPERATOR:
        st.caption("Corrections need the operator role.")
        return
    st.subheader("Correct this fact")
    action = st.radio(
        "Correction",
        _applicable(fact),
        horizontal=True,
        key=f"desk_action:{fid}",
        format_func=literal,
    )
    with st.form(f"desk_correction:{fid}"):
        reason = st.text_input("Reason (at least 3 words)", key=f"desk_reason:{fid}")
        ticket = st.text_input("Ticket (optional, e.g. SUP-1234)", key=f"desk_ticket:{fid}")
        text = (
            st.text_area(
                "Corrected fact", value=str(fact.get("fact") or ""), key=f"desk_text:{fid}"
            )
            if action == "supersede"
            else None
        )
        confirmed = st.checkbox(
            "I confirm this change to the user's memory", key=f"desk_confirm:{fid}"
        )
        submitted = st.form_submit_button(md("Apply {}", action))
    if not submitted:
        return
    if not confirmed:
        st.warning("Tick the confirmation box first.")
        return
    try:
        done = corrections.correct(
            action, access.user_id, uuid, actor=actor, reason=reason, ticket=ticket, text=text
        )
    except YuxiDashError as exc:
        st.error(literal(error_line(exc)))
        return
    st.session_state[RESULT_KEY] = done
    st.session_state[RESET_KEY] = True
    clear_after_correction()
    st.rerun()
