"""The evidence ledger of one compression: each evidence item it summarized, and where it went.

``build_ledger(before, after, workdir)`` reads the summarized part (the messages before the
new cutoff) with the previews' own parsers: query_kb records (``kb_record``: id, source,
chunk index), web_search records and urls in prose (``web_result``), offloaded results
(``saved_result``: path, SHA-256), write_file / edit_file paths (``file``), and ``run_id``
/ ``thread_id`` keys (``run`` / ``thread``). Each item is in exactly one state:
``visible`` (its value appears in the new model view), ``recoverable`` (in a saved file the
summary points to, with that ``file`` and 1-based ``line``) or ``lost``. ``cited``: an AI
message of the summarized part names it; ``named_by_user``: a human one does. "Appears":
as written or JSON-escaped, not inside a longer word. Files are read through ``Workdir``
(never through a link); nothing is written. ``build_ledger`` says which files count;
``compression.evidence_index`` writes a ledger as an index file's text.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from yuxi_dash.compression.compaction import (
    TRUNCATED_ARG_TOOLS,
    parse_saved_result,
    tool_names_by_call_id,
    tool_result_text,
    truncate_tool_args,
)
from yuxi_dash.compression.previews.citation_records import (
    KB_CITATION,
    MAX_TITLE_CHARS,
    WEB_CITATION,
    Field,
    is_empty,
    lookup,
)
from yuxi_dash.compression.previews.clipping import clip_head_tail
from yuxi_dash.compression.previews.preview import locate_records, structured_kind
from yuxi_dash.compression.previews.salvage import parse_records_text
from yuxi_dash.compression.summarizers import URL_PATTERN
from yuxi_dash.compression.thread_state import (
    ThreadContextState,
    is_summary_message,
    message_text,
)
from yuxi_dash.errors import InvalidInput, WorkdirUnavailable
from yuxi_dash.files.workdir import Workdir
from yuxi_dash.printable_record import Record

Kind = Literal["kb_record", "web_result", "saved_result", "file", "run", "thread"]
State = Literal["visible", "recoverable", "lost"]
KINDS: tuple[Kind, ...] = get_args(Kind)
STATES: tuple[State, ...] = get_args(State)
FILE_TOOLS = TRUNCATED_ARG_TOOLS  # write_file / edit_file: the calls whose path is a file written
PATH_ARGS = ("file_path", "path")
ID_KEYS: dict[str, Kind] = {"run_id": "run", "thread_id": "thread"}
MAX_ID_DEPTH = 2  # run and thread ids: keys of a JSON value's objects this deep (records: 2)
_URL_TAIL = ".,;:!?"  # sentence punctuation the url pattern takes in prose
Origin = tuple[str, str] | None  # (path, sha256) of the tool-result file a value was read from
_READ_FAILURES = (OSError, InvalidInput, WorkdirUnavailable)  # PathRefused is an InvalidInput


@dataclass(frozen=True)
class LedgerItem(Record):
    """One evidence item of the summarized part and where it went."""

    kind: Kind
    value: str
    state: State
    cited: bool
    named_by_user: bool
    file: str | None  # where a recoverable item is: a workdir path (None otherwise)
    line: int | None  # 1-based, in ``file``
    message_index: int  # the first message of the thread it appears in
    source: str | None = None  # kb_record: its source (or filename)
    chunk_index: int | str | None = None  # kb_record
    title: str | None = None  # web_result: its title, clipped as its citation shows it
    sha256: str | None = None  # saved_result: the SHA-256 its header states


@dataclass(frozen=True)
class Ledger(Record):
    """Every evidence item of one compression's summarized part, in order of appearance."""

    items: tuple[LedgerItem, ...]
    cutoff: int  # messages before it were summarized
    summarized_messages: int  # of them, the ones that are not summary messages
    history_file: str | None  # the history file the summary points to

    def counts(self) -> dict[str, dict[str, int]]:
        """Items per kind and state (every kind and state, zeros included)."""
        table: dict[str, dict[str, int]] = {kind: dict.fromkeys(STATES, 0) for kind in KINDS}
        for item in self.items:
            table[item.kind][item.state] += 1
        return table

    def state_counts(self, *, cited_only: bool = False) -> dict[str, int]:
        """Items (the cited ones only when asked) per state, over every kind."""
        totals: dict[str, int] = dict.fromkeys(STATES, 0)
        for item in self.items:
            if item.cited or not cited_only:
                totals[item.state] += 1
        return totals

    def to_dict(self) -> dict[str, Any]:
        return {
            **super().to_dict(),
            "counts": self.counts(),
            "totals": self.state_counts(),
            "cited": self.state_counts(cited_only=True),
        }


def build_ledger(
    before: ThreadContextState,
    after: ThreadContextState,
    workdir: Workdir | None,
    *,
    extra_files: Sequence[str] = (),
    written: Collection[str] = (),
    tool_arg_max_length: int | None = None,
) -> Ledger:
    """The ledger of the compression that turned ``before`` into ``after``.

    ``after`` is the compression's new state (``CompressionOutcome.state``); the summarized
    part is ``after.messages[:cutoff]``, summary messages left out. ``extra_files``: other
    saved files the summary points to (an evidence index). ``written``: the tool-result
    files the compression has just written (``CompressionOutcome.saved_files``' paths),
    known to be there. A file that cannot be read holds nothing.

    Reading: an offloaded result is read from ``before`` when it holds the original, else
    from its file, else (that file gone or changed) from its preview, and records only the
    file held are then unknown. Run inside ``previews.salvage.shared_parses()`` with the
    compression, a result its preview decoded is not decoded again. Urls in prose are the
    extractive summarizer's ``URL_PATTERN`` matches, sentence punctuation dropped; run and
    thread ids are keys down to ``MAX_ID_DEPTH`` (a result's records, not their metadata).

    States: ``visible`` when the value appears in the model view (summary, kept messages,
    previews, tool-call arguments). Else ``recoverable`` when it appears in, first, a
    tool-result file it was read from that is named in the view, the history file or an
    extra file; then the history file; then the extra files; at the first occurrence's
    line. Else ``lost``. A tool-result file counts while it is a regular file reached
    through no link and, when it has to be read, still matches its SHA-256; a
    ``saved_result`` whose file does not count is ``lost`` whatever names it.
    """
    cutoff = after.visible_start if after.summary is not None else 0
    history = after.summary.file_path if after.summary is not None else None
    files = _SavedFiles(workdir, written)
    found = _Collector(files)
    ai_texts: list[str] = []
    human_texts: list[str] = []
    names: dict[str, str] | None = None
    summarized = 0
    for index, message in enumerate(after.messages[:cutoff]):
        if is_summary_message(message):
            continue
        summarized += 1
        if isinstance(message, ToolMessage):
            if names is None:
                names = tool_names_by_call_id(after.messages)
            original = before.messages[index] if index < len(before.messages) else message
            found.tool_result(index, message, original, names)
        elif isinstance(message, AIMessage | HumanMessage):
            text = message_text(message)
            (ai_texts if isinstance(message, AIMessage) else human_texts).append(text)
            found.prose(index, text)
            if isinstance(message, AIMessage):
                found.tool_calls(index, message)
    # The engine's model_messages, not imported from it: the engine is to import this module.
    limit = () if tool_arg_max_length is None else (tool_arg_max_length,)
    view = truncate_tool_args(after.model_visible_messages(), *limit)
    places = _Places(files, view_text(view), history, extra_files)
    ai_text, human_text = "\n".join(ai_texts), "\n".join(human_texts)
    items = []
    for entry in found.entries.values():
        forms = _forms(entry.value)
        state, file, line = places.locate(entry, forms)
        cited = bool(ai_text) and _find_any(ai_text, forms) >= 0
        named = bool(human_text) and _find_any(human_text, forms) >= 0
        items.append(
            LedgerItem(entry.kind, entry.value, state, cited, named, file, line, *entry.details())
        )
    return Ledger(tuple(items), cutoff, summarized, history)


# -- where a value appears -----------------------------------------------------------
def view_text(view: Iterable[BaseMessage]) -> str:
    """The text of a model view that the ledger searches: every message's text, and each
    AI tool call's arguments as JSON."""
    parts: list[str] = []
    for message in view:
        parts.append(message_text(message))
        if isinstance(message, AIMessage):
            parts.extend(
                json.dumps(call.get("args", {}), ensure_ascii=False, default=str)
                for call in message.tool_calls
            )
    return "\n".join(parts)


def _forms(value: str) -> tuple[str, ...]:
    """The value as written and JSON-escaped (UTF-8 kept, then ``\\u`` escapes)."""
    if value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
        return (value,)  # JSON writes it as it is
    forms = [value]
    for ascii_only in (False, True):
        escaped = json.dumps(value, ensure_ascii=ascii_only)[1:-1]
        if escaped not in forms:
            forms.append(escaped)
    return tuple(forms)


def _wordlike(char: str) -> bool:
    return char.isalnum() or char in "_-"


def _find(text: str, needle: str) -> int:
    """The first index of ``needle`` in ``text`` not inside a longer word, or -1."""
    position = text.find(needle) if needle else -1
    if position < 0:
        return -1
    check_start, check_end = _wordlike(needle[0]), _wordlike(needle[-1])
    while position >= 0:
        end = position + len(needle)
        if (not check_start or position == 0 or not _wordlike(text[position - 1])) and (
            not check_end or end == len(text) or not _wordlike(text[end])
        ):
            return position
        position = text.find(needle, position + 1)
    return -1


def _find_any(text: str, forms: tuple[str, ...]) -> int:
    """The first index of any of the forms in ``text``, or -1."""
    if len(forms) == 1:
        return _find(text, forms[0])
    found = [position for form in forms if (position := _find(text, form)) >= 0]
    return min(found) if found else -1


def appears(text: str, value: str) -> bool:
    """Whether ``value`` appears in ``text`` by the ledger's rule (module docstring)."""
    return _find_any(text, _forms(value)) >= 0


class _SavedFiles:
    """Saved files, each read at most once, through the workdir; None for one not there.

    A tool result the thread still holds (``hold``) is not read back: its file only has to
    be there (just ``written`` by the compression, or ``Workdir.has_file``), and the
    thread's copy, the one saved under its SHA-256, is its text. Any other tool-result
    file is read and must still match its SHA-256.
    """

    def __init__(self, workdir: Workdir | None, written: Collection[str] = ()) -> None:
        self.workdir = workdir
        self._written = frozenset(written)  # just written by the compression: there
        self._held: dict[str, str] = {}
        self._texts: dict[tuple[str, str | None], str | None] = {}

    def hold(self, path: str, text: str) -> None:
        self._held.setdefault(path, text)

    def text(self, path: str, sha256: str | None = None) -> str | None:
        """The file's text; a tool result's (``sha256`` given) only while it matches."""
        key = (path, sha256)
        if key not in self._texts:
            self._texts[key] = self._read(path, sha256)
        return self._texts[key]

    def _read(self, path: str, sha256: str | None) -> str | None:
        if self.workdir is None or not path:
            return None
        try:
            if sha256 is None:
                return self.workdir.read_text(path)
            held = self._held.get(path)
            if held is not None:
                there = path in self._written or self.workdir.has_file(path)
                return held if there else None
            text, status = self.workdir.read_verified(path, sha256)
        except _READ_FAILURES:
            return None
        return text if status == "ok" else None


# -- what the summarized part holds ------------------------------------------------------
@dataclass
class _Entry:
    kind: Kind
    value: str
    message_index: int
    origins: list[tuple[str, str]]  # (path, sha256) of the tool-result files it was read from
    source: str | None = None
    chunk_index: int | str | None = None
    title: str | None = None
    sha256: str | None = None

    def details(self) -> tuple[int, str | None, int | str | None, str | None, str | None]:
        """``LedgerItem``'s last fields, in its order."""
        return self.message_index, self.source, self.chunk_index, self.title, self.sha256


# The previews' citation places, by the name of the field each holds (KB: id, title,
# source, chunk_index, score; web: url, title, score).
_KB_PLACES = {places[0][1]: places for places in KB_CITATION}
_WEB_PLACES = {places[0][1]: places for places in WEB_CITATION}


def _first(record: dict[str, Any], places: Sequence[Field]) -> Any:
    """The record's first non-empty value among ``places`` (as ``citation`` picks it)."""
    for place in places:
        value = lookup(record, place)
        if not is_empty(value):
            return value
    return None


def _scalar(value: Any) -> str | None:
    """A non-empty string, or a number as text; None for anything else."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


class _Collector:
    """The evidence items of the summarized part, one per (kind, value), first seen first."""

    def __init__(self, files: _SavedFiles) -> None:
        self.files = files
        self.entries: dict[tuple[Kind, str], _Entry] = {}

    def add(self, kind: Kind, value: str, index: int, origin: Origin = None, **about: Any) -> None:
        entry = self.entries.get((kind, value))
        if entry is None:
            origins = [origin] if origin is not None else []
            self.entries[(kind, value)] = _Entry(kind, value, index, origins, **about)
            return
        for name, detail in about.items():  # seen again: fill in what the first left out
            if detail is not None and getattr(entry, name) is None:
                setattr(entry, name, detail)
        if origin is not None and origin not in entry.origins:
            entry.origins.append(origin)

    def prose(self, index: int, text: str) -> None:
        for url in URL_PATTERN.findall(text):
            url = url.rstrip(_URL_TAIL)
            if "://" in url and not url.endswith("://"):
                self.add("web_result", url, index)

    def tool_calls(self, index: int, message: AIMessage) -> None:
        for call in message.tool_calls:
            args = call.get("args")
            if not isinstance(args, dict):
                continue
            if call.get("name") in FILE_TOOLS:
                path = next((args[k] for k in PATH_ARGS if _scalar(args.get(k))), None)
                if isinstance(path, str):
                    self.add("file", path, index)
            self.ids(index, args, None)

    def tool_result(
        self, index: int, message: ToolMessage, original: BaseMessage, names: dict[str, str]
    ) -> None:
        saved = parse_saved_result(message.content)
        origin: Origin = None
        text: str | None
        if saved is not None and saved.path:
            origin = (saved.path, saved.sha256)
            self.add("saved_result", saved.path, index, sha256=saved.sha256 or None)
            text = tool_result_text(original) if isinstance(original, ToolMessage) else None
            if text is not None and parse_saved_result(text) is None:
                self.files.hold(saved.path, text)  # offloaded by this compression
            else:  # offloaded before: the file holds the result (gone: the preview)
                text = self.files.text(saved.path, saved.sha256) or saved.preview
        else:
            text = message_text(message)
        tool = message.name or names.get(message.tool_call_id) or (saved.tool if saved else "")
        stripped = text.lstrip()
        if not stripped.startswith(("{", "[")):
            return
        parsed = parse_records_text(stripped)
        if parsed is None:
            return
        kind = structured_kind(tool)
        located = locate_records(parsed[0]) if kind is not None else None
        for record in located[0] if located is not None else ():
            if isinstance(record, dict):
                self.record(index, record, kind == "knowledge_base", origin)
        self.ids(index, parsed[0], origin)

    def record(self, index: int, record: dict[str, Any], kb: bool, origin: Origin) -> None:
        """A query_kb or web_search record, read where its preview's citation reads it."""
        if kb:
            value = _scalar(_first(record, _KB_PLACES["id"]))
            if value is not None:
                chunk = _first(record, _KB_PLACES["chunk_index"])
                if not isinstance(chunk, int) or isinstance(chunk, bool):
                    chunk = _scalar(chunk)
                source = _scalar(_first(record, _KB_PLACES["source"]))
                self.add("kb_record", value, index, origin, source=source, chunk_index=chunk)
            return
        value = _scalar(_first(record, _WEB_PLACES["url"]))
        if value is not None:
            title = _scalar(_first(record, _WEB_PLACES["title"]))
            if title is not None:
                title = clip_head_tail(title, MAX_TITLE_CHARS)  # as the citation shows it
            self.add("web_result", value, index, origin, title=title)

    def ids(self, index: int, value: Any, origin: Origin) -> None:
        """Every ``run_id`` / ``thread_id`` key of the objects down to ``MAX_ID_DEPTH``."""
        stack: list[tuple[Any, int]] = [(value, 0)]
        while stack:
            node, depth = stack.pop()
            children: Iterable[Any]
            if isinstance(node, dict):
                for key in node.keys() & ID_KEYS.keys():  # in C: no loop over every key
                    found = _scalar(node[key])
                    if found is not None:
                        self.add(ID_KEYS[key], found, index, origin)
                children = node.values()
            elif isinstance(node, list):
                children = node
            else:
                continue
            if depth < MAX_ID_DEPTH:
                stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))


# -- where each item went -----------------------------------------------------------------
class _Places:
    """The new view and the saved files the summary points to, searched in that order."""

    def __init__(
        self, files: _SavedFiles, view: str, history: str | None, extra_files: Sequence[str]
    ) -> None:
        self.files = files
        self.view = view
        self.pointers: list[tuple[str, str]] = []  # (path, text): history, then extra files
        for path in (history, *extra_files):
            text = files.text(path) if path else None
            if path and text is not None:
                self.pointers.append((path, text))
        self._named: dict[str, bool] = {}
        self._one_line: dict[str, bool] = {}  # path -> whether its text has no line break

    def named(self, path: str) -> bool:
        """Whether a tool-result file is named in the view or a file the summary points to."""
        if path not in self._named:
            texts = [self.view, *(text for _path, text in self.pointers)]
            self._named[path] = any(_find(text, path) >= 0 for text in texts)
        return self._named[path]

    def locate(self, entry: _Entry, forms: tuple[str, ...]) -> tuple[State, str | None, int | None]:
        if entry.kind == "saved_result" and (
            self.files.text(entry.value, entry.sha256 or "") is None
        ):
            return "lost", None, None  # its file is gone or changed: nothing to read back
        if _find_any(self.view, forms) >= 0:
            return "visible", None, None
        candidates: list[tuple[str, str, bool]] = []  # the item's own files first, then mentions
        for path, sha256 in entry.origins:
            if self.named(path):
                text = self.files.text(path, sha256)
                if text is not None:
                    candidates.append((path, text, True))
        candidates.extend((path, text, False) for path, text in self.pointers)
        for path, text, own in candidates:
            one_line = self._one_line.get(path)
            if one_line is None:
                one_line = self._one_line[path] = "\n" not in text
            if own and one_line:  # the item was read from this file, and it has one line
                return "recoverable", path, 1
            position = _find_any(text, forms)
            if position >= 0:
                line = 1 if one_line else text.count("\n", 0, position) + 1
                return "recoverable", path, line
        return "lost", None, None
