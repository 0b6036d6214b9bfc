"""The support bundle's two renderings, written incrementally to a text stream.

A bundle is produced section by section (`memory.support.bundle` drives it): the
header, the flags, the memory summary, then every fact a page at a time, the
recent episodes, each correction, each thread, and the closing counts. Both
sinks write as they are fed and keep nothing but counters, so a 200,000-fact
bundle never sits in memory.

- `JsonSink`: one JSON object in the documented shape (`bundle_schema`); the
  arrays are opened, filled item by item and closed; counts follow the arrays.
- `MarkdownSink`: the same content for people. Every string from the graph,
  the chat or the audit log goes through `md_text` (prose), `md_code` (ids,
  timestamps, paths: code spans) or `md_quote` (a summary or an episode, line by
  line; a JSON episode as its fields), so it shows as written: no links, images,
  HTML, emphasis or tables come from the data, and nothing else is escaped.
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol, TextIO

WORD_JOINER = "\u2060"
# read as Markdown anywhere in a line: escapes, code, emphasis, links, HTML, tables, strikethrough
_INLINE = re.compile(r"[\\`*\[\]<>|~]")
_UNDERSCORE = re.compile(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")  # intraword _ is never emphasis
_ENTITY = re.compile(r"&(?=#?[0-9A-Za-z]+;)")  # &amp; &#38; would be decoded
_SCHEME = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*):(?=//)")  # http:// and friends: no autolink
_EMAIL_AT = re.compile(r"(?<=[0-9A-Za-z._%+-])@(?=[0-9A-Za-z-]+\.)")  # no mailto autolink
_BLOCK_MARK = re.compile(r"^(?:([#>+=-])|(\d+)([.)]))")  # a line start that opens a block
_CLOSING_HASHES = re.compile(r"(#+)$")  # a heading's closing sequence would be dropped
# every character the inline rules above act on: a text without any needs none of them
_INLINE_MARK = re.compile(r"[\\`*\[\]<>|~_&:@#]|(?i:www)\.")


def md_text(value: Any, *, limit: int | None = None, block_start: bool = False) -> str:
    """`value` as literal Markdown prose on one line, escaping only what Markdown would read.

    ``block_start``: the text opens a block (after "> "), so a leading "#", "-",
    "+", "=", ">" or "1." is escaped too. A trailing "#" is always escaped.
    """
    text = "" if value is None else str(value)
    text = " ".join(text.split())
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    if _INLINE_MARK.search(text):
        text = escape_inline(text)
    if block_start:
        text = _BLOCK_MARK.sub(
            lambda m: "\\" + m.group(1) if m.group(1) else m.group(2) + "\\" + m.group(3), text
        )
    return text


def escape_inline(text: str) -> str:
    """Every inline rule of `md_text` on ``text`` (one line), escaping what Markdown would read."""
    text = _INLINE.sub(lambda m: "\\" + m.group(0), text)
    text = _UNDERSCORE.sub(r"\\_", text)
    text = _ENTITY.sub(r"\\&", text)
    text = _SCHEME.sub(r"\1\\:", text)
    text = _EMAIL_AT.sub(r"\\@", text)
    text = re.sub(r"(?i)\b(www)\.", rf"\1{WORD_JOINER}.", text)
    return _CLOSING_HASHES.sub(lambda m: "\\#" * len(m.group(1)), text)


def md_code(value: Any, *, in_table: bool = False) -> str:
    """`value` as a code span (ids, timestamps, paths): shown as written, never read as Markdown.

    The fence is one backtick longer than the longest run inside; in a table a
    pipe is escaped, as GFM reads it even inside a code span. Empty: nothing.
    """
    text = " ".join(("" if value is None else str(value)).split())
    if not text:
        return ""
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    if in_table:
        text = text.replace("|", "\\|")
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


_HEADING = re.compile(r"#{1,6}[ \t]+(.*?)[ \t#]*")  # a summary's section title, "## GOALS"


def _json_text(text: str, *, truncated: bool = False) -> Any:
    """``text`` decoded when it is a JSON object (a clipped one closed first), else None."""
    if not text.lstrip().startswith("{"):
        return None
    for ending in ("", '"}', "}") if truncated else ("",):
        try:
            document = json.loads(text + ending)
        except ValueError:
            continue
        return document if isinstance(document, dict) else None
    return None


def md_quote(value: Any, *, limit: int | None = None, truncated: bool = False) -> str:
    """``value`` as a block quote, one line of it per quoted line, each shown as written.

    Line breaks stay line breaks (never a literal ``\\n``); a ``## TITLE`` line reads as
    the title in bold (its ``#`` marks are the text's own Markdown, not shown); a JSON
    object (an episode's envelope) reads as its fields, its ``content`` last, line by line.
    """
    text = "" if value is None else str(value)
    clipped = limit is not None and len(text) > limit
    document = _json_text(text, truncated=truncated)
    lines: list[str] = []
    if document is not None:
        body = document.pop("content", None)
        lines = [f"{key}: {item}" for key, item in document.items()]
        text = str(body) if body is not None else ""
        if lines and text:
            lines.append("")
    elif clipped:
        text = text[: max(0, (limit or 0) - 1)] + "…"
    lines.extend(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    if truncated and document is not None:
        lines.append("…")
    out = []
    for line in lines:
        heading = _HEADING.fullmatch(line.strip())
        if not line.strip():
            out.append(">")
        elif heading and heading.group(1):
            out.append(f"> **{md_text(heading.group(1))}**  ")
        else:
            out.append(f"> {md_text(line, block_start=True)}  ")
    while out and out[-1] == ">":
        out.pop()
    if out:
        out[-1] = out[-1].rstrip()
    return "\n".join(out or [">"]) + "\n\n"


class BundleSink(Protocol):
    def header(self, meta: dict[str, Any]) -> None: ...
    def flags(self, source: str, flags: list[dict[str, Any]]) -> None: ...
    def memory(self, memory: dict[str, Any]) -> None: ...
    def facts(self, page: list[dict[str, Any]]) -> None: ...
    def facts_done(self, count: int) -> None: ...
    def as_of_facts_start(self, moment: str) -> None: ...
    def as_of_fact(self, fact: dict[str, Any]) -> None: ...
    def as_of_facts_done(self, count: int) -> None: ...
    def episodes(self, episodes: list[dict[str, Any]], limit: int) -> None: ...
    def correction(self, correction: dict[str, Any]) -> None: ...
    def corrections_done(self, count: int) -> None: ...
    def thread(self, thread: dict[str, Any]) -> None: ...
    def threads_done(self, count: int) -> None: ...
    def finish(self, not_included: list[str]) -> None: ...


# what json.dumps(value, ensure_ascii=False, default=str) writes, without a new encoder per call
_dump = json.JSONEncoder(ensure_ascii=False, default=str).encode


class JsonSink:
    """The bundle as one JSON object, written as it is fed."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._first_item = True

    def _field(self, name: str, value: Any, *, first: bool = False) -> None:
        self.out.write(("" if first else ",\n") + f"{_dump(name)}: {_dump(value)}")

    def _open(self, name: str) -> None:
        self.out.write(f",\n{_dump(name)}: [")
        self._first_item = True

    def _item(self, value: Any) -> None:
        self.out.write(("\n" if self._first_item else ",\n") + _dump(value))
        self._first_item = False

    def _close(self) -> None:
        self.out.write("\n]" if not self._first_item else "]")

    def header(self, meta: dict[str, Any]) -> None:
        self.out.write("{\n")
        for index, (name, value) in enumerate(meta.items()):
            self._field(name, value, first=index == 0)

    def flags(self, source: str, flags: list[dict[str, Any]]) -> None:
        self._field("flag_source", source)
        self._field("flags", flags)

    def memory(self, memory: dict[str, Any]) -> None:
        self._field("memory", memory)
        self._open("facts")

    def facts(self, page: list[dict[str, Any]]) -> None:
        """A page of facts in one write: the same text as one `_item` per fact."""
        if not page:
            return
        self.out.write(("\n" if self._first_item else ",\n") + ",\n".join(map(_dump, page)))
        self._first_item = False

    def facts_done(self, count: int) -> None:
        self._close()
        self._field("fact_count", count)

    def as_of_facts_start(self, moment: str) -> None:
        self._open("as_of_facts")

    def as_of_fact(self, fact: dict[str, Any]) -> None:
        self._item(fact)

    def as_of_facts_done(self, count: int) -> None:
        self._close()
        self._field("as_of_fact_count", count)

    def episodes(self, episodes: list[dict[str, Any]], limit: int) -> None:
        self._field("episode_limit", limit)
        self._field("episodes", episodes)
        self._open("corrections")

    def correction(self, correction: dict[str, Any]) -> None:
        self._item(correction)

    def corrections_done(self, count: int) -> None:
        self._close()
        self._open("threads")

    def thread(self, thread: dict[str, Any]) -> None:
        self._item(thread)

    def threads_done(self, count: int) -> None:
        self._close()

    def finish(self, not_included: list[str]) -> None:
        self._field("not_included", not_included)
        self.out.write("\n}\n")


FACT_COLUMNS = (
    "uuid",
    "source",
    "name",
    "target",
    "status",
    "live",
    "valid_at",
    "invalid_at",
    "expired_at",
    "hits",
    "episodes",
    "fact",
)
AS_OF_COLUMNS = (
    "uuid",
    "source",
    "name",
    "target",
    "valid_then",
    "status_then",
    "status_now",
    "created_at",
    "retired_at",
    "fact",
)


CODE_COLUMNS = frozenset(
    {"uuid", "fact_uuid", "id", "at", "valid_at", "invalid_at", "expired_at", "undone_at"}
    | {"ticket", "path", "sha256_status"}
)


def _row(cells: list[Any], columns: tuple[str, ...] | list[str] = ()) -> str:
    """One table row; the cells of `CODE_COLUMNS` as code spans, the others as prose."""
    shown = [
        md_code(cell, in_table=True)
        if index < len(columns) and columns[index] in CODE_COLUMNS
        else md_text(cell, limit=300)
        for index, cell in enumerate(cells)
    ]
    return "| " + " | ".join(shown) + " |\n"


def _table_head(columns: tuple[str, ...] | list[str]) -> str:
    return _row(list(columns)) + "|" + "---|" * len(columns) + "\n"


CORRECTION_COLUMNS = (
    "at",
    "actor",
    "action",
    "fact",
    "fact_uuid",
    "ticket",
    "undone_at",
    "reason",
)


def corrected_fact(correction: dict[str, Any]) -> str:
    """The text of the fact a correction names: as it was before it, else as it is after."""
    uuid = correction.get("fact_uuid")
    for side in ("before", "after"):
        edge = (correction.get(side) or {}).get(uuid)
        if isinstance(edge, dict) and edge.get("fact"):
            return str(edge["fact"])
    return ""


class MarkdownSink:
    """The bundle for people: headings, tables, and every outside string escaped."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._corrections = 0

    def header(self, meta: dict[str, Any]) -> None:
        w = self.out.write
        w(f"# Support bundle: {md_text(meta['user_id'])}\n\n")
        w(f"- Graph: {md_code(meta['group_id'])}\n")
        w(f"- Generated at {md_code(meta['generated_at'])} by {md_code(meta['generated_by'])}\n")
        w(f"- Shape: {md_code(meta['schema'])} version {meta['schema_version']}\n\n")

    def flags(self, source: str, flags: list[dict[str, Any]]) -> None:
        w = self.out.write
        w(f"## Flags\n\nSource: {md_text(source)}\n\n")
        w(_table_head(["flag", "value", "why"]))
        for flag in flags:
            w(_row([flag["key"], "on" if flag["value"] else "off", flag["reason_text"]]))
        w("\n")

    def memory(self, memory: dict[str, Any]) -> None:
        w = self.out.write
        w("## Memory\n\n")
        if memory["gated_off"]:
            w(f"Memory is gated off: {md_text(memory['gate_message'])}. No facts are included.\n\n")
        elif not memory["graph_exists"]:
            w("The user has no memory graph.\n\n")
        else:
            counts = memory["counts"] or {}
            for key in ("entities", "episodes", "communities", "relates_to_edges", "live_facts"):
                w(f"- {md_text(key)}: {counts.get(key, 0):,}\n")
            w("\n")
            if memory.get("as_of"):
                self._as_of(memory["as_of"])
        w("## Facts\n\n")
        w(_table_head(FACT_COLUMNS))

    def _as_of(self, then: dict[str, Any]) -> None:
        """`as_of` in `memory`: the memory as it was at a moment (`memory bundle --as-of`); its
        facts come after today's ("Facts held as of")."""
        w = self.out.write
        counts = then["counts"]
        w(f"## Memory as of {md_text(then['moment'])}\n\n")
        w(
            f"{counts['held']:,} fact(s) held then ({counts['deleted_since']:,} of them deleted "
            f"since), {counts['valid']:,} valid in the world then; {counts['retired']:,} retired "
            f"by then. {then['corrections_after']:,} correction(s) of ours were made after this "
            "moment: the facts they changed are shown as they were then. Every fact held then "
            "is listed after today's facts.\n\n"
        )
        w("Episodes written by then (newest first):\n\n")
        for episode in then["episodes"]:
            w(f"- {md_text(episode.get('created_at'))} {md_text(episode.get('name'))}\n")
        w("\n")

    def facts(self, page: list[dict[str, Any]]) -> None:
        rows = []
        for fact in page:
            shown = {
                **fact,
                "live": "yes" if fact["live"] else "no",
                "episodes": len(fact["provenance"]["episodes"]),
            }
            rows.append(_row([shown[column] for column in FACT_COLUMNS], FACT_COLUMNS))
        self.out.write("".join(rows))

    def facts_done(self, count: int) -> None:
        self.out.write(f"\n{count:,} fact(s).\n\n")

    def as_of_facts_start(self, moment: str) -> None:
        self.out.write(f"## Facts held as of {md_text(moment)}\n\n")
        self.out.write(_table_head(AS_OF_COLUMNS))

    def as_of_fact(self, fact: dict[str, Any]) -> None:
        cells = [fact.get(c) for c in AS_OF_COLUMNS]
        cells = [("yes" if c else "no") if isinstance(c, bool) else c for c in cells]
        self.out.write(_row(cells, AS_OF_COLUMNS))

    def as_of_facts_done(self, count: int) -> None:
        self.out.write(f"\n{count:,} fact(s) held then.\n\n")

    def episodes(self, episodes: list[dict[str, Any]], limit: int) -> None:
        w = self.out.write
        w(f"## Recent episodes (newest {limit})\n\n")
        if not episodes:
            w("None.\n\n")
        for episode in episodes:
            w(
                f"### {md_code(episode['created_at'])} · {md_text(episode['name'])} "
                f"({episode['content_bytes']:,} bytes)\n\n"
            )
            w(f"uuid {md_code(episode['uuid'])}; kind {md_text(episode['memory_kind'])}\n\n")
            w(md_quote(episode["content"], truncated=bool(episode.get("content_truncated"))))
        w("## Corrections\n\n")
        w(_table_head(CORRECTION_COLUMNS))

    def correction(self, correction: dict[str, Any]) -> None:
        self._corrections += 1
        cells = [
            corrected_fact(correction) if k == "fact" else correction[k] for k in CORRECTION_COLUMNS
        ]
        self.out.write(_row(cells, CORRECTION_COLUMNS))

    def corrections_done(self, count: int) -> None:
        self.out.write(f"\n{count:,} correction(s).\n\n## Threads\n\n")

    def thread(self, thread: dict[str, Any]) -> None:
        w = self.out.write
        w(f"### {md_code(thread['thread_id'])} ({md_text(thread['agent_slug'])})\n\n")
        w(
            f"- Summary pressure {thread['summary_pressure_ratio']:.0%}, context "
            f"{thread['context_usage_ratio']:.0%}, status {md_text(thread['status'])}\n"
        )
        summary = thread["last_summary"]
        if summary is not None:
            w(f"- Last summary (cut at message {summary['cutoff_index']}):\n\n")
            w(md_quote(summary["text"], limit=4000))
        elif thread["summary_error"]:
            w(f"- Last summary unavailable: {md_text(thread['summary_error'])}\n\n")
        else:
            w("- No summary yet\n\n")
        results = thread["tool_results"]
        if results:
            columns = ("id", "tool_name", "chars", "sha256_status", "path")
            w(_table_head(columns))
            for r in results:
                w(_row([r[c] for c in columns], columns))
            w("\n")

    def threads_done(self, count: int) -> None:
        self.out.write(f"{count:,} thread(s).\n\n")

    def finish(self, not_included: list[str]) -> None:
        self.out.write("## Not included\n\n")
        for item in not_included:
            self.out.write(f"- {md_text(item)}\n")
