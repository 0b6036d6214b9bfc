"""Offloaded tool results: filter, check SHA-256, read the preview beside the full content.

Listing reads the index through the cached loaders; opening a file goes through
`yuxi_dash.tool_results.read_tool_result`, which confines the path to the
workdir (a crafted path is refused) and writes an audit row. A file is read
once when it is opened, not on every rerun.
"""

from __future__ import annotations

import streamlit as st

from yuxi_dash.compression import tool_result_preview
from yuxi_dash.errors import YuxiDashError
from yuxi_dash.tool_results import MAX_READ_LIMIT, read_tool_result
from yuxi_dash.ui import loaders
from yuxi_dash.ui.format import error_line, structured_records, tokens
from yuxi_dash.ui.identity import require_actor
from yuxi_dash.ui.messages import draw_preview

PAGE_CHARS = 20_000
OPEN_KEY = "tool_result_open"
STRUCTURED_TOOLS = ("query_kb", "web_search")

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
rows = rows.assign(sha_status=[statuses.get(int(i), "missing") for i in rows["id"]])
problems = int((rows["sha_status"] != "ok").sum())
st.caption(
    f"{len(rows):,} results (newest first, at most 200); SHA-256 re-checked: "
    + ("all ok." if not problems else f"{problems} mismatch or missing.")
)
st.dataframe(
    rows[
        [
            "id",
            "thread_id",
            "user_id",
            "tool_name",
            "chars",
            "approx_tokens",
            "sha_status",
            "path",
            "created_at",
        ]
    ],
    hide_index=True,
    width="stretch",
    column_config={
        "id": st.column_config.NumberColumn("Id", format="%d"),
        "thread_id": st.column_config.TextColumn("Thread"),
        "user_id": st.column_config.TextColumn("User"),
        "tool_name": st.column_config.TextColumn("Tool"),
        "path": st.column_config.TextColumn("Path (under the workdir)"),
        "created_at": st.column_config.DatetimeColumn("Saved at", format="YYYY-MM-DD HH:mm"),
        "sha_status": st.column_config.TextColumn("SHA-256", help="ok / mismatch / missing"),
        "chars": st.column_config.NumberColumn("Chars", format="localized"),
        "approx_tokens": st.column_config.NumberColumn("≈ tokens", format="localized"),
    },
)

labels = {
    int(r["id"]): f"#{r['id']} · {r['tool_name']} · {r['thread_id']} · {tokens(r['chars'])} chars"
    for r in rows.to_dict("records")
}
result_id = st.selectbox("Open", list(labels), format_func=labels.get, key="tool_result_id")


def _read(offset: int, limit: int) -> dict:
    """One audited read; the window and its metadata, or the refusal line."""
    try:
        return {
            "content": read_tool_result(int(result_id), actor=actor, offset=offset, limit=limit)
        }
    except YuxiDashError as exc:
        return {"error": error_line(exc, thread_id=f"tool result #{result_id}")}
    finally:
        loaders.clear_audit_loader()  # the read (or its refusal) added an audit row


opened = st.session_state.get(OPEN_KEY)
if not opened or opened["id"] != result_id:
    opened = {"id": result_id, "first": _read(0, MAX_READ_LIMIT)}
    st.session_state[OPEN_KEY] = opened
if "error" in opened["first"]:
    st.error(opened["first"]["error"])
    st.stop()

first = opened["first"]["content"]
complete = not first.truncated
integrity = {"ok": st.success, "mismatch": st.error, "missing": st.warning}[first.integrity]
integrity(
    f"SHA-256 {first.integrity}: `{first.sha256}` · `{first.path}` · {tokens(first.total_chars)} chars"
)

model_view, full_view = st.columns(2)
with model_view:
    st.subheader("What the model sees")
    draw_preview(tool_result_preview(first.tool_name, first.text, 300))
    if not complete:
        st.caption(f"Preview computed from the first {tokens(len(first.text))} characters.")
with full_view:
    st.subheader("Full content")
    pages = max(1, -(-first.total_chars // PAGE_CHARS))
    page = st.number_input(
        f"Page (of {pages})", min_value=1, max_value=pages, value=1, key="tool_result_page"
    )
    start = (int(page) - 1) * PAGE_CHARS
    if start + PAGE_CHARS <= len(first.text) or complete:
        window = first.text[start : start + PAGE_CHARS]
    else:
        more = _read(start, PAGE_CHARS)
        if "error" in more:
            st.error(more["error"])
            st.stop()
        window = more["content"].text
    st.code(window, language=None, wrap_lines=True, height=480)
    st.download_button(
        "Download" + ("" if complete else f" (first {tokens(len(first.text))} chars)"),
        data=first.text.encode("utf-8"),
        file_name=first.path.rsplit("/", 1)[-1],
        mime="text/plain",
        icon=":material/download:",
    )

if first.tool_name in STRUCTURED_TOOLS:
    records = structured_records(first.text)
    if records and records["records"]:
        st.subheader(f"{first.tool_name} records")
        st.dataframe(records["records"], hide_index=True, width="stretch")
