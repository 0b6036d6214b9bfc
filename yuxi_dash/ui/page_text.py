"""Plain-text formatting for the dashboard: ratios, tokens, ages, and one-line outcomes.

Pure functions (no Streamlit), so pages stay thin and the wording is tested
once: the operator sees every outcome or refusal as exactly one line. A ratio,
a count, a moment and a LaunchDarkly reason read as `yuxi_dash.wording` writes
them (re-exported here), the same as on the CLI.
"""

from __future__ import annotations

import functools
import json
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from yuxi_dash.compression.previews.preview import locate_records
from yuxi_dash.compression.previews.salvage import parse_records_text
from yuxi_dash.errors import YuxiDashError
from yuxi_dash.wording import (  # noqa: F401 - re-exported: the pages' one formatter per kind
    MISSING,
    PERCENT_FORMAT,
    absent,
    attached_label,
    check_label,
    count,
    ident,
    pct,
    percent_value,
    plain,
    reason_text,
    stamp,
)

_REFUSAL_PREFIX = {
    "thread_busy": "Busy",
    "stale_state": "Stale",
    "compression_unsupported": "Unsupported",
    "thread_not_found": "Not found",
    "agent_not_found": "Not found",
    "forbidden": "Not allowed",
    "workdir_unavailable": "Workdir unavailable",
    "summarizer_failed": "Summarizer failed",
    "path_refused": "Refused",
    "thread_attached": "Attached",
    "platform_unavailable": "Platform unavailable",
    "platform_outcome_unknown": "Outcome unknown",
    "compressed_not_projected": "Compressed, not shown yet",
    "platform_auth_failed": "Platform refused the token",
    "platform_bad_response": "Platform answered oddly",
    "platform_misconfigured": "Platform settings",
}


def crossing_text(turns: Any, seconds: Any) -> str:
    """When a thread crosses its summary threshold: "now", "3 turns, ~40 min", "3 turns, due
    now" (at its pace it would have by now: it has been idle) or "–" (no forecast: too little
    history since the last compression, or no growth)."""
    if not isinstance(turns, int | float) or turns != turns:  # None or NaN: no forecast
        return "–"
    if turns <= 0:
        return "now"
    text = f"{int(turns):,} turn{'s' if int(turns) != 1 else ''}"
    if isinstance(seconds, int | float) and seconds == seconds and seconds > 0:
        minutes = max(1, round(seconds / 60))
        text += f", ~{minutes:,} min" if minutes < 120 else f", ~{minutes / 60:.0f} h"
    elif seconds == 0:
        text += ", due now"
    return text


def crossing_note(turns: Any) -> str:
    """A list row's forecast as its note: "100% in N turns" (nothing when over or unknown)."""
    text = crossing_text(turns, None)
    return f"100% in {text}" if text not in ("–", "now") else ""


def tokens(value: float | None) -> str:
    """A token or character count with separators: 102400 -> '102,400' (see `wording.count`)."""
    return count(value)


def tokens_to_threshold(next_llm_input_tokens: int, summary_trigger_tokens: int) -> int:
    """How many tokens the next call may add before the summary threshold (negative: over)."""
    return int(summary_trigger_tokens) - int(next_llm_input_tokens)


def threshold_room_text(next_llm_input_tokens: int, summary_trigger_tokens: int) -> str:
    """The room before the summary threshold in words: '12,400 left' or 'over by 7,600'."""
    room = tokens_to_threshold(next_llm_input_tokens, summary_trigger_tokens)
    return f"{room:,} left" if room >= 0 else f"over by {-room:,}"


def text_or_none(value: object) -> str | None:
    """A non-empty string, else None (DataFrames turn None into NaN)."""
    return value if isinstance(value, str) and value else None


def busy_label(reason: str | None) -> str:
    return text_or_none(reason) or "idle"


def short_id(checkpoint_id: str | None) -> str:
    """A checkpoint id as people compare them: its last 8 characters, or 'none'."""
    if absent(checkpoint_id) or not checkpoint_id:
        return "none"
    return f"…{str(checkpoint_id)[-8:]}"


def ago(moment: datetime | None, *, now: datetime | None = None) -> str:
    """A short relative age: 'just now', '5 min ago', '3 h ago', '2 d ago', or 'never'."""
    if moment is None or absent(moment):  # None, or pandas' NaT for a thread never compressed
        return "never"
    now = now or datetime.now(UTC)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    seconds = max(0.0, (now - moment).total_seconds())
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h ago"
    return f"{int(seconds // 86400)} d ago"


# --- showing text that came from outside (users, models, tools, the graph, the URL) ---------
#
# Streamlit renders every body, caption, alert, title, widget label, help tooltip, expander
# and tab label, metric, progress text and st.table cell as GitHub-flavoured Markdown, where
# `![x](https://host/p.png)` makes the viewer's browser fetch from that host. Any string that
# did not come from this code goes through `markdown_literal` (`literal`, `md`, `code`).

_ALWAYS_ESCAPED = frozenset("\\`*<$|~")  # code spans, emphasis, HTML/autolinks, math, tables
_LINE_START_ESCAPED = frozenset("#+-=>[(")  # headings, lists, quotes, setext, definitions
_ORDERED_MARKER = re.compile(r"\d{1,9}[.)]")
WORD_JOINER = "\u2060"  # invisible; stops GFM turning a bare http:// or www. into a link


class MarkdownSafe(str):
    """Text ready for Streamlit's Markdown: a constant of this code, or built by `md`,
    `literal` or `code`, so every outside string in it shows exactly as written."""


def _escape_line(line: str, bold: Sequence[tuple[int, int]] = ()) -> str:
    """One line escaped (see `markdown_literal`); `bold` ranges of it wrapped in ``**``."""
    opens = {start for start, _ in bold}
    closes = {end for _, end in bold}
    edges = opens | closes
    out: list[str] = []
    marker = _ORDERED_MARKER.match(line)
    list_dot = marker.end() - 1 if marker else -1
    last = len(line) - 1
    for index, char in enumerate(line):
        before = line[index - 1] if index else ""
        after = line[index + 1] if index < last else ""
        escape = (
            char in _ALWAYS_ESCAPED
            or (index == 0 and char in _LINE_START_ESCAPED)
            or index == list_dot
            or (char == "_" and not (before.isalnum() and after.isalnum()))
            or (char == "_" and bool(edges & {index, index + 1}))  # next to a ** we insert
            or (char == "]" and after == "(")  # no inline link or image can close
            or (char == "&" and (not after or after.isalnum() or after == "#"))  # entities
            or (char == ":" and (not after or after == "/" or after.isascii() and after.isalpha()))
        )
        if index in opens:
            out.append("**")
        if char == "." and line[max(0, index - 3) : index].lower() == "www":
            out.append(WORD_JOINER)
        out.append("\\" + char if escape else char)
        if char == ":" and line.startswith("//", index + 1):
            out.append(WORD_JOINER)
        if index + 1 in closes:
            out.append("**")
    return "".join(out)


def markdown_literal(text: str) -> MarkdownSafe:
    """``text`` escaped so Streamlit's Markdown shows it as written: no links, images, HTML,
    math, headings, lists, emphasis or code, wherever in a page it is put.

    Users' own words are shown to support staff; a message holding ``![](https://...)``
    must not make the staff member's browser fetch anything. Escapes are added only where a
    character could start Markdown (``_`` inside a word, ``-`` or ``.`` mid-line stay as they
    are), so ids and error lines read unchanged. Line breaks are kept (leading blanks of a
    line dropped, as Markdown would); a bare ``http://`` or ``www.`` gets an invisible word
    joiner so it is not made a link.
    """
    lines = str(text).replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return MarkdownSafe("  \n".join(_escape_line(line.lstrip(" \t")) for line in lines))


def highlighted(text: object, spans: Iterable[tuple[int, int]]) -> MarkdownSafe:
    """``text`` shown as written (exactly as `markdown_literal` shows it), with the
    characters of each ``(start, end)`` span in bold: the words behind a fact, inside the
    user's own message. Each character is escaped with its whole line around it, so a span
    edge never splits an escape; a span's bold starts and ends on a letter or digit (Markdown
    cannot open or close ``**`` next to blanks or punctuation), so punctuation at its edges
    stays plain; overlapping spans are merged.
    """
    body = "" if text is None else str(text)
    merged: list[list[int]] = []
    for start, end in sorted((max(0, a), min(len(body), b)) for a, b in spans):
        if start >= end:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    lines: list[tuple[int, str]] = []
    at = 0
    for brk in re.finditer(r"\r\n|\r|\n", body):
        lines.append((at, body[at : brk.start()]))
        at = brk.end()
    lines.append((at, body[at:]))
    out: list[str] = []
    for line_at, line in lines:
        content = line.lstrip(" \t")
        base = line_at + len(line) - len(content)
        bold: list[tuple[int, int]] = []
        for start, end in merged:
            lo, hi = max(start, base) - base, min(end, base + len(content)) - base
            while lo < hi and not content[lo].isalnum():
                lo += 1
            while hi > lo and not content[hi - 1].isalnum():
                hi -= 1
            if lo < hi:
                bold.append((lo, hi))
        out.append(_escape_line(content, bold))
    return MarkdownSafe("  \n".join(out))


def literal(value: object) -> MarkdownSafe:
    """Any value shown as written in Markdown (None as nothing); already-safe text as it is."""
    if isinstance(value, MarkdownSafe):
        return value
    return markdown_literal("" if value is None else str(value))


def code(value: object) -> MarkdownSafe:
    """``value`` as one inline code span, whatever backticks or line breaks it holds."""
    text = " ".join(str("" if value is None else value).splitlines())
    if not text:
        return MarkdownSafe("")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text[0] in "` " or text[-1] in "` " else ""
    return MarkdownSafe(f"{fence}{pad}{text}{pad}{fence}")


class _LiteralFormatter(string.Formatter):
    def format_field(self, value: Any, format_spec: str) -> str:
        if value is None or (absent(value) and not isinstance(value, str)):
            return MISSING  # no value reads "–", never "None", "nan" or "NaT"
        if isinstance(value, MarkdownSafe):
            return format(str(value), format_spec)
        return markdown_literal(format(value, format_spec))


_FORMATTER = _LiteralFormatter()


@functools.lru_cache(maxsize=512)
def _checked_template(template: str) -> str:
    """Refuse a template where an escaped value could join trusted text into Markdown."""
    previous_was_field = False
    for text, field, _spec, _conversion in _FORMATTER.parse(template):
        if previous_was_field and text[:1] in ("(", "`"):
            raise ValueError(f"md template puts {text[:1]!r} right after a value: {template!r}")
        if field is not None and text.endswith("`"):
            raise ValueError(f"md template puts a value in backticks (use code()): {template!r}")
        previous_was_field = field is not None
    return template


def md(template: str, /, *args: Any, **kwargs: Any) -> MarkdownSafe:
    """``template`` (trusted Markdown written in this code) with every value shown literally.

    ``md("User **{}** · {:,} facts", user_id, count)``: each value is formatted with its spec,
    then escaped by `markdown_literal` unless it is already `MarkdownSafe` (from `code`,
    `literal` or `md`).
    """
    return MarkdownSafe(_FORMATTER.vformat(_checked_template(template), args, kwargs))


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis when it was longer."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def page_count(total: int, size: int) -> int:
    """How many pages of ``size`` hold ``total`` items or characters (at least one)."""
    return max(1, -(-max(0, int(total)) // max(1, int(size))))


def _line_start(text: str, offset: int, position: int, total: int, reach: int) -> int:
    """The first line start in [position, position + reach), else ``position`` itself."""
    if position <= 0 or position >= total:
        return min(max(position, 0), total)
    local = position - offset
    if 0 < local <= len(text) and text[local - 1] == "\n":
        return position
    newline = text.find("\n", max(local, 0), max(local, 0) + reach)
    return offset + newline + 1 if newline != -1 else position


def page_bounds(text: str, offset: int, total: int, page: int, size: int) -> tuple[int, int]:
    """[start, end) of page ``page`` (1-based) of a ``total``-character text, on line starts.

    Page p holds the lines that start within its ``size`` characters, so no page begins in
    the middle of a line. A line running on for more than half a page past the edge is cut
    there (a minified JSON document has no other place to cut), so no page is ever empty.
    ``text`` holds characters [offset, offset + len(text)); it must cover one character
    before the page and half a page past its end (`page_window` says which).
    """
    reach = max(1, size // 2)
    nominal = (max(1, page) - 1) * size
    start = _line_start(text, offset, nominal, total, reach)
    end = _line_start(text, offset, nominal + size, total, reach)
    return start, max(start, end)


def page_window(page: int, size: int) -> tuple[int, int]:
    """(offset, limit) of the characters `page_bounds` needs to place page ``page``."""
    nominal = (max(1, page) - 1) * size
    offset = max(0, nominal - 1)
    return offset, nominal + size + max(1, size // 2) - offset


def error_line(error: BaseException, *, thread_id: str | None = None) -> str:
    """One plain line for a refusal or failure (typed errors keep their code)."""
    prefix = f"{thread_id}: " if thread_id else ""
    if isinstance(error, YuxiDashError):
        label = _REFUSAL_PREFIX.get(error.code, "Refused")
        return f"{prefix}{label} — {error.message} [{error.code}]"
    return f"{prefix}Failed — unexpected {type(error).__name__}; see the server log"


def outcome_line(thread_id: str, result: Mapping[str, Any]) -> str:
    """One line for a compression result (CompressResult.to_dict())."""
    status = result.get("status")
    before = tokens(result.get("before_tokens"))
    after = tokens(result.get("after_tokens"))
    if status == "completed":
        line = (
            f"{thread_id}: compressed {result.get('compressed_messages', 0)} messages, "
            f"{before} → {after} tokens"
        )
        if result.get("file_path"):
            line += f"; history in {result['file_path']}"
        return line
    reason = result.get("reason") or "nothing to do"
    return f"{thread_id}: nothing compressed ({reason}); {before} tokens unchanged"


LEFT_OUT = "not in the preview; in the file"  # a field the preview left out of a record


def _flat(record: Mapping[str, Any], common: Mapping[str, Any]) -> dict[str, Any]:
    """A record as one row: its keys and ``metadata.<key>``, ``common`` values overlaid."""
    flat: dict[str, Any] = {}
    for source in (record, common):  # a record's own value wins
        for key, value in source.items():
            if key != "metadata":
                flat.setdefault(key, value)
        metadata = source.get("metadata")
        if isinstance(metadata, dict):
            for key, value in metadata.items():
                flat.setdefault(f"metadata.{key}", value)
    return flat


def _file_rows(full: str) -> list[dict[str, Any]]:
    """The records of a whole tool result as rows (salvaged when it is not JSON), else []."""
    text = full.lstrip()
    parsed = parse_records_text(text) if text.startswith(("{", "[")) else None
    located = None if parsed is None else locate_records(parsed[0])
    if located is None:
        return []
    return [_flat(record, {}) for record in located[0] if isinstance(record, dict)]


def structured_records(preview: str, full: str | None = None) -> dict[str, Any] | None:
    """The records of a structured query_kb / web_search preview (compact JSON), else None.

    Returns {"kind", "result_count", "omitted_results", "query", "records": [flat dicts]}.
    With ``full``, the whole result the preview was made of: a field a shown record lacks
    reads ``LEFT_OUT`` when the file's record has it, ``MISSING`` when it does not (the
    preview shows the leading records in order, so the n-th row is the file's n-th record),
    and such a column is text.
    """
    try:
        document = json.loads(preview)
    except (ValueError, TypeError):
        return None
    if isinstance(document, list):
        document = {"results": document}
    if not isinstance(document, dict) or not isinstance(document.get("results"), list):
        return None
    # values every listed record shares are written once, in "common": overlay them
    shared = document.get("common")
    common: dict[str, Any] = shared if isinstance(shared, dict) else {}
    records = [_flat(r, common) for r in document["results"] if isinstance(r, dict)]
    if full is not None and records:
        in_file = _file_rows(full)
        columns = list(dict.fromkeys(key for row in records for key in row))
        marked = set()
        for index, row in enumerate(records):
            file_row = in_file[index] if index < len(in_file) else {}
            for column in columns:
                if column not in row:
                    left_out = file_row.get(column) not in (None, "", [], {})
                    row[column] = LEFT_OUT if left_out else MISSING
                    marked.add(column)
        for row in records:  # one type per column: the table draws it as text
            for column in marked:
                value = row[column]
                row[column] = value if isinstance(value, str) else json.dumps(value)
    return {
        "kind": document.get("kind"),
        "result_count": document.get("result_count", len(records)),
        "omitted_results": document.get("omitted_results", 0),
        "query": document.get("query"),
        "records": records,
    }
