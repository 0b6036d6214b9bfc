"""Drawing messages readably: the model-visible context, saved-result previews, structured records.

Used by the thread detail and tool-result pages. A saved-result message is shown
as its header fields plus the preview the model sees (query_kb / web_search
previews as a table of records), never as one raw blob. In the chat record a tool
call reads ``calls NAME — key: value`` and a JSON tool result as its fields
(`chat_line`); a whole JSON document is shown indented (`indented_json`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import pandas as pd
import streamlit as st

from yuxi_dash.compression import parse_saved_result
from yuxi_dash.ui.page_text import code, count, literal, md, structured_records
from yuxi_dash.wording import detail_text, recorded

_AVATARS = {
    "human": "user",
    "ai": "assistant",
    "tool": ":material/build:",
    "system": ":material/settings:",
}


def draw_preview(preview: str, *, max_chars: int | None = None, full: str | None = None) -> None:
    """A tool result or its preview: a records table when it is structured JSON, else monospace text.

    `max_chars` clips the monospace fallback (the table is drawn from the whole text);
    `full`: the result the preview was made of, so a field the preview left out reads so.
    """
    structured = structured_records(preview, full)
    if structured is None:
        shown = preview if max_chars is None else preview[:max_chars]
        st.code(shown, language=None, wrap_lines=True)
        if len(shown) < len(preview):
            st.caption(md("… {:,} more characters", len(preview) - len(shown)))
        return
    query = md(" for “{}”", structured["query"]) if structured.get("query") else ""
    st.caption(  # kind, query and counts come from the tool's own JSON
        md(
            "{}{}: {} results, {} shown, {} omitted",
            structured.get("kind") or "results",
            query,
            structured["result_count"],
            len(structured["records"]),
            structured["omitted_results"],
        )
    )
    if structured["records"]:
        st.dataframe(pd.DataFrame(structured["records"]), hide_index=True, width="stretch")
    with st.expander("Exact text"):
        shown = preview if max_chars is None else preview[:max_chars]
        st.code(shown, language="json", wrap_lines=True)


def draw_saved_result(text: str) -> bool:
    """Draw a saved-result message; False when `text` is not one."""
    saved = parse_saved_result(text)
    if saved is None:
        return False
    st.markdown(  # every field is the message's own text: it can be forged by a tool
        md(
            "**Tool result saved** · {} · ~{} tokens  \n{} · SHA-256 {}…",
            code(saved.tool or "?"),
            count(saved.approx_tokens)  # a number: as every count is shown; else as written
            if saved.approx_tokens is not None
            else saved.approx_tokens_text or "?",
            code(saved.path),
            code(saved.sha256[:16]),
        )
    )
    draw_preview(saved.preview)
    if saved.note:
        st.caption(literal(saved.note))
    return True


def draw_message(message: Mapping[str, Any]) -> None:
    """One model-visible message (a dict from loaders.thread_detail)."""
    kind = message["type"]
    if message.get("summary"):
        with st.chat_message("summary", avatar=":material/summarize:"):
            st.markdown("**Summary of earlier history** (what the model sees instead of it)")
            st.text(message["text"])
        return
    with st.chat_message(kind, avatar=_AVATARS.get(kind, ":material/chat:")):
        if kind == "tool":
            st.caption(md("tool result · {}", message.get("name") or "tool"))
            if not draw_saved_result(message["text"]):
                draw_preview(message["text"], max_chars=4000)
            return
        for block in message.get("blocks") or []:  # e.g. reasoning the model gets back
            shown = json.dumps(block, ensure_ascii=False, indent=1, default=str)
            st.caption(md("{} block", block.get("type")))
            st.code(shown[:4000], language="json")
            if len(shown) > 4000:
                st.caption(md("… {:,} more characters", len(shown) - 4000))
        if message["text"]:  # literally: a message's own links or images are never fetched
            st.markdown(literal(message["text"]))
        for call in message.get("tool_calls") or []:
            st.caption(md("calls {}", code(call.get("name"))))
            st.code(
                json.dumps(call.get("args"), ensure_ascii=False, indent=1)[:2000], language="json"
            )


_CALL_LINE = re.compile(r"calls (.+?) (\{.*\})", re.DOTALL)  # `thread_state.chat_text`'s shape


def _json_document(text: str) -> Any:
    """``text`` decoded when it is one JSON object or array, else None."""
    stripped = text.strip()
    if not stripped.startswith(("{", "[")):
        return None
    try:
        return json.loads(stripped)
    except (ValueError, RecursionError):
        return None


def indented_json(text: str) -> str | None:
    """``text`` indented two spaces per level when it is one JSON object or array, else None.

    Keys stay in their order and text stays as written (no ``\\u`` escapes).
    """
    document = _json_document(text)
    return None if document is None else json.dumps(document, ensure_ascii=False, indent=2)


def _readable_json(document: Any) -> str:
    """A JSON tool result as one line: its records' titles, else its fields."""
    structured = structured_records(json.dumps(document))
    if structured is not None and structured["records"]:
        query = f" for “{structured['query']}”" if structured.get("query") else ""
        shown = [
            str(r.get("title") or r.get("id") or r.get("url") or recorded(r))
            for r in structured["records"]
        ]
        n = structured["result_count"]
        return f"{n} result{'' if n == 1 else 's'}{query}: " + "; ".join(shown)
    if isinstance(document, Mapping):
        return detail_text(document)
    return recorded(document)


def chat_line(role: str, content: str | None) -> str:
    """A chat-record message as a table cell reads it: the text as written, except a tool
    call (``calls NAME {args}``, one per line) reads ``calls NAME — key: value · key: value``
    and a JSON tool result reads as its records or fields, never as raw JSON."""
    text = "" if content is None else str(content)
    if role == "tool":
        document = _json_document(text)
        return text if document is None else _readable_json(document)
    if role != "assistant":  # only an assistant turn's calls are written this way
        return text
    lines = []
    for line in text.split("\n"):
        match = _CALL_LINE.fullmatch(line)
        args = _json_document(match.group(2)) if match else None
        if match and isinstance(args, Mapping):
            shown = detail_text(args) if args else "no arguments"
            lines.append(f"calls {match.group(1)} — {shown}")
        else:
            lines.append(line)
    return "\n".join(lines)
