"""Retirements that look wrong, drawn: the Facts page's list and the overview's fleet count.

- `draw_retirements(actor, access)`: on request (a toggle: the list reads every retired
  fact, seconds on a large memory), the audited `retirements` look, then one user's retired facts a page at a time, each
  beside what retired it (the episode and the facts written with it, or our correction
  with its audit row) and the **suspicious** flag; a toggle keeps suspicious ones only.
  For operators, a row graphiti retired has Restore: the audited `restore` correction
  (with undo on the fact's own panel), after a reason and a confirmation; a row our
  correction retired has Undo of that correction (its audit row) instead; a fact
  written already ended, or ended by its own date, has neither (`no_restore` says why).
  A Restore that also clears an end date says so. The service checks role and rules.
  After either, every memory page's kept reads are cleared (`clear_after_correction`).
- `draw_fleet_count(actor)`: operators and admins, on request: per user graph, how many
  retirements look suspicious (gated-off users skipped, never read).
Every string from the graph is shown literally (`ui.page_text`).
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.errors import YuxiDashError
from yuxi_dash.memory.quality.retirements import retirement_counts, retirements
from yuxi_dash.memory.support import corrections
from yuxi_dash.memory.views.gate import MemoryAccess, open_view
from yuxi_dash.ui.cache import settings_cached
from yuxi_dash.ui.memory import (
    clear_after_correction,
    clear_on_correction,
    guarded,
    server_key,
)
from yuxi_dash.ui.page_text import (
    code,
    error_line,
    ident,
    literal,
    md,
    page_count,
    reason_text,
    stamp,
)
from yuxi_dash.ui.tables import draw_records

PAGE_SIZE = 20
SHOW_KEY = "retire_show"
SUSPICIOUS_KEY = "retire_suspicious"
PAGE_KEY = "retire_page"
RESTORE_KEY = "retire_restore"  # the fact whose Restore (or Undo) form is open
RESULT_KEY = "retire_result"
ROUND_KEY = "retire_round"  # a new round after each restore: the form starts empty


@settings_cached
def _retirements(
    _access: MemoryAccess, user_id: str, server: str, suspicious: bool, offset: int
) -> dict[str, Any]:
    return retirements(_access, suspicious_only=suspicious, limit=PAGE_SIZE, offset=offset)


clear_on_correction(_retirements)


def clear_retirement_caches() -> None:
    """Every memory page's kept reads (`ui.memory.clear_after_correction`)."""
    clear_after_correction()


def _fact_line(row: dict[str, Any]) -> Any:
    return md("**{}** —{}→ **{}**", row.get("source"), row.get("name"), row.get("target"))


def _retired_by(row: dict[str, Any]) -> None:
    """What retired the fact: our correction, or the episode and its facts."""
    if row["kind"] == "correction":
        found = row["correction"]
        st.markdown(
            md(
                "Retired by our correction ({}, {}, {}) · audit row {}",
                found["action"],
                found["actor"],
                stamp(found["at"]),
                ident(found["audit_id"]),
            )
        )
        return
    if row["kind"] == "own_episode":
        st.caption("Written already ended: graphiti expired it in the pass that wrote it.")
    episode = row.get("episode")
    if episode:
        st.caption(
            md(
                "Episode {} · {} · {}",
                code(episode["uuid"]),
                stamp(episode.get("created_at")),
                episode.get("source_description") or "",
            )
        )
        st.markdown(md("Episode text: {}", episode.get("content") or ""))
    elif row.get("episode_uuid"):
        st.caption(md("Episode {} (not found in the graph)", code(row["episode_uuid"])))
    if not row["retiring_facts"]:
        if row["kind"] == "unmatched":
            st.caption("Unmatched: no episode was written just before its retirement.")
        return
    st.caption(
        md("Retired by {} fact(s) of that episode ({})", row["retiring_count"], row["basis"])
    )
    draw_records(
        [{**f, "shared": ", ".join(f["shared"]) or "nothing"} for f in row["retiring_facts"]],
        ["source", "name", "target", "fact", "shared", "created_at", "uuid"],
    )


def _change_form(actor: Actor, access: MemoryAccess, row: dict[str, Any]) -> None:
    """Restore (graphiti's retirement) or Undo (our correction), after a confirmation."""
    undo = row["kind"] == "correction"
    form_id = f"{row['uuid']}:{st.session_state.get(ROUND_KEY, 0)}"
    with st.form(f"retire_restore_form:{form_id}"):
        if undo:
            found = row["correction"]
            label = md("Undo our {} (audit row {})", found["action"], ident(found["audit_id"]))
            if found["actor"] != actor.id:
                st.caption("Undoing another operator's correction needs the admin role.")
        else:
            label = md("Restore this fact")
            if row.get("invalid_at"):
                st.warning(
                    md(
                        "Restoring also clears its end date (valid until {}).",
                        stamp(row["invalid_at"]),
                    )
                )
        reason = st.text_input("Reason (at least 3 words)", key=f"retire_reason:{form_id}")
        ticket = (
            None
            if undo
            else st.text_input("Ticket (optional, e.g. SUP-1234)", key=f"retire_ticket:{form_id}")
        )
        confirmed = st.checkbox(
            "I confirm this change to the user's memory", key=f"retire_confirm:{form_id}"
        )
        submitted = st.form_submit_button(label)
    if not submitted:
        return
    if not confirmed:
        st.warning("Tick the confirmation box first.")
        return
    try:
        if undo:
            done = corrections.undo_correction(
                int(row["correction"]["audit_id"]), actor=actor, reason=reason
            )
        else:
            done = corrections.restore(
                access.user_id, str(row["uuid"]), actor=actor, reason=reason, ticket=ticket
            )
    except YuxiDashError as exc:
        st.error(literal(error_line(exc)))
        return
    st.session_state[RESULT_KEY] = {k: done[k] for k in ("user_id", "action", "audit_id")}
    st.session_state.pop(RESTORE_KEY, None)
    st.session_state[ROUND_KEY] = int(st.session_state.get(ROUND_KEY, 0)) + 1
    clear_after_correction()
    st.rerun()


def _draw_row(actor: Actor, access: MemoryAccess, row: dict[str, Any]) -> None:
    with st.container(border=True):
        template = (
            "{} · retired {} · :red[**suspicious**]" if row["suspicious"] else "{} · retired {}"
        )
        st.markdown(md(template, _fact_line(row), stamp(row["retired_at"])))
        st.markdown(md("{}", row.get("fact") or ""))
        _retired_by(row)
        if actor.role < Role.OPERATOR:
            return
        undo = row["kind"] == "correction"
        if row.get("no_restore") and not undo:
            st.caption(md("No Restore: {}.", row["no_restore"]))
            return
        if st.session_state.get(RESTORE_KEY) == row["uuid"]:
            _change_form(actor, access, row)
        elif st.button(
            "Undo our correction" if undo else "Restore",
            key=f"retire_restore_button:{row['uuid']}",
        ):
            st.session_state[RESTORE_KEY] = row["uuid"]
            st.rerun()


def draw_retirements(actor: Actor, access: MemoryAccess) -> None:
    """The user's retirements (an audited look of its own), with Restore (module doc)."""
    st.subheader("Retirements that look wrong")
    st.caption(
        "Each retired fact beside what retired it. Graphiti retires facts while it reads a "
        "new episode; a retirement is suspicious when no fact that episode wrote shares an "
        "entity or the relation name with the retired fact. Our own corrections are listed "
        "as such."
    )
    if not st.toggle("Show this user's retirements", key=SHOW_KEY):
        st.caption("Reads every retired fact of the user: seconds on a large memory.")
        return
    look = guarded(lambda: open_view(access.user_id, "retirements", actor=actor))
    suspicious = st.toggle(
        "Suspicious only",
        key=SUSPICIOUS_KEY,
        on_change=lambda: st.session_state.pop(PAGE_KEY, None),
    )
    page = max(0, int(st.session_state.get(PAGE_KEY) or 1) - 1)
    data = guarded(
        lambda: _retirements(look, look.user_id, server_key(), suspicious, page * PAGE_SIZE)
    )
    result = st.session_state.get(RESULT_KEY)
    if result and result.get("user_id") == access.user_id:
        st.success(md("{} done — audit row {}", result["action"], ident(result["audit_id"])))
    counts = data["counts"]
    st.markdown(
        md(
            "**{:,} retired fact(s)**: {:,} suspicious · {:,} by graphiti · {:,} by our "
            "corrections · {:,} written already ended · {:,} unmatched",
            data["retired"],
            counts["suspicious"],
            counts["graphiti"],
            counts["correction"],
            counts["own_episode"],
            counts["unmatched"],
        )
    )
    if not data["rows"] and page > 0:  # the list got shorter (a restore): back to page 1
        st.session_state.pop(PAGE_KEY, None)
        st.rerun()
    if not data["rows"]:
        st.info(
            "No suspicious retirements for this user."
            if suspicious
            else "This user has no retired facts."
        )
        return
    if actor.role < Role.OPERATOR:
        st.caption("Restoring a fact, or undoing a correction, needs the operator role.")
    for row in data["rows"]:
        _draw_row(actor, look, row)
    pages = page_count(data["matching"], PAGE_SIZE)
    if pages > 1:
        if int(st.session_state.get(PAGE_KEY) or 1) > pages:
            st.session_state[PAGE_KEY] = pages
        st.number_input(
            md("Page (of {})", pages), min_value=1, max_value=pages, step=1, key=PAGE_KEY
        )


def draw_fleet_count(actor: Actor) -> None:
    """Operators: on request, suspicious retirements per user graph (gated-off skipped)."""
    if actor.role < Role.OPERATOR:
        return
    with st.expander("Suspicious retirements of every user"):
        st.caption(
            "Reads every user's retired facts; gated-off users are skipped, not read. "
            "Each user read is one audited look; a user whose read failed shows the error."
        )
        if not st.button("Count suspicious retirements"):
            return
        rows = guarded(lambda: retirement_counts(actor=actor))
        flagged = [r for r in rows if not r["gated_off"] and r["suspicious"]]
        st.write(md("{} user graph(s); {} with suspicious retirements.", len(rows), len(flagged)))
        draw_records(
            [{**r, "reason": reason_text(r["reason"]) if r.get("reason") else None} for r in rows],
            ["user_id", "suspicious", "retired", "by_graphiti", "by_correction", "gated_off"]
            + ["reason", "error"],
        )
