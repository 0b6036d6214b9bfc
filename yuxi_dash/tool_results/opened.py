"""The first look at an offloaded tool result: what the model got in its place, and the file.

`open_tool_result` reads, in one audited read (`tool_results.index.READ_ACTION`, as
`read_tool_result` records it), the tool message the model got instead of the result
(the saved-result header and preview) from the thread's newest checkpoint, so a file
changed or gone since never changes what the page says the model saw, and the file's
first window with its state: ok, mismatch (content changed) or missing (not on this
volume, which is no refusal here). A path leaving the workdir is refused as in
`read_tool_result`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from yuxi_dash import validation
from yuxi_dash.access.audit import audited_refusals, record_audit
from yuxi_dash.access.roles import Actor, Role, require_role
from yuxi_dash.errors import ToolResultNotFound, YuxiDashError
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.checkpointer import CheckpointStore
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Conversation
from yuxi_dash.store.queries import own_store
from yuxi_dash.tool_results.index import (
    DEFAULT_READ_LIMIT,
    MAX_READ_LIMIT,
    READ_ACTION,
    Located,
    ToolResultContent,
    VerifyStatus,
    locate,
    read_file,
)

StoreFor = Callable[
    [Conversation], CheckpointStore
]  # a thread's checkpointer (sources.thread_store)


@dataclass(frozen=True)
class OpenedToolResult:
    """A first look at one offloaded result: what the model got in its place, and the file.

    ``sent``: the tool message the model got instead of the result (the saved-result header
    and preview), as the thread's newest checkpoint ``sent_checkpoint_id`` holds it; None
    when that checkpoint does not hold it or cannot be read (``sent_missing`` says which).
    ``content``: the file's first window; None when the file is not on this volume.
    """

    id: int
    thread_id: str
    tool_name: str
    path: str
    sha256: str
    integrity: VerifyStatus
    sent: str | None
    sent_checkpoint_id: str | None
    sent_missing: str | None
    content: ToolResultContent | None


def _message_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b if isinstance(b, str) else str(b.get("text", ""))
            for b in content
            if isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text")
        )
    return ""


def _sent_copy(
    found: Located, settings: Settings, store_for: StoreFor | None
) -> tuple[str | None, str | None, str | None]:
    """(the tool message the model got, its checkpoint id, why none) from the newest checkpoint.

    The message answers the result's tool call and names its file; without a call id, the
    message naming both its file and its SHA-256.
    """
    try:
        with session_scope(settings) as session:
            conv = session.scalar(
                sa.select(Conversation).where(Conversation.thread_id == found.thread_id)
            )
            if conv is None:
                return None, None, "the thread is gone"
            store = store_for(conv) if store_for is not None else own_store(session, conv)
        checkpoint = store.latest(found.thread_id)
    except YuxiDashError as exc:
        return None, None, f"its checkpoint cannot be read [{exc.code}]"
    if checkpoint is None:
        return None, None, "the thread has no checkpoint"
    for message in reversed(checkpoint.context().messages):
        if message.type != "tool":
            continue
        text = _message_text(message.content)
        call_id = getattr(message, "tool_call_id", None)
        if found.path in text and (
            call_id == found.tool_call_id if found.tool_call_id else found.sha256[:16] in text
        ):
            return text, checkpoint.checkpoint_id, None
    return None, checkpoint.checkpoint_id, "the thread's newest checkpoint does not hold it"


def open_tool_result(
    result_id: int,
    *,
    actor: Actor,
    limit: int = DEFAULT_READ_LIMIT,
    settings: Settings | None = None,
    store_for: StoreFor | None = None,
) -> OpenedToolResult:
    """What the model got in the result's place, and the file's first window and state.

    One audit row, as `read_tool_result` writes it (``opened``: true, ``sent``: whether the
    checkpoint held the model's copy). A file not on this volume is no refusal here: its
    state is "missing" and ``content`` None. ``store_for`` picks the thread's checkpointer
    (`yuxi_dash.sources.thread_store` for an attached platform's thread).
    """
    settings = settings or get_settings()
    target = f"tool_result:{result_id}"
    detail: dict[str, Any] = {"offset": 0, "limit": limit, "role": actor.role.label}
    # a refusal is one audit row with what was known by then (`detail` grows in the block)
    with audited_refusals(
        actor=actor.id, action=READ_ACTION, target=target, detail=detail, settings=settings
    ):
        require_role(actor, Role.VIEWER, action="reading a tool result")
        validation.db_id(result_id, "tool result id")
        validation.integer(limit, "limit", minimum=1)
        limit = min(limit, MAX_READ_LIMIT)
        found = locate(result_id, settings)
        detail.update({"thread_id": found.thread_id, "path": found.path, "opened": True})
        try:
            full: str | None
            full, integrity = read_file(found, settings)
        except ToolResultNotFound:
            full, integrity = None, "missing"
    sent, checkpoint_id, missing = _sent_copy(found, settings, store_for)
    record_audit(
        actor=actor.id,
        action=READ_ACTION,
        target=target,
        outcome="ok",
        detail={**detail, "integrity": integrity, "sent": sent is not None},
        settings=settings,
    )
    content = (
        None
        if full is None
        else ToolResultContent(
            id=result_id,
            thread_id=found.thread_id,
            tool_name=found.tool_name,
            path=found.path,
            sha256=found.sha256,
            text=full[:limit],
            offset=0,
            total_chars=len(full),
            integrity=integrity,
        )
    )
    return OpenedToolResult(
        id=result_id,
        thread_id=found.thread_id,
        tool_name=found.tool_name,
        path=found.path,
        sha256=found.sha256,
        integrity=integrity,
        sent=sent,
        sent_checkpoint_id=checkpoint_id,
        sent_missing=missing,
        content=content,
    )
