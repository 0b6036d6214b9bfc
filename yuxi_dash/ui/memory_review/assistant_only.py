"""Assistant-only facts, drawn: the overview's share and fleet list, the Facts
page's assistant-only facts and their bulk retract.

- `draw_share(access)`: on request, the chosen user's share of live facts whose only provenance is
  assistant or tool text (read under the overview's own audited look); a failed read is one
  line and the page goes on.
- `draw_fleet(actor)`: operators and admins, on request: every user graph by that share
  (gated-off users skipped, never read; each user read is an audited look).
- `draw_assistant_only(actor, access)`: a toggle (off by default) shows the user's
  assistant-only facts, after the audited `assistant_only` look. For operators, the bulk
  retract of those created before a moment: Preview (the facts, the count, the token that
  ties the retract to that set), then a reason and Retract, then Undo of the whole bulk.
  The service checks it all again; a set changed since the preview is refused
  (`preview_stale`) and that preview dropped. The rule is `memory.quality.assistant_only`'s;
every string from the graph is shown literally (`ui.page_text`, `ui.tables`).
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.errors import PreviewStale, YuxiDashError
from yuxi_dash.memory.quality.assistant_only import (
    assistant_only_facts,
    assistant_only_fleet,
    assistant_only_share,
    share_text,
)
from yuxi_dash.memory.quality.assistant_only_actions import VIEW
from yuxi_dash.memory.support.bulk_retract import (
    bulk_retract,
    preview_bulk_retract,
    undo_bulk_retract,
)
from yuxi_dash.memory.views.gate import MemoryAccess, open_view
from yuxi_dash.ui.cache import settings_cached
from yuxi_dash.ui.memory import clear_after_correction, clear_on_correction, guarded, server_key
from yuxi_dash.ui.page_text import error_line, literal, md, reason_text, stamp
from yuxi_dash.ui.tables import draw_records

SHOW_KEY = "assistant_only_show"
SHARE_KEY = "assistant_only_share_show"
BEFORE_KEY = "assistant_only_before"
REASON_KEY = "assistant_only_reason"
TICKET_KEY = "assistant_only_ticket"
PREVIEW_KEY = "assistant_only_preview"  # the last preview: {user_id, before, count, facts, token}
RESULT_KEY = "assistant_only_result"  # the last bulk retract or undo, for the message and Undo
COLUMNS = ["fact", "source", "name", "target", "source_kind", "episode_speakers", "created_at"]
RULE = (
    "A live fact is assistant-only when none of its episodes is the user's own words and its "
    "source kind is not `user_asserted`: its source kind is `assistant_derived` or "
    "`tool_observed`, or it has none and every episode is assistant or tool text."
)


@settings_cached
def _share(_access: MemoryAccess, user_id: str, server: str) -> dict[str, Any]:
    return assistant_only_share(_access)


@settings_cached
def _facts(_access: MemoryAccess, user_id: str, server: str) -> dict[str, Any]:
    return assistant_only_facts(_access)


clear_on_correction(_share, _facts)


def clear_assistant_only_caches() -> None:
    """Every memory page's kept reads (`ui.memory.clear_after_correction`)."""
    clear_after_correction()


# --- the overview ----------------------------------------------------------------
def draw_share(access: MemoryAccess) -> None:
    """The user's share, on request: it reads every live fact and its episodes (seconds on a
    large memory), so the overview does not pay for it on every open."""
    if not st.toggle("Count the assistant-only facts", key=SHARE_KEY):
        st.caption("Assistant-only facts: reads every live fact of the user, on request.")
        return
    try:
        data = _share(access, access.user_id, server_key())
    except YuxiDashError as exc:
        st.caption(literal("Assistant-only facts: " + error_line(exc)))
        return
    st.metric(
        "Assistant-only facts",
        share_text(data["assistant_only_share"]),
        help=md(RULE),
    )
    st.caption(
        md(
            "{:,} of {:,} live facts have no provenance in the user's own words. "
            "The Facts page lists them.",
            data["assistant_only_facts"],
            data["live_facts"],
        )
    )


def draw_fleet(actor: Actor) -> None:
    """Every user graph by assistant-only share (operators; not cached)."""
    if actor.role < Role.OPERATOR:
        return
    with st.expander("Assistant-only share of every user graph"):
        st.caption("Reads every live fact of each graph; gated-off users are skipped. Audited.")
        if not st.button("List every user by assistant-only share"):
            return
        fleet = guarded(lambda: assistant_only_fleet(actor=actor))
        rows = fleet["users"]
        shown = [
            {
                "user_id": r["user_id"],
                "share": share_text(r.get("assistant_only_share")),
                "assistant_only_facts": r.get("assistant_only_facts"),
                "live_facts": r.get("live_facts"),
                "gated_off": r["gated_off"],
                "error": reason_text(r["error"]) if r.get("error") else None,
            }
            for r in rows
        ]
        st.write(md("{} user graph(s); gated-off ones were not read.", len(rows)))
        if fleet["truncated"]:
            st.caption(md("Only the first {:,} of {:,} user graphs.", len(rows), fleet["total"]))
        draw_records(shown)


# --- the Facts page ----------------------------------------------------------------
def draw_assistant_only(actor: Actor, access: MemoryAccess) -> None:
    st.subheader("Assistant-only facts")
    st.caption(md(RULE))
    if not st.toggle("Show only the assistant-only facts", key=SHOW_KEY):
        return
    look = guarded(lambda: open_view(access.user_id, VIEW, actor=actor))
    data = guarded(lambda: _facts(look, look.user_id, server_key()))
    st.markdown(
        md(
            "**{:,}** of {:,} live facts ({}) are assistant-only, oldest first.",
            data["assistant_only_facts"],
            data["live_facts"],
            share_text(data["assistant_only_share"]),
        )
    )
    if data["facts"]:
        draw_records(data["facts"], COLUMNS, widths={"fact": "large"})
    else:
        st.info("None: every live fact has the user's own words behind it, or no source.")
    if actor.role >= Role.OPERATOR:
        _draw_bulk(actor, access.user_id)


def _preview(actor: Actor, user_id: str) -> None:
    """Button callback: the moment as the form holds it at the click."""
    before = str(st.session_state.get(BEFORE_KEY) or "")
    st.session_state.pop(RESULT_KEY, None)
    try:
        st.session_state[PREVIEW_KEY] = preview_bulk_retract(user_id, before, actor=actor)
    except YuxiDashError as exc:
        st.session_state.pop(PREVIEW_KEY, None)
        st.session_state[RESULT_KEY] = {"user_id": user_id, "error": error_line(exc)}


def _retract(actor: Actor, preview: dict[str, Any]) -> None:
    """Button callback: the reason and ticket as the form holds them at the click."""
    user_id = preview["user_id"]
    reason = str(st.session_state.get(REASON_KEY) or "")
    ticket = str(st.session_state.get(TICKET_KEY) or "")
    try:
        done = bulk_retract(
            user_id,
            preview["before"],
            actor=actor,
            reason=reason,
            token=preview["preview_token"],
            ticket=ticket or None,
        )
    except YuxiDashError as exc:
        if isinstance(exc, PreviewStale):  # that preview shows a set that is gone
            st.session_state.pop(PREVIEW_KEY, None)
        st.session_state[RESULT_KEY] = {"user_id": user_id, "error": error_line(exc)}
        return
    st.session_state.pop(PREVIEW_KEY, None)
    st.session_state[RESULT_KEY] = {"user_id": user_id, "retracted": done}
    clear_after_correction()


def _undo(actor: Actor, user_id: str, audit_id: int) -> None:
    try:
        done = undo_bulk_retract(audit_id, actor=actor)
    except YuxiDashError as exc:
        st.session_state[RESULT_KEY] = {"user_id": user_id, "error": error_line(exc)}
        return
    st.session_state[RESULT_KEY] = {"user_id": user_id, "undone": done}
    clear_after_correction()


def _draw_result(actor: Actor, user_id: str) -> None:
    result = st.session_state.get(RESULT_KEY)
    if not result or result["user_id"] != user_id:
        return
    if "error" in result:
        st.error(literal(result["error"]))
    elif "retracted" in result:
        done = result["retracted"]
        st.success(md("Retracted {:,} fact(s); audit row {}.", done["count"], done["audit_id"]))
        st.button(
            "Undo this bulk retract",
            key="assistant_only_undo",
            on_click=_undo,
            args=(actor, user_id, done["audit_id"]),
        )
    elif "undone" in result:
        done = result["undone"]
        st.success(md("Undid {:,} retract(s); audit row {}.", done["count"], done["audit_id"]))


def _draw_bulk(actor: Actor, user_id: str) -> None:
    st.markdown("**Retract the assistant-only facts created before a moment**")
    st.text_input(
        "Created before (ISO 8601, UTC)", key=BEFORE_KEY, placeholder="2026-11-01T00:00:00Z"
    )
    st.button(
        "Preview", key="assistant_only_preview_button", on_click=_preview, args=(actor, user_id)
    )
    preview = st.session_state.get(PREVIEW_KEY)
    if preview and preview["user_id"] == user_id:
        st.markdown(
            md(
                "Would retract **{:,}** fact(s) created before {}:",
                preview["count"],
                stamp(preview["before"]),
            )
        )
        if preview["facts"]:
            draw_records(preview["facts"], COLUMNS, widths={"fact": "large"})
        if preview["too_large"]:
            st.warning(
                md(
                    "More than {:,} at once is refused: choose an earlier moment.",
                    preview["max_bulk"],
                )
            )
        elif preview["count"]:
            st.text_input("Reason (at least 3 words)", key=REASON_KEY)
            st.text_input("Ticket (optional)", key=TICKET_KEY, placeholder="SUP-1234")
            st.button(
                md("Retract {:,} fact(s)", preview["count"]),
                key="assistant_only_retract",
                type="primary",
                on_click=_retract,
                args=(actor, preview),
            )
    _draw_result(actor, user_id)
