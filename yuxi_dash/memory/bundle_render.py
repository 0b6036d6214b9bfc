"""The support bundle's two renderings, written incrementally to a text stream.

A bundle is produced section by section (`memory.bundle` drives it): the
header, the flags, the memory summary, then every fact one at a time, the
recent episodes, each correction, each thread, and the closing counts. Both
sinks write as they are fed and keep nothing but counters, so a 200,000-fact
bundle never sits in memory.

- `JsonSink`: one JSON object in the documented shape (`bundle_schema`); the
  arrays are opened, filled item by item and closed; counts follow the arrays.
- `MarkdownSink`: the same content for people. Every string from the graph,
  the chat or the audit log is escaped (`md_text`) so it shows as written:
  no links, images, HTML or tables can come from the data.
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol, TextIO

_PUNCT = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation character
WORD_JOINER = "\u2060"


def md_text(value: Any, *, limit: int | None = None) -> str:
    """`value` as literal Markdown on one line: every ASCII punctuation escaped, no autolinks."""
    text = "" if value is None else str(value)
    text = " ".join(text.split())
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    text = re.sub(r"(?i)(www)\.", rf"\1{WORD_JOINER}.", text)
    return _PUNCT.sub(r"\\\1", text)


class BundleSink(Protocol):
    def header(self, meta: dict[str, Any]) -> None: ...
    def flags(self, source: str, flags: list[dict[str, Any]]) -> None: ...
    def memory(self, memory: dict[str, Any]) -> None: ...
    def fact(self, fact: dict[str, Any]) -> None: ...
    def facts_done(self, count: int) -> None: ...
    def episodes(self, episodes: list[dict[str, Any]], limit: int) -> None: ...
    def correction(self, correction: dict[str, Any]) -> None: ...
    def corrections_done(self, count: int) -> None: ...
    def thread(self, thread: dict[str, Any]) -> None: ...
    def threads_done(self, count: int) -> None: ...
    def finish(self, not_included: list[str]) -> None: ...


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


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

    def fact(self, fact: dict[str, Any]) -> None:
        self._item(fact)

    def facts_done(self, count: int) -> None:
        self._close()
        self._field("fact_count", count)

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


def _row(cells: list[Any]) -> str:
    return "| " + " | ".join(md_text(c, limit=300) for c in cells) + " |\n"


def _table_head(columns: tuple[str, ...] | list[str]) -> str:
    return _row(list(columns)) + "|" + "---|" * len(columns) + "\n"


class MarkdownSink:
    """The bundle for people: headings, tables, and every outside string escaped."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._corrections = 0

    def header(self, meta: dict[str, Any]) -> None:
        w = self.out.write
        w(f"# Support bundle: {md_text(meta['user_id'])}\n\n")
        w(f"- Graph: {md_text(meta['group_id'])}\n")
        w(f"- Generated at {md_text(meta['generated_at'])} by {md_text(meta['generated_by'])}\n")
        w(f"- Shape: {md_text(meta['schema'])} version {meta['schema_version']}\n\n")

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
        w("## Facts\n\n")
        w(_table_head(FACT_COLUMNS))

    def fact(self, fact: dict[str, Any]) -> None:
        shown = {
            **fact,
            "live": "yes" if fact["live"] else "no",
            "episodes": len(fact["provenance"]["episodes"]),
        }
        self.out.write(_row([shown[column] for column in FACT_COLUMNS]))

    def facts_done(self, count: int) -> None:
        self.out.write(f"\n{count:,} fact(s).\n\n")

    def episodes(self, episodes: list[dict[str, Any]], limit: int) -> None:
        w = self.out.write
        w(f"## Recent episodes (newest {limit})\n\n")
        if not episodes:
            w("None.\n\n")
        for episode in episodes:
            w(
                f"### {md_text(episode['created_at'])} · {md_text(episode['name'])} "
                f"({episode['content_bytes']:,} bytes)\n\n"
            )
            w(f"uuid {md_text(episode['uuid'])}; kind {md_text(episode['memory_kind'])}\n\n")
            w(f"> {md_text(episode['content'], limit=1000)}\n\n")
        w("## Corrections\n\n")
        w(_table_head(["at", "actor", "action", "fact_uuid", "ticket", "undone_at", "reason"]))

    def correction(self, correction: dict[str, Any]) -> None:
        self._corrections += 1
        keys = ("at", "actor", "action", "fact_uuid", "ticket", "undone_at", "reason")
        self.out.write(_row([correction[k] for k in keys]))

    def corrections_done(self, count: int) -> None:
        self.out.write(f"\n{count:,} correction(s).\n\n## Threads\n\n")

    def thread(self, thread: dict[str, Any]) -> None:
        w = self.out.write
        w(f"### {md_text(thread['thread_id'])} ({md_text(thread['agent_slug'])})\n\n")
        w(
            f"- Summary pressure {thread['summary_pressure_ratio']:.0%}, context "
            f"{thread['context_usage_ratio']:.0%}, status {md_text(thread['status'])}\n"
        )
        summary = thread["last_summary"]
        if summary is not None:
            w(f"- Last summary (cut at message {summary['cutoff_index']}):\n\n")
            w(f"> {md_text(summary['text'], limit=2000)}\n\n")
        elif thread["summary_error"]:
            w(f"- Last summary unavailable: {md_text(thread['summary_error'])}\n\n")
        else:
            w("- No summary yet\n\n")
        results = thread["tool_results"]
        if results:
            w(_table_head(["id", "tool_name", "chars", "sha256_status", "path"]))
            for r in results:
                w(_row([r["id"], r["tool_name"], r["chars"], r["sha256_status"], r["path"]]))
            w("\n")

    def threads_done(self, count: int) -> None:
        self.out.write(f"{count:,} thread(s).\n\n")

    def finish(self, not_included: list[str]) -> None:
        self.out.write("## Not included\n\n")
        for item in not_included:
            self.out.write(f"- {md_text(item)}\n")
