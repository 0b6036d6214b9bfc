"""A recoverable evidence item opened at its line: the saved file a compression points to.

`open_saved_line(compression_id, item, actor=...)` reads the file and line that item
``item`` of a compression record's ledger (`store.compressions`) names: a tool-result file,
the thread's history file or an evidence index. The path comes from the record, never from
the caller, so only a file a compression named can be opened. The file is read through the
workdir's link-refusing reads (`files.workdir.Workdir`: every component opened with
O_NOFOLLOW; a link is `path_refused`) under the thread's own workdir
(`Settings.workdir_for`), and checked where a SHA-256 is known: a tool result's against its
index row, the history file against the one recorded with the compression (a later
compression may have added to it since). Every read is one audit row
(`READ_LINES_ACTION`), allowed or refused, as tool-result reads are.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash import validation
from yuxi_dash.access.audit import audited_refusals, record_audit
from yuxi_dash.access.roles import Actor, Role, require_role
from yuxi_dash.compression.evidence_keep import named_evidence_index
from yuxi_dash.errors import InvalidInput, NotFound, PathRefused
from yuxi_dash.files.workdir import Workdir
from yuxi_dash.printable_record import Record
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.compressions import CompressionRecord
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Conversation, ToolResult

READ_LINES_ACTION = "read_saved_file"
CONTEXT_LINES = 6  # lines shown before and after the item's line
MAX_CONTEXT_LINES = 200
LINE_CHARS = 1200  # the item's line: at most this much, around the item's value
CONTEXT_CHARS = 240  # each other line: its head
FileCheck = Literal["ok", "mismatch", "unchecked"]
CHECKED_AGAINST = ("tool result", "history")  # whose SHA-256 a check used


@dataclass(frozen=True)
class SavedLines(Record):
    """Lines around one recoverable item's line, as the file holds them now.

    ``lines`` are lines ``first_line`` on (1-based), each clipped: the item's own line
    (``line``) to ``LINE_CHARS`` around the item's value, starting at character
    ``line_offset`` of that line (``line_chars`` long in all); the others to their first
    ``CONTEXT_CHARS``. ``check``: whether the file still matches the SHA-256 named by
    ``checked_against`` ("unchecked" when none is known).
    """

    compression_id: int
    thread_id: str
    item: int
    kind: str
    value: str
    cited: bool
    path: str
    line: int
    first_line: int
    lines: tuple[str, ...]
    line_offset: int
    line_chars: int
    total_lines: int
    check: FileCheck
    checked_against: str | None


@dataclass(frozen=True)
class _Target:
    thread_id: str
    origin: str
    kind: str
    value: str
    cited: bool
    path: str
    line: int
    sha256: str | None
    against: str | None


def _find_value(text: str, value: str) -> int:
    """Where ``value`` (as written, else JSON-escaped) first is in ``text``; -1 if not."""
    for form in (value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]):
        position = text.find(form) if form else -1
        if position >= 0:
            return position
    return -1


def line_window(line: str, value: str, width: int = LINE_CHARS) -> tuple[int, str]:
    """(start, text): at most ``width`` characters of ``line`` with ``value`` in them, when
    it is there (a third of the room before it), else its head."""
    if len(line) <= width:
        return 0, line
    position = _find_value(line, value)
    start = 0 if position < 0 else max(0, min(position - width // 3, len(line) - width))
    return start, line[start : start + width]


def _clip(line: str, width: int = CONTEXT_CHARS) -> str:
    return line if len(line) <= width else line[: width - 1] + "…"


def _target(session: Session, compression_id: int, item: int) -> _Target:
    record = session.get(CompressionRecord, compression_id)
    if record is None:
        raise NotFound(f"compression {compression_id} not found")
    items = list((record.ledger or {}).get("items") or [])
    if item >= len(items):
        raise NotFound(f"compression {compression_id} has no evidence item {item}")
    found = items[item]
    path, line = found.get("file"), found.get("line")
    if found.get("state") != "recoverable" or not isinstance(path, str) or not path:
        raise InvalidInput(
            f"evidence item {item} of compression {compression_id} is not recoverable"
        )
    if not isinstance(line, int) or isinstance(line, bool) or line < 1:
        raise InvalidInput(f"evidence item {item} of compression {compression_id} has no line")
    origin = session.scalar(
        sa.select(Conversation.origin).where(Conversation.thread_id == record.thread_id)
    )
    sha256, against = None, None
    if path == record.history_file and record.history_sha256:
        sha256, against = record.history_sha256, "history"
    else:
        sha256 = session.scalar(
            sa.select(ToolResult.sha256)
            .where(ToolResult.thread_id == record.thread_id, ToolResult.path == path)
            .limit(1)
        )
        against = "tool result" if sha256 else None
    if against is None and path != named_evidence_index(record.summary or ""):
        # only this thread's own files: its history, its evidence index, its indexed results
        raise PathRefused(f"{path} is not a file of thread {record.thread_id}")
    return _Target(
        thread_id=record.thread_id,
        origin=origin or "",
        kind=str(found.get("kind") or ""),
        value=str(found.get("value") or ""),
        cited=bool(found.get("cited")),
        path=path,
        line=line,
        sha256=sha256,
        against=against,
    )


def _read(workdir: Workdir, target: _Target) -> tuple[str, FileCheck]:
    try:
        if target.sha256:
            return workdir.read_verified(target.path, target.sha256)
        return workdir.read_text(target.path), "unchecked"
    except (FileNotFoundError, IsADirectoryError):
        raise NotFound(f"the file is not on this volume: {target.path}") from None


def open_saved_line(
    compression_id: int,
    item: int,
    *,
    actor: Actor,
    context: int = CONTEXT_LINES,
    settings: Settings | None = None,
) -> SavedLines:
    """The lines around evidence item ``item`` (its index in the record's ledger) of
    compression ``compression_id``; audited either way.

    NotFound: no such compression, item or file on this volume; InvalidInput: the item is
    not recoverable; PathRefused: the path is none of the thread's own files (its history, its
    evidence index, its indexed tool results), crosses a link or leaves the workdir.
    """
    settings = settings or get_settings()
    target_name = f"compression:{compression_id}"
    detail: dict[str, Any] = {"item": item, "role": actor.role.label}
    with audited_refusals(
        actor=actor.id,
        action=READ_LINES_ACTION,
        target=target_name,
        detail=detail,
        settings=settings,
    ):
        require_role(actor, Role.VIEWER, action="reading a saved file")
        compression_id = validation.db_id(compression_id, "compression id")
        item = validation.non_negative(item, "evidence item")
        context = validation.non_negative(context, "context lines", maximum=MAX_CONTEXT_LINES)
        with session_scope(settings) as session:
            target = _target(session, compression_id, item)
        detail.update({"thread_id": target.thread_id, "path": target.path, "line": target.line})
        text, check = _read(Workdir(settings.workdir_for(target.origin)), target)
        every = text.split("\n")
        if target.line > len(every):
            raise NotFound(f"{target.path} has {len(every)} lines now, not line {target.line}")
    record_audit(
        actor=actor.id,
        action=READ_LINES_ACTION,
        target=target_name,
        outcome="ok",
        detail={**detail, "check": check},
        settings=settings,
    )
    first = max(1, target.line - context)
    last = min(len(every), target.line + context)
    own = every[target.line - 1]
    offset, window = line_window(own, target.value)
    lines = tuple(
        window if number == target.line else _clip(every[number - 1])
        for number in range(first, last + 1)
    )
    return SavedLines(
        compression_id=compression_id,
        thread_id=target.thread_id,
        item=item,
        kind=target.kind,
        value=target.value,
        cited=target.cited,
        path=target.path,
        line=target.line,
        first_line=first,
        lines=lines,
        line_offset=offset,
        line_chars=len(own),
        total_lines=len(every),
        check=check,
        checked_against=target.against if check != "unchecked" else None,
    )
