"""Deterministic compaction: offload large tool results, truncate long file-write args.

- ``offload_tool_results``: a ToolMessage whose text is over the limit
  (ceil(chars/4) > limit) is saved to the workdir (content-addressed) and
  replaced by the saved-result header (full SHA-256, path, preview); this is
  persisted in the state. A message's text is its string content, or the joined
  text of a list made only of text blocks; anything else is left as it is, and
  so is a message whose write fails (OSError) or that has no workdir. The summary
  path splits it into ``plan_offload`` (no I/O) and ``write_offloads``; every
  pass writes inside one ``Workdir.writing_pass``.
- ``truncate_tool_args``: ``write_file`` / ``edit_file`` string arguments over the
  limit shown as their first 20 chars plus a marker, in the model's view only.
- ``compact_messages``: both; ``parse_saved_result``: the one reader of the header.

No model is called here and input messages are never mutated.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from yuxi_dash.agents import DEFAULT_TOOL_RESULT_TOKEN_LIMIT
from yuxi_dash.compression.previews.preview import tool_result_preview
from yuxi_dash.compression.thread_state import SAVED_RESULT_MARKER
from yuxi_dash.errors import PathRefused, WorkdirUnavailable
from yuxi_dash.files.workdir import SavedFile, Workdir, encode_text

logger = logging.getLogger(__name__)
# A write that fails for any of these keeps its message exactly as it was.
_WRITE_FAILURES = (OSError, PathRefused, WorkdirUnavailable)

TRUNCATED_ARG_TOOLS = frozenset({"write_file", "edit_file"})
ARG_TRUNCATION_KEEP_CHARS = 20
ARG_TRUNCATION_MARKER = "...(argument truncated for context view)"

SavedRecord = tuple[str | None, str, SavedFile]  # (tool_call_id, tool_name, saved file)


def is_saved_result(message: BaseMessage) -> bool:
    """True when a ToolMessage already carries the saved-result header."""
    return isinstance(message.content, str) and message.content.startswith(SAVED_RESULT_MARKER)


def tool_result_text(message: BaseMessage) -> str | None:
    """The text a tool result holds: its string content, or its text blocks joined.

    None when the content is a list with anything but text in it (an image, a
    file): that cannot be saved as text and recovered as it was, so it stays.
    """
    content = message.content
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or not content:
        return None
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif (
            isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ):
            parts.append(block["text"])
        else:
            return None
    return "".join(parts)


# The saved-result header: written by `saved_result_header`, read by `parse_saved_result`.
_TOOL = "Tool"
_APPROX_TOKENS = "Approx tokens"
_SHA256 = "SHA-256"
_PATH = "Full output path"
_HEADER_FIELDS = (_TOOL, _APPROX_TOKENS, _SHA256, _PATH)
_PREVIEW_LINE = "Output preview:"
_NOTE_START = "[Truncated "
_TRUNCATED_COUNT = re.compile(r"\[Truncated ([0-9]+) chars\.")


def saved_result_header(tool_name: str, saved: SavedFile, preview: str, original_chars: int) -> str:
    """The text that replaces an offloaded tool result in the model's view."""
    truncated = max(0, original_chars - len(preview))
    return (
        f"{SAVED_RESULT_MARKER}\n"
        f"{_TOOL}: {tool_name}\n"
        f"{_APPROX_TOKENS}: {saved.approx_tokens}\n"
        f"{_SHA256}: {saved.sha256}\n"
        f"{_PATH}: {saved.path}\n"
        "\n"
        f"{_PREVIEW_LINE}\n"
        f"{preview}\n"
        f"{_NOTE_START}{truncated} chars. Read the full output from the saved file.]"
    )


@dataclass(frozen=True)
class SavedResult:
    """A saved-result header as the message states it.

    Every field is the message's own text, so a tool can forge one: show it
    literally and verify the file against its SHA-256 before trusting it. A
    field the header does not carry is "".
    """

    tool: str
    approx_tokens_text: str  # as written; `approx_tokens` is its value when it is a number
    sha256: str
    path: str
    preview: str
    note: str  # "[Truncated N chars. ...]", or "" when there is none

    @property
    def approx_tokens(self) -> int | None:
        """The original result's approximate tokens, None unless the header gives a number."""
        text = self.approx_tokens_text
        return int(text) if text.isascii() and text.isdigit() else None

    @property
    def chars(self) -> int:
        """The original result's characters as the header states them.

        Exact when the truncation note counts what the preview left out (the note is
        written as original minus preview characters): that count plus the preview's
        length. Otherwise (no count, or 0: a result hardly longer than its preview) the
        smaller of the preview's length and ``4 × approx_tokens``, which the original is
        no longer than.
        """
        match = _TRUNCATED_COUNT.match(self.note)
        if match is not None and len(match.group(1)) <= 18 and int(match.group(1)) > 0:
            return int(match.group(1)) + len(self.preview)
        approx = self.approx_tokens
        return len(self.preview) if approx is None else min(4 * approx, len(self.preview))


def parse_saved_result(content: Any) -> SavedResult | None:
    """The header, preview and truncation note of a saved result; None when it is not one.

    A saved result is a string starting with the saved-result marker (what
    `is_saved_result` tests). The header fields are read from the four lines
    after the marker; the preview is everything after the "Output preview:"
    line (everything after the marker when there is no such line) up to the
    last truncation note.
    """
    if not isinstance(content, str) or not content.startswith(SAVED_RESULT_MARKER):
        return None
    fields = dict.fromkeys(_HEADER_FIELDS, "")
    for line in content.split("\n", 6)[1:6]:
        key, sep, value = line.partition(": ")
        if sep and key in fields:
            fields[key] = value
    _, found, rest = content.partition(f"\n{_PREVIEW_LINE}\n")
    if not found:  # no preview line: everything after the marker, so nothing is hidden
        rest = content[len(SAVED_RESULT_MARKER) :].removeprefix("\n")
    preview, sep, note = rest.rpartition(f"\n{_NOTE_START}")
    if sep:
        note = _NOTE_START + note
    else:
        preview, note = rest, ""
    return SavedResult(
        tool=fields[_TOOL],
        approx_tokens_text=fields[_APPROX_TOKENS],
        sha256=fields[_SHA256],
        path=fields[_PATH],
        preview=preview,
        note=note,
    )


def tool_names_by_call_id(messages: Sequence[BaseMessage]) -> dict[str, str]:
    """Tool name of every tool call the AI messages made, by call id."""
    names: dict[str, str] = {}
    for message in messages:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                call_id = call.get("id")
                if call_id:
                    names[call_id] = call.get("name") or ""
    return names


@dataclass(frozen=True)
class PendingOffload:
    """One planned offload: the file to write and the message to put back if that fails.

    The encoded bytes are not kept: a plan of a large thread would hold every result
    twice. ``text`` is the message's own string (the same object) unless the content
    was a list of text blocks, joined here.
    """

    index: int
    original: ToolMessage
    text: str
    tool_call_id: str | None
    tool_name: str
    saved: SavedFile


def plan_offload(
    messages: Sequence[BaseMessage],
    workdir: Workdir | None,
    *,
    tool_result_token_limit: int = DEFAULT_TOOL_RESULT_TOKEN_LIMIT,
    start: int = 0,
) -> tuple[list[BaseMessage], list[PendingOffload]]:
    """The offloaded messages from index ``start`` on, with nothing written yet.

    Returns (messages with saved-result headers, the writes they depend on); apply
    the writes with ``write_offloads``. The engine plans first so a summary that
    fails leaves no file behind.
    """
    result = list(messages)
    pending: list[PendingOffload] = []
    if workdir is None:
        return result, pending
    for index, message, tool_name, text in _offload_candidates(
        result, start, tool_result_token_limit
    ):
        saved, _data = workdir.prepare_tool_result(tool_name, text)
        result[index] = _saved_message(message, text, tool_name, saved, tool_result_token_limit)
        pending.append(PendingOffload(index, message, text, message.tool_call_id, tool_name, saved))
    return result, pending


def _offload_candidates(
    messages: list[BaseMessage], start: int, token_limit: int
) -> Iterator[tuple[int, ToolMessage, str, str]]:
    """(index, message, tool name, text) of every unsaved text ToolMessage over the limit."""
    call_names: dict[str, str] | None = None
    max_chars = token_limit * 4  # ceil(chars / 4) > limit  <=>  chars > 4 * limit
    for index in range(max(0, start), len(messages)):
        message = messages[index]
        if not isinstance(message, ToolMessage):
            continue
        content = tool_result_text(message)
        if content is None:
            continue
        if len(content) <= max_chars or content.startswith(SAVED_RESULT_MARKER):
            continue
        tool_name = message.name
        if not tool_name:
            if call_names is None:
                call_names = tool_names_by_call_id(messages)
            tool_name = call_names.get(message.tool_call_id) or "tool"
        yield index, message, tool_name, content


def _saved_message(
    message: ToolMessage, content: str, tool_name: str, saved: SavedFile, token_limit: int
) -> ToolMessage:
    """``message`` with its content replaced by the saved-result header and preview."""
    preview = tool_result_preview(tool_name, content, token_limit)
    header = saved_result_header(tool_name, saved, preview, len(content))
    return message.model_copy(update={"content": header})


def write_offloads(
    messages: Sequence[BaseMessage], pending: Sequence[PendingOffload], workdir: Workdir
) -> tuple[list[BaseMessage], list[SavedRecord]]:
    """Write planned files; a message whose write fails is put back exactly as it was.

    Writes are sequential: on a busy 2-core host, writer threads measured slower
    (GIL hand-offs, a saturated disk), and one file per result is cheap on its own.
    """
    result = list(messages)
    saved_records: list[SavedRecord] = []
    with workdir.writing_pass():  # the results directory is walked once, not per file
        for item in pending:
            try:
                workdir.write_prepared(item.saved, encode_text(item.text))
            except _WRITE_FAILURES as exc:
                # The message stays exactly as it was; the next compaction tries again.
                logger.warning("tool result offload failed (%s); message kept", type(exc).__name__)
                result[item.index] = item.original
                continue
            saved_records.append((item.tool_call_id, item.tool_name, item.saved))
    return result, saved_records


def offload_tool_results(
    messages: Sequence[BaseMessage],
    workdir: Workdir | None,
    *,
    tool_result_token_limit: int = DEFAULT_TOOL_RESULT_TOKEN_LIMIT,
    start: int = 0,
) -> tuple[list[BaseMessage], list[SavedRecord]]:
    """Offload large ToolMessages from index ``start`` on; return (messages, newly saved).

    One pass, writing as it goes: each result is encoded and hashed once, its file
    written from those bytes, and only a result whose write succeeded gets a
    preview and a header (a failed one stays exactly as it was).
    """
    result = list(messages)
    saved_records: list[SavedRecord] = []
    if workdir is None:
        return result, saved_records
    with workdir.writing_pass():  # the results directory is walked once, not per file
        for index, message, tool_name, text in _offload_candidates(
            result, start, tool_result_token_limit
        ):
            saved, data = workdir.prepare_tool_result(tool_name, text)
            try:
                workdir.write_prepared(saved, data)
            except _WRITE_FAILURES as exc:
                # The message stays exactly as it was; the next compaction tries again.
                logger.warning("tool result offload failed (%s); message kept", type(exc).__name__)
                del data  # freed before the next result is encoded
                continue
            del data  # the next result's bytes are made after this one's are freed
            result[index] = _saved_message(message, text, tool_name, saved, tool_result_token_limit)
            saved_records.append((message.tool_call_id, tool_name, saved))
    return result, saved_records


def _truncate_args(args: dict[str, Any], max_length: int) -> dict[str, Any] | None:
    changed = False
    view: dict[str, Any] = {}
    for key, value in args.items():
        if isinstance(value, str) and len(value) > max_length:
            view[key] = value[:ARG_TRUNCATION_KEEP_CHARS] + ARG_TRUNCATION_MARKER
            changed = True
        else:
            view[key] = value
    return view if changed else None


def truncate_tool_args(
    messages: Sequence[BaseMessage], tool_arg_max_length: int = 2000
) -> list[BaseMessage]:
    """The model's view of ``messages`` with long write_file/edit_file string args shortened."""
    result = list(messages)
    for index, message in enumerate(result):
        if not isinstance(message, AIMessage) or not message.tool_calls:
            continue
        calls = []
        changed = False
        for call in message.tool_calls:
            args = call.get("args")
            if call.get("name") in TRUNCATED_ARG_TOOLS and isinstance(args, dict):
                view_args = _truncate_args(args, tool_arg_max_length)
                if view_args is not None:
                    call = {**call, "args": view_args}
                    changed = True
            calls.append(call)
        if changed:
            result[index] = message.model_copy(update={"tool_calls": calls})
    return result


def compact_messages(
    messages: Sequence[BaseMessage],
    workdir: Workdir | None,
    *,
    tool_result_token_limit: int = DEFAULT_TOOL_RESULT_TOKEN_LIMIT,
    tool_arg_max_length: int = 2000,
) -> list[BaseMessage]:
    """Offload large tool results and truncate long file-write args (the compacted view)."""
    offloaded, _saved = offload_tool_results(
        messages, workdir, tool_result_token_limit=tool_result_token_limit
    )
    return truncate_tool_args(offloaded, tool_arg_max_length)
