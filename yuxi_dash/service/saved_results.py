"""The tool-results index, read from saved-result headers: only the file a header's writer made.

A saved-result header is a message's own text, so a tool (or a platform's user) can forge
one. The writer names a result's file by its content alone (`files.workdir.tool_result_relpath`:
the tool's name and the first 16 hex digits of the content's SHA-256). A header is indexed
only when its path is exactly the file its own tool and full SHA-256 name (never a history
file, the marker, another directory, or a file of other content), and when no thread of
another owner (another user, or the other origin) indexed that file first. A refused header
is indexed nowhere and audited once per thread (``index_saved_result``, refused,
``saved_result_refused``, the header's digest), however often the thread is projected again.

"First" is read and written in one transaction holding each path's lock: on PostgreSQL a
transaction advisory lock per path (`PATH_LOCK_SPACE` and the path's `hashtext`, taken in key
order, so writers never wait in a circle); on SQLite the database's single writer.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any, cast

import sqlalchemy as sa
from langchain_core.messages import BaseMessage, ToolMessage
from sqlalchemy.orm import Session

from yuxi_dash import validation
from yuxi_dash.access.audit import audit_rows, thread_target
from yuxi_dash.compression.compaction import parse_saved_result
from yuxi_dash.errors import InvalidInput
from yuxi_dash.files.workdir import tool_result_relpath
from yuxi_dash.service.bulk_rows import insert_rows
from yuxi_dash.service.projected_rows import THREAD_CHUNK, ProjectedRows
from yuxi_dash.store.db import is_sqlite
from yuxi_dash.store.models import AuditEntry, Conversation, ToolResult, utcnow

PROJECTION_ACTOR = "system:projection"
REFUSE_ACTION = "index_saved_result"
REFUSED_CODE = "saved_result_refused"
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
PATH_LOCK_SPACE = 270_727_031  # pg_advisory_xact_lock(space, hashtext(path)): one owner a file
# Each path's lock, in key order (the subquery's order is the order they are taken in).
LOCK_PATHS = sa.text(
    "SELECT count(pg_advisory_xact_lock(CAST(:space AS integer), key)) FROM ("
    "SELECT DISTINCT hashtext(path) AS key FROM unnest(CAST(:paths AS text[])) AS path "
    "ORDER BY key) AS keys"
)

Refusal = tuple[str, str, str]  # (thread id, the header's key (`header_key`), why)


def header_key(row: Mapping[str, Any]) -> str:
    """A saved-result header's identity in a refusal's audit row: a digest of its index row's
    tool, SHA-256 and path (the platform's text, never written out)."""
    named = "\0".join((row["tool_name"], row["sha256"], row["path"]))
    return hashlib.sha256(named.encode()).hexdigest()[:32]


def refused_header(tool: str, sha256: str, path: str) -> str | None:
    """Why a header is not indexed (None: its path is the file its tool and SHA-256 name)."""
    if not _SHA256_HEX.fullmatch(sha256):
        return "the header's SHA-256 is not 64 lowercase hex digits"
    try:
        validation.text(tool, "tool name", limit=1024)
    except InvalidInput:
        return "the header's tool name cannot be stored"
    if path != tool_result_relpath(tool, sha256):
        return "the header's path is not the file its tool and SHA-256 name"
    return None


def index_saved_results(
    tools: list[dict[str, Any]],
    refused: list[Refusal],
    thread_id: str,
    messages: Iterable[BaseMessage],
    rows: ProjectedRows,
) -> int:
    """Index rows for the saved results ``messages`` point at (not indexed yet), into ``tools``."""
    added = 0
    for message in messages:
        if not isinstance(message, ToolMessage):
            continue
        saved = parse_saved_result(message.content)
        if saved is None or not saved.path or not saved.sha256 or saved.path in rows.tool_paths:
            continue
        tool = saved.tool or message.name or "tool"
        row = {
            "thread_id": thread_id,
            "tool_name": tool[:128],
            "tool_call_id": message.tool_call_id,
            "sha256": saved.sha256,
            "path": saved.path[:1024],
            "chars": saved.chars,
            "approx_tokens": saved.approx_tokens or 0,
            "created_at": utcnow(),
        }
        why = refused_header(tool, saved.sha256, saved.path)
        if why is not None:
            refused.append((thread_id, header_key(row), why))
            continue
        tools.append(row)
        rows.tool_paths.add(saved.path)
        added += 1
    return added


def owned_results(
    session: Session,
    tools: list[dict[str, Any]],
    owners: Mapping[str, Conversation],
    refused: list[Refusal],
) -> list[dict[str, Any]]:
    """``tools`` less the files a thread of another owner indexed (those go to ``refused``)."""
    if not tools:
        return []
    paths = sorted({row["path"] for row in tools})
    if not is_sqlite(session):
        session.execute(LOCK_PATHS, {"space": PATH_LOCK_SPACE, "paths": paths})
    held: dict[str, set[tuple[str, str]]] = {}
    for start in range(0, len(paths), THREAD_CHUNK):
        found = session.execute(
            sa.select(ToolResult.path, Conversation.origin, Conversation.user_id)
            .join(Conversation, Conversation.thread_id == ToolResult.thread_id)
            .where(ToolResult.path.in_(paths[start : start + THREAD_CHUNK]))
        )
        for path, origin, user in found:
            held.setdefault(path, set()).add((origin, user))
    kept = []
    for row in tools:
        conv = owners.get(row["thread_id"])
        mine = {(conv.origin, conv.user_id)} if conv is not None else set()
        if held.get(row["path"], set()) - mine:
            why = "the file is another owner's saved result"
            refused.append((row["thread_id"], header_key(row), why))
            continue
        kept.append(row)
        held.setdefault(row["path"], set()).update(mine)  # a later thread of this batch too
    return kept


def audit_refusals(session: Session, refused: Iterable[Refusal]) -> None:
    """One audit row per refused header and thread, in the projection's transaction (one
    ``COPY``): the first time a projection meets it. A header stays in the thread's state,
    and each later projection of the thread meets it again; that is not audited again."""
    wanted = list(refused)
    if not wanted:
        return
    targets = sorted({thread_target(thread_id) for thread_id, _, _ in wanted})
    held: set[tuple[str, Any]] = set()
    for start in range(0, len(targets), THREAD_CHUNK):
        found = session.execute(
            sa.select(AuditEntry.target, AuditEntry.detail).where(
                AuditEntry.action == REFUSE_ACTION,
                AuditEntry.target.in_(targets[start : start + THREAD_CHUNK]),
            )
        )
        held.update(
            (target, detail.get("header") if isinstance(detail, dict) else None)
            for target, detail in found
        )
    rows = []
    for thread_id, key, why in wanted:
        target = thread_target(thread_id)
        if (target, key) not in held:
            held.add((target, key))
            rows.append((target, {"code": REFUSED_CODE, "reason": why, "header": key}))
    audits = audit_rows(actor=PROJECTION_ACTOR, action=REFUSE_ACTION, outcome="refused", rows=rows)
    insert_rows(session, cast(sa.Table, AuditEntry.__table__), audits)
