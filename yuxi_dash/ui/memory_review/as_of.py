"""Memory as of a moment on the Facts, Entities and Warm context pages.

- `moment_control(param, label)`: a date and a time (UTC) kept in the URL (`?as_of=ISO`;
  the Facts page's "Diff with" is `?diff=ISO`: the view `diff`, CLI `memory diff`), so a
  link in a support ticket opens the same moment (to the second; the widgets show
  minutes). A link wins over this session's last choice. A time later than now is read as
  now, rounded down to the minute once and kept for that choice (reruns keep the same
  moment); an empty date means no moment (today's memory, as before).
- The facts' page number goes back to 1 when the moment changes.
- `draw_facts`, `draw_entities`, `draw_warm_context`: the views of `memory.history`, each
  through its own audited door (`open_view(..., "as_of" | "diff")`): opening the page
  audits the page's view, and looking back audits the look back.
Every string from the graph is shown literally (`ui.page_text`, `ui.tables`). Widgets whose
key this module sets are never also given a default.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from typing import Any

import streamlit as st

from yuxi_dash.access.roles import Actor
from yuxi_dash.errors import YuxiDashError
from yuxi_dash.memory.history import as_of
from yuxi_dash.memory.history.diff import CHANGES, memory_diff, who
from yuxi_dash.memory.history.timeline import parse_moment
from yuxi_dash.memory.views.gate import MemoryAccess, open_view
from yuxi_dash.ui.cache import settings_cached
from yuxi_dash.ui.memory import clear_on_correction, guarded, server_key
from yuxi_dash.ui.page_text import literal, md, page_count, stamp
from yuxi_dash.ui.tables import draw_records

AS_OF_PARAM = "as_of"
DIFF_PARAM = "diff"
PAGE_KEY = "as_of_page"
PAGE_SIZE = 100
EPISODES_SHOWN = 20
DEFAULT_TIME = time(23, 59)
FACT_COLUMNS = [
    "source",
    "name",
    "target",
    "fact",
    "valid_then",
    "status_then",
    "status_now",
    "created_at",
    "valid_at",
    "invalid_at",
    "retired_at",
    "corrected_since",
    "uuid",
]
FACT_HELPS = {
    "valid_then": "true in the world at that moment (valid_at unknown or before it, "
    "invalid_at unknown or after it), as known today",
    "status_then": "the fact's status then; empty when the fact was retired later and its "
    "status then is not recorded",
    "retired_at": "when the memory stopped holding the fact, after this moment",
    "corrected_since": "one of our corrections changed it later: shown as it was then",
}
FACT_WIDTHS: dict[str, Any] = {"fact": "large", "source": 120, "target": 120, "name": 110}


# --- the control -------------------------------------------------------------------
def _linked(param: str) -> datetime | None:
    value = st.query_params.get(param)
    if not value:
        return None
    try:
        return parse_moment(value, "the moment in the link")
    except YuxiDashError as exc:
        st.warning(md("{} [{}]", exc.message, exc.code))
        return None


def moment_control(param: str = AS_OF_PARAM, label: str = "As of") -> datetime | None:
    """The chosen moment (UTC), or None; mirrored in the URL under `param`."""
    day_key, time_key, shown_key = f"{param}_day", f"{param}_time", f"{param}_shown"
    linked = _linked(param)
    linked_text = linked.isoformat() if linked else None
    if linked_text != st.session_state.get(shown_key) or day_key not in st.session_state:
        st.session_state[day_key] = linked.date() if linked else None  # the link wins
        st.session_state[time_key] = linked.time().replace(tzinfo=None) if linked else DEFAULT_TIME
    with st.container(horizontal=True):
        day = st.date_input(md("{} (date, UTC)", label), key=day_key, format="YYYY-MM-DD")
        moment_time = st.time_input(md("{} (time, UTC)", label), key=time_key, step=60)
    moment: datetime | None = None
    if isinstance(day, date) and isinstance(moment_time, time):
        moment = _not_later_than_now(
            f"{param}_capped", datetime.combine(day, moment_time, tzinfo=UTC)
        )
        if linked is not None and moment == linked.replace(second=0, microsecond=0):
            moment = linked  # the widgets show minutes: keep a link's seconds
    text = moment.isoformat() if moment else None
    if text:
        st.query_params[param] = text
    elif param in st.query_params:
        del st.query_params[param]
    st.session_state[shown_key] = text
    return moment


def _not_later_than_now(key: str, chosen: datetime) -> datetime:
    """The chosen moment; one later than now is now rounded down to the minute, kept in the
    session for that choice (a new "now" on every rerun would be a new look each time)."""
    now = datetime.now(UTC)
    if chosen <= now:
        return chosen
    kept = st.session_state.get(key)
    if not (isinstance(kept, tuple) and kept[0] == chosen):
        kept = (chosen, now.replace(second=0, microsecond=0))
        st.session_state[key] = kept
    return kept[1]


# --- cached loaders (reachable only with a MemoryAccess) -----------------------------
@settings_cached
def _facts(
    _access: MemoryAccess, user_id: str, server: str, at: str, limit: int, offset: int
) -> dict[str, Any]:
    return as_of.facts_as_of(_access, at, limit=limit, offset=offset)


@settings_cached
def _diff(_access: MemoryAccess, user_id: str, server: str, start: str, end: str) -> dict[str, Any]:
    return memory_diff(_access, start, end)


@settings_cached
def _entities(
    _access: MemoryAccess, user_id: str, server: str, at: str, search: str, offset: int
) -> dict[str, Any]:
    return as_of.entities_as_of(_access, at, search=search, limit=PAGE_SIZE, offset=offset)


@settings_cached
def _entity_facts(
    _access: MemoryAccess, user_id: str, server: str, at: str, uuid: str
) -> dict[str, Any]:
    return as_of.entity_facts_as_of(_access, at, uuid)


@settings_cached
def _warm(_access: MemoryAccess, user_id: str, server: str, at: str, query: str) -> dict[str, Any]:
    return as_of.warm_context_as_of(_access, query, at)


@settings_cached
def _episodes(_access: MemoryAccess, user_id: str, server: str, at: str) -> dict[str, Any]:
    return as_of.episodes_as_of(_access, at, limit=EPISODES_SHOWN)


LOADERS = (_facts, _diff, _entities, _entity_facts, _warm, _episodes)
clear_on_correction(*LOADERS)  # a correction changes what memory held then, as we show it


def clear_as_of_caches() -> None:
    for loader in LOADERS:
        loader.clear()


def _door(actor: Actor, access: MemoryAccess, view: str) -> MemoryAccess:
    """The look back's own audited door for the same user."""
    return guarded(lambda: open_view(access.user_id, view, actor=actor))


# --- drawing ---------------------------------------------------------------------
def _corrected_caption(data: dict[str, Any]) -> None:
    if data["corrections_after"]:
        st.caption(
            md(
                "{:,} correction(s) of ours were made after this moment: the facts they "
                "changed are shown as they were then.",
                data["corrections_after"],
            )
        )
    if not data["corrections_complete"]:
        st.warning("This user has more corrections than one look reads; older ones may be missing.")


def draw_facts(actor: Actor, access: MemoryAccess, moment: datetime) -> None:
    """The facts held at the moment, a page at a time, and "Diff with" beside it."""
    look = _door(actor, access, "as_of")
    at = moment.isoformat()
    if st.session_state.get(f"{PAGE_KEY}_moment") != at:  # a new moment starts at page 1
        st.session_state[PAGE_KEY] = 1
        st.session_state[f"{PAGE_KEY}_moment"] = at
    page = max(1, int(st.session_state.get(PAGE_KEY) or 1))
    data = guarded(
        lambda: _facts(look, look.user_id, server_key(), at, PAGE_SIZE, (page - 1) * PAGE_SIZE)
    )
    st.subheader(md("Memory as of {}", stamp(at)))
    gone = len(data["deleted_since"])
    st.caption(
        md(
            "{:,} fact(s) held then, {:,} of them valid in the world then; {:,} retired by then.{}",
            data["total"],
            data["valid_then"],
            data["retired_by_then"],
            md(" {:,} of them deleted since (listed last).", gone) if gone else "",
        )
    )
    _corrected_caption(data)
    last = page_count(data["listed"], PAGE_SIZE)
    if last > 1:
        if int(st.session_state.get(PAGE_KEY) or 1) > last:
            st.session_state[PAGE_KEY] = last
        st.number_input(
            md("Page (of {:,})", last), min_value=1, max_value=last, step=1, key=PAGE_KEY
        )
    if data["facts"]:
        draw_records(data["facts"], FACT_COLUMNS, helps=FACT_HELPS, widths=FACT_WIDTHS)
    elif data["listed"]:
        st.info(md("No facts on page {:,}: pick an earlier page.", page))
    elif not gone:
        st.info("The memory held no facts at this moment.")
    if data["deleted_since"]:
        st.markdown(md("**Held then, deleted since** — {}", len(data["deleted_since"])))
        draw_records(data["deleted_since"], FACT_COLUMNS, helps=FACT_HELPS, widths=FACT_WIDTHS)
    written = guarded(lambda: _episodes(look, look.user_id, server_key(), at))
    with st.expander(
        md("Episodes written by then: {:,} (newest {:,})", written["total"], EPISODES_SHOWN)
    ):
        draw_records(
            written["episodes"], ["created_at", "name", "source_description", "content", "uuid"]
        )
    other = moment_control(DIFF_PARAM, "Diff with")
    if other is not None:
        draw_diff(actor, access, moment, other)


def draw_diff(actor: Actor, access: MemoryAccess, one: datetime, other: datetime) -> None:
    """What changed between the two moments (earlier first), and who or what did it."""
    if one == other:
        st.info("Pick another moment to diff with.")
        return
    start, end = sorted((one, other))
    look = _door(actor, access, "diff")
    data = guarded(
        lambda: _diff(look, look.user_id, server_key(), start.isoformat(), end.isoformat())
    )
    counts = data["counts"]
    st.subheader(md("Diff from {} to {}", stamp(data["from"]), stamp(data["to"])))
    st.caption(
        md(
            "{:,} added, {:,} retired, {:,} changed, {:,} came and went.",
            counts["added"],
            counts["retired"],
            counts["changed"],
            counts["came_and_went"],
        )
    )
    for change in CHANGES:
        rows = [{**row, "by": who(row.get("by"))} for row in data[change]]
        if not rows:
            continue
        st.markdown(md("**{}** — {:,}", change.replace("_", " ").capitalize(), counts[change]))
        draw_records(
            rows,
            ["source", "name", "target", "fact", "by", "created_at", "retired_at", "uuid"],
            helps={"by": "our correction (its audit row), or the episode; an inferred episode "
                   "is the one graphiti-core was ingesting when it retired the fact"},
            widths=FACT_WIDTHS,
        )  # fmt: skip


def draw_entities(actor: Actor, access: MemoryAccess, moment: datetime) -> None:
    """The entities written by the moment and, for one, the facts it had then."""
    look = _door(actor, access, "as_of")
    at = moment.isoformat()
    search = st.text_input("Search entities by name", key="as_of_entity_search").strip()
    data = guarded(lambda: _entities(look, look.user_id, server_key(), at, search, 0))
    st.subheader(md("Entities as of {}", stamp(at)))
    st.caption(
        md(
            "{:,} entities written by then (first {:,} shown). Names and summaries are today's: "
            "graphiti-core does not keep their history.",
            data["total"],
            len(data["entities"]),
        )
    )
    if not data["entities"]:
        st.info("No entity had been written by this moment.")
        return
    draw_records(data["entities"], ["name", "labels", "summary", "created_at", "uuid"])
    names = {e["uuid"]: e["name"] for e in data["entities"]}
    chosen = st.selectbox(
        "Entity", list(names), format_func=lambda u: names[u], index=None, placeholder="pick one"
    )
    if not chosen:
        return
    detail = guarded(lambda: _entity_facts(look, look.user_id, server_key(), at, chosen))
    st.markdown(md("**{}** — {:,} fact(s) held then", names[chosen], detail["total"]))
    draw_records(detail["facts"], FACT_COLUMNS, helps=FACT_HELPS, widths=FACT_WIDTHS)


def draw_warm_context(actor: Actor, access: MemoryAccess, query: str, moment: datetime) -> None:
    """The block the agent would have been handed at a session start at the moment."""
    look = _door(actor, access, "as_of")
    at = moment.isoformat()
    data = guarded(lambda: _warm(look, look.user_id, server_key(), at, query))
    st.subheader(md("At a session start on {}", stamp(at)))
    st.info(literal(data["note"]), icon=":material/info:")
    _corrected_caption(data)
    st.caption(md("{} fact(s), {} recent episode(s).", len(data["facts"]), len(data["episodes"])))
    st.code(data["block"], language="xml", wrap_lines=True)
    stale = [f for f in data["facts"] if f.get("not_live") or not f.get("valid_then")]
    if stale:
        st.warning(
            md("{} of these facts were not live or not true then:", len(stale)),
            icon=":material/warning:",
        )
        draw_records(
            stale,
            ["fact", "not_live", "valid_then", "valid_at", "invalid_at"],
            helps={
                "valid_then": FACT_HELPS["valid_then"],
                "invalid_at": "invalid_at as the memory knew it then (as the block shows it)",
            },
        )
