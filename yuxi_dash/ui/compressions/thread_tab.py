"""Thread detail's Compressions tab: each compression, its summary and ledger, items at their line.

Newest first, `PAGE_SIZE` a page, each in an expander (the newest, or the one a link names,
open): when, automatic or manual and by whom, tokens before and after, the summary in its
sections, the ledger's counts per kind and state, then the recoverable and lost items,
cited first. A recoverable item opens the saved file at its line through
`tool_results.saved_lines.open_saved_line` (one audited read per pick, kept in the session,
not repeated on every rerun). A link opens an item too: ``?compression=ID&item=K``.
Every outside string is shown literally (`page_text.literal`, `md`, `st.code`, tables).
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from yuxi_dash.access.roles import Actor
from yuxi_dash.errors import YuxiDashError
from yuxi_dash.store.compressions import TRIGGER_MANUAL
from yuxi_dash.tool_results.saved_lines import open_saved_line
from yuxi_dash.ui.compressions import loaders
from yuxi_dash.ui.compressions.ledger_view import (
    choice_label,
    cited_counts,
    counts_frame,
    evidence_items,
    evidence_line,
    kept_text,
    recoverable_choices,
    summary_parts,
)
from yuxi_dash.ui.page_text import (
    MarkdownSafe,
    code,
    error_line,
    literal,
    md,
    short_id,
    stamp,
    tokens,
)

PAGE_SIZE = 10
OPENED_KEY = "compression_lines"  # {"<id>:<item>": {"lines": SavedLines} | {"error": line}}
CHECKS = {
    ("ok", "history"): "unchanged since this compression (its SHA-256 is the one recorded)",
    ("mismatch", "history"): "changed since this compression (a later compression may have "
    "added to it; lines before its new sections stay where they were)",
    ("ok", "tool result"): "SHA-256 ok: the file is the one recorded when it was offloaded",
    ("mismatch", "tool result"): "content changed: its SHA-256 differs from the one recorded "
    "when it was offloaded",
}
NOT_CHECKED = "not checked: no SHA-256 is recorded for this file"
SUMMARY_HEIGHT = 420  # pixels: a long summary scrolls inside, the ledger stays near
LOST_COLUMNS = ["cited", "kind", "value", "about"]
RECOVERABLE_COLUMNS = ["open", "cited", "kind", "value", "about", "where"]
ITEM_COLUMNS = {
    "open": st.column_config.LinkColumn(
        "", display_text="open", width=44, help="open the saved file at the item's line"
    ),
    "cited": st.column_config.TextColumn("Cited", width=56),
    "kind": st.column_config.TextColumn("Kind", width=120),
    "value": st.column_config.TextColumn("Value", width="medium"),
    "about": st.column_config.TextColumn("About", width="medium"),
    "where": st.column_config.TextColumn("Where (file, line)", width="medium"),
}


def _int_param(name: str) -> int | None:
    value = st.query_params.get(name)
    return int(value) if value and value.isdigit() and len(value) < 19 else None


def linked_compression() -> int | None:
    """The compression id a link names (``?compression=``)."""
    return _int_param("compression")


def _trigger_text(view: dict[str, Any]) -> str:
    if view["trigger"] == TRIGGER_MANUAL:
        return f"manual, by {view['actor']}" if view.get("actor") else "manual"
    return str(view["trigger"])


def _label(view: dict[str, Any]) -> MarkdownSafe:
    cited = cited_counts(view["ledger"])
    return md(
        "{} · {} · {} → {} tokens · cited kept in view: {}",
        stamp(view["at"]),
        _trigger_text(view),
        tokens(view["before_tokens"]),
        tokens(view["after_tokens"]),
        kept_text(cited["visible"], sum(cited.values())),
    )


def draw_compressions(thread_id: str, actor: Actor) -> None:
    """The tab's body for one thread."""
    wanted, wanted_item = linked_compression(), _int_param("item")
    page = 1
    first = loaders.thread_compressions(thread_id, limit=PAGE_SIZE)
    total = first["total"]
    if not total:
        st.info("No compression recorded for this thread yet.")
        return
    pages = -(-total // PAGE_SIZE)
    if pages > 1:
        page = int(
            st.number_input(
                md("Page (of {}), newest first", pages),
                min_value=1,
                max_value=pages,
                value=1,
                key="compressions_page",
            )
        )
    data = (
        first
        if page == 1
        else loaders.thread_compressions(thread_id, limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE)
    )
    views = list(data["rows"])
    if wanted is not None and all(v["id"] != wanted for v in views):
        named = loaders.compression(wanted)
        if named is not None and named["thread_id"] == thread_id:
            views.insert(0, named)  # a link to an older one: shown first, open
    st.caption(
        md(
            "{:,} {} recorded, newest first. Each evidence item the summarized messages held "
            "is in view (the next model call sees it), recoverable (out of view, in a saved "
            "file at a line) or lost.",
            total,
            "compression" if total == 1 else "compressions",
        )
    )
    for position, view in enumerate(views):
        is_linked = view["id"] == wanted
        with st.expander(
            literal(_label(view)), expanded=is_linked or (wanted is None and position == 0)
        ):
            _draw_one(view, actor, data["platform"], wanted_item if is_linked else None)


def _draw_summary(view: dict[str, Any]) -> None:
    preamble, sections = summary_parts(view["summary"] or "")
    if preamble:
        st.caption(literal(preamble))
    for title, bullets in sections:
        st.markdown(md("**{}**", title))
        if bullets:
            # "•" and hard breaks, not a Markdown list: no list is built from outside text
            st.markdown(MarkdownSafe("  \n".join(md("• {}", bullet) for bullet in bullets)))
        else:
            st.caption("(none)")
    if st.toggle("Show the summary as written", key=f"compression_raw_{view['id']}"):
        st.code(view["summary"] or "", language=None, wrap_lines=True)


def _draw_one(
    view: dict[str, Any], actor: Actor, platform: str | None, wanted_item: int | None
) -> None:
    ledger = view["ledger"]
    cited = cited_counts(ledger)
    st.caption(
        md(
            "Compression #{} · {} · agent {} · {:,} messages summarized · checkpoint {}{}",
            view["id"],
            loaders.origin_text(view["origin"], platform),
            view["agent_slug"],
            view["compressed_messages"],
            short_id(view["checkpoint_id"]),
            md(" · history in {}", code(view["history_file"])) if view["history_file"] else "",
        )
    )
    cols = st.columns(4)
    cols[0].metric("Tokens before", tokens(view["before_tokens"]))
    cols[1].metric("Tokens after", tokens(view["after_tokens"]))
    cols[2].metric("Cited kept in view", kept_text(cited["visible"], sum(cited.values())))
    cols[3].metric("Cited lost", tokens(cited["lost"]))
    st.caption(literal(evidence_line(ledger)))
    summary, evidence = st.columns([3, 2])
    with summary:
        st.markdown("**Summary**")
        with st.container(height=SUMMARY_HEIGHT, border=True):
            _draw_summary(view)
    with evidence:
        st.markdown("**Evidence per kind**")
        frame = counts_frame(ledger)
        if frame.empty:
            st.caption("No evidence items in the summarized messages.")
        else:
            st.dataframe(frame, hide_index=True, width="stretch")
    items = evidence_items(ledger, view["thread_id"], view["id"])
    if items.empty:
        st.caption("Every evidence item of this compression stayed in view.")
        return
    for state, title, shown in (
        ("lost", "Lost: in no saved file the summary points to", LOST_COLUMNS),
        ("recoverable", "Recoverable: out of view, in a saved file", RECOVERABLE_COLUMNS),
    ):
        rows = items[items["state"] == state]
        if rows.empty:
            continue
        st.markdown(md("**{}** ({:,}, cited first)", title, len(rows)))
        st.dataframe(rows[shown], hide_index=True, width="stretch", column_config=ITEM_COLUMNS)
    _draw_opener(view, actor, wanted_item)


def _draw_opener(view: dict[str, Any], actor: Actor, wanted_item: int | None) -> None:
    ledger = view["ledger"]
    choices = recoverable_choices(ledger)
    if not choices:
        return
    picked = st.selectbox(
        "Open a recoverable item at its line",
        choices,
        index=choices.index(wanted_item) if wanted_item in choices else None,
        format_func=lambda index: choice_label(ledger, index),
        placeholder="pick an item to read its saved file there (audited)",
        key=f"compression_item_{view['id']}",
    )
    if picked is None:
        return
    st.query_params["compression"] = str(view["id"])  # the URL opens this item again
    st.query_params["item"] = str(picked)
    opened = st.session_state.setdefault(OPENED_KEY, {})
    key = f"{view['id']}:{picked}"
    if key not in opened:  # one audited read per pick, not one per rerun
        try:
            opened[key] = {"lines": open_saved_line(int(view["id"]), int(picked), actor=actor)}
        except YuxiDashError as exc:
            opened[key] = {"error": error_line(exc)}
    if "error" in opened[key]:
        st.error(literal(opened[key]["error"]))
        return
    draw_lines(opened[key]["lines"])


def draw_lines(found: Any) -> None:
    """A `SavedLines`: where it is, whether the file still matches, and the numbered lines."""
    check = CHECKS.get((found.check, found.checked_against), NOT_CHECKED)
    st.caption(
        md(
            "{} · line {:,} of {:,} · {}",
            code(found.path),
            found.line,
            found.total_lines,
            check,
        )
    )
    width = len(str(found.first_line + len(found.lines) - 1))
    numbered = [
        f"{'→' if number == found.line else ' '} {number:>{width}}  {text}"
        for number, text in enumerate(found.lines, start=found.first_line)
    ]
    st.code("\n".join(numbered), language=None, wrap_lines=True)
    own = found.lines[found.line - found.first_line]
    if len(own) < found.line_chars:
        st.caption(
            md(
                "Line {:,} has {:,} characters; shown: characters {:,}–{:,}, around the item.",
                found.line,
                found.line_chars,
                found.line_offset + 1,
                found.line_offset + len(own),
            )
        )
