"""Offloaded tool results: filter, check SHA-256, what the model saw beside the full content.

Listing reads the index through the cached loaders; opening a result goes through
`yuxi_dash.tool_results.opened.open_tool_result`: the preview the model got, from the
thread's checkpoint (a changed or missing file never changes it), and the file,
confined to the workdir (a crafted path is refused), in one audited read. Nothing
is opened until the operator picks a result; it is read once when it is opened,
not on every rerun (a later page of a big file is `read_tool_result`).
"""

from __future__ import annotations

import streamlit as st

from yuxi_dash.compression import parse_saved_result, tool_result_preview
from yuxi_dash.compression.previews.preview import preview_salvage
from yuxi_dash.errors import YuxiDashError
from yuxi_dash.sources import thread_store
from yuxi_dash.tool_results.index import MAX_READ_LIMIT, read_tool_result
from yuxi_dash.tool_results.opened import open_tool_result
from yuxi_dash.ui import loaders
from yuxi_dash.ui.identity import require_actor
from yuxi_dash.ui.messages import draw_preview, indented_json
from yuxi_dash.ui.page_text import (
    check_label,
    code,
    error_line,
    ident,
    literal,
    md,
    page_bounds,
    page_count,
    page_window,
    short_id,
    stamp,
    structured_records,
    tokens,
)

PAGE_CHARS = 20_000
OPEN_KEY = "tool_result_open"
STRUCTURED_TOOLS = ("query_kb", "web_search")
OPEN_CAPTION = (
    "Opening a result reads its file from the workdir, checks it against its SHA-256 "
    "and writes an audit row."
)
SALVAGED_CAPTION = (
    "Preview salvaged from a result that was not valid JSON: the complete leading records "
    "are shown; the file holds every byte."
)
FILE_STATES = {  # the file now, beside what the model saw
    "ok": "ok: its SHA-256 is the one recorded when the result was offloaded",
    "mismatch": "content changed: its SHA-256 differs from the one recorded when the result "
    "was offloaded, so it is not the text the model's preview was made from",
    "missing": "file not on this volume: no such file under this thread's workdir, or that "
    "workdir is not mounted here",
}

actor = require_actor()
st.title("Offloaded tool results")

choices = loaders.filter_choices()
with st.container(horizontal=True):
    user_id = st.selectbox("User", choices["users"], index=None, placeholder="all users")
    thread_id = st.selectbox("Thread", loaders.thread_ids(), index=None, placeholder="all threads")
    tool_name = st.text_input("Tool", placeholder="e.g. query_kb").strip() or None
    min_chars = st.number_input("At least N chars", min_value=0, value=0, step=1000)

rows = loaders.tool_results(
    thread_id=thread_id, user_id=user_id, tool_name=tool_name, min_chars=int(min_chars) or None
)
if rows.empty:
    st.info("No offloaded tool results match these filters.")
    st.stop()

statuses = loaders.verify_statuses(rows["id"].tolist())
checks = [statuses.get(int(i), "missing") for i in rows["id"]]
rows = rows.assign(sha_status=[check_label(c) for c in checks])
changed, absent_here = checks.count("mismatch"), checks.count("missing")
checked = (
    md("{:,} content changed, {:,} file not on this volume.", changed, absent_here)
    if changed or absent_here
    else "all ok."
)
st.caption(
    md("{:,} results (newest first, at most 200); SHA-256 re-checked: {}", len(rows), checked)
)
folders = {path.rpartition("/")[0] for path in rows["path"]}
folder = folders.pop() if len(folders) == 1 else None  # one folder: named once, not per row
table = rows.assign(
    file=[path.rpartition("/")[2] if folder is not None else path for path in rows["path"]],
    saved_at=[stamp(moment) for moment in rows["created_at"]],
)
st.dataframe(
    table[
        [
            "id",
            "thread_id",
            "origin",
            "user_id",
            "tool_name",
            "chars",
            "approx_tokens",
            "sha_status",
            "saved_at",
            "file",
        ]
    ],
    hide_index=True,
    width="stretch",
    column_config={  # widths in pixels: every column fits at 1440 px with the sidebar open
        "id": st.column_config.NumberColumn("Id", format="%d", width=56),
        "thread_id": st.column_config.TextColumn("Thread", width=130),
        "origin": st.column_config.TextColumn(
            "Thread of",
            help='"ours", or "attached: <platform>" for an attached platform\'s thread',
            width=90,
        ),
        "user_id": st.column_config.TextColumn("User", width=110),
        "tool_name": st.column_config.TextColumn("Tool", width=100),
        "chars": st.column_config.NumberColumn("Chars", format="localized", width=64),
        "approx_tokens": st.column_config.NumberColumn("≈ tokens", format="localized", width=68),
        "sha_status": st.column_config.TextColumn(
            "SHA-256",
            help="ok; content changed: the file's SHA-256 differs from the one recorded; "
            "file not on this volume: no such file under this thread's workdir, or that "
            "workdir is not mounted here",
            width=70,
        ),
        "saved_at": st.column_config.TextColumn("Saved at", width=140),
        "file": st.column_config.TextColumn(
            "File" if folder is not None else "Path (under the workdir)",
            help=literal(f"under {folder}/ in the workdir") if folder else None,
            width=146,
        ),
    },
)
if folder:
    st.caption(md("Every file listed is under {} in the workdir.", code(folder + "/")))

labels = {
    int(r["id"]): (
        f"#{ident(r['id'])} · {r['tool_name']} · {r['thread_id']} · {tokens(r['chars'])} chars"
    )
    for r in rows.to_dict("records")
}
result_id = st.selectbox(
    "Open",
    list(labels),
    index=None,
    format_func=labels.get,
    placeholder="pick a result to open it",
    key="tool_result_id",
)
if result_id is None:  # opening is a deliberate look at a user's data: nothing read until then
    st.session_state.pop(OPEN_KEY, None)
    st.caption(literal(OPEN_CAPTION))
    st.stop()


def _open() -> dict:
    """The one audited first look, or the refusal line."""
    try:
        return {
            "opened": open_tool_result(
                int(result_id), actor=actor, limit=MAX_READ_LIMIT, store_for=thread_store
            )
        }
    except YuxiDashError as exc:
        return {"error": error_line(exc, thread_id=f"tool result #{result_id}")}


def _read(offset: int, limit: int) -> dict:
    """One audited read of a later window; the window and its metadata, or the refusal line."""
    try:
        return {
            "content": read_tool_result(int(result_id), actor=actor, offset=offset, limit=limit)
        }
    except YuxiDashError as exc:
        return {"error": error_line(exc, thread_id=f"tool result #{result_id}")}


opened = st.session_state.get(OPEN_KEY)
if not opened or opened["id"] != result_id:
    opened = {"id": result_id, "first": _open()}
    look = opened["first"].get("opened")
    whole = look is not None and look.content is not None and not look.content.truncated
    opened["indented"] = indented_json(look.content.text) if whole else None  # once per open
    st.session_state[OPEN_KEY] = opened
if "error" in opened["first"]:
    st.error(literal(opened["first"]["error"]))
    st.stop()

look = opened["first"]["opened"]
first = look.content  # None: the file is not on this volume
integrity = {"ok": st.success, "mismatch": st.error, "missing": st.warning}[look.integrity]
integrity(
    md(
        "SHA-256 {}: {} · {}{}",
        check_label(look.integrity),
        code(look.sha256),
        code(look.path),
        md(" · {} chars", tokens(first.total_chars)) if first is not None else md(""),
    )
)
complete = first is not None and not first.truncated
file_ok = complete and look.integrity == "ok"  # the text the model's preview was made from

model_messages, full_view = st.columns(2)
with model_messages:
    st.subheader("What the model sees")
    saved = parse_saved_result(look.sent) if look.sent is not None else None
    if saved is not None:  # the preview the model got, whatever happened to the file since
        st.caption(
            md(
                "The preview the model got in place of the result, as the thread's checkpoint "
                "{} holds it.",
                short_id(look.sent_checkpoint_id),
            )
        )
        draw_preview(saved.preview, full=first.text if file_ok and first else None)
        if saved.note:
            st.caption(literal(saved.note))
        if file_ok and first and preview_salvage(saved.preview, first.text):
            st.caption(literal(SALVAGED_CAPTION))
    elif look.sent is not None:
        st.caption(
            md(
                "The message the model got, as checkpoint {} holds it.",
                short_id(look.sent_checkpoint_id),
            )
        )
        draw_preview(look.sent)
    elif first is not None and look.integrity == "ok":  # the file is what the model's came from
        st.caption(
            md(
                "Not in the thread's checkpoint ({}): rebuilt from the file, whose SHA-256 "
                "matches.",
                look.sent_missing,
            )
        )
        preview = tool_result_preview(first.tool_name, first.text, 300)
        draw_preview(preview, full=first.text)
        if complete and preview_salvage(preview, first.text):  # a partial read is cut by the read
            st.caption(literal(SALVAGED_CAPTION))
        if not complete:
            st.caption(
                md("Preview computed from the first {} characters.", tokens(len(first.text)))
            )
    else:
        st.warning(
            md(
                "What the model saw cannot be shown: {}, and the file is {}.",
                look.sent_missing,
                check_label(look.integrity),
            )
        )
with full_view:
    st.subheader("Full content")
    st.caption(md("The file now: {}.", FILE_STATES[look.integrity]))
    if first is None:
        st.stop()
    indented = opened.get("indented")
    text, total = (indented, len(indented)) if indented else (first.text, first.total_chars)
    if complete:  # pages break where a line starts; the last page is the last that has text
        pages = next(
            p
            for p in range(1, page_count(total, PAGE_CHARS) + 1)
            if page_bounds(text, 0, total, p + 1, PAGE_CHARS)[0] >= total
        )
    else:
        pages = page_count(total, PAGE_CHARS)
    page = st.number_input(
        md("Page (of {})", pages), min_value=1, max_value=pages, value=1, key="tool_result_page"
    )
    offset, limit = page_window(int(page), PAGE_CHARS)
    source, source_offset = text, 0
    if not complete and offset + limit > len(first.text):
        more = _read(offset, limit)
        if "error" in more:
            st.error(literal(more["error"]))
            st.stop()
        source, source_offset = more["content"].text, offset
    start, end = page_bounds(source, source_offset, total, int(page), PAGE_CHARS)
    window = source[start - source_offset : end - source_offset]
    st.caption(
        md(
            "{}Characters {}–{} of {}; a page starts at the beginning of a line.",
            "JSON, shown indented (the download is the file as written). " if indented else "",
            tokens(start + 1 if end > start else start),
            tokens(end),
            tokens(total),
        )
    )
    st.code(window, language="json" if indented else None, wrap_lines=True, height=480)
    st.download_button(
        "Download" if complete else md("Download (first {} chars)", tokens(len(first.text))),
        data=first.text.encode("utf-8"),
        file_name=first.path.rsplit("/", 1)[-1],
        mime="text/plain",
        icon=":material/download:",
    )

if first is not None and first.tool_name in STRUCTURED_TOOLS:
    records = structured_records(first.text)
    if records and records["records"]:
        st.subheader(md("{} records in the file", first.tool_name))
        st.dataframe(records["records"], hide_index=True, width="stretch")
