"""The body of `GET /api/chat/thread/{id}/compressions`, which `yuxi-dash compressions
--json` prints too: one read, so the two never differ.

`thread_compressions` checks the thread (an invalid id is InvalidInput, an unknown one
ThreadNotFound, a deleted one ThreadDeleted), then lists its compression records
(`store.compressions.list_compressions`), newest first, each as `record_dict` writes it
(`CompressionView.to_dict()`, `at` in ISO 8601, the `summary` and the whole `ledger`).
Without a thread (the CLI only): every thread's records. No FastAPI here: the CLI imports
this module without the web stack.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash import validation
from yuxi_dash.errors import ThreadDeleted, ThreadNotFound
from yuxi_dash.store.compressions import CompressionView, count_compressions, list_compressions
from yuxi_dash.store.models import Conversation

DEFAULT_LIMIT = 20  # records a page holds unless the caller says otherwise


def record_dict(view: CompressionView) -> dict[str, Any]:
    """One record as the CLI's --json and the API show it (`at` in ISO 8601)."""
    data = view.to_dict()
    data["at"] = view.at.isoformat()
    return data


def check_thread(session: Session, thread_id: str) -> str:
    """The thread id, once valid and naming a thread that is not deleted."""
    valid = validation.thread_id(thread_id)
    status = session.scalar(sa.select(Conversation.status).where(Conversation.thread_id == valid))
    if status is None:
        raise ThreadNotFound(f"no thread {valid}")
    if status == "deleted":
        raise ThreadDeleted(f"thread {valid} is deleted")
    return valid


def thread_compressions(
    session: Session, thread_id: str | None, *, limit: int = DEFAULT_LIMIT, offset: int = 0
) -> dict[str, Any]:
    """``{"thread_id", "total", "compressions"}``: the records, newest first (every thread's
    when ``thread_id`` is None); ``total`` counts them all, whatever the page."""
    checked = None if thread_id is None else check_thread(session, thread_id)
    views = list_compressions(session, checked, limit=limit, offset=offset)
    return {
        "thread_id": checked,
        "total": count_compressions(session, checked),
        "compressions": [record_dict(view) for view in views],
    }
