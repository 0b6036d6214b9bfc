"""The one place that picks a thread's source: `thread_source(thread_id)`, or many at once.

The row's origin is read once (`store.origin`) and the source built from it is handed on;
no caller tests the origin again. A thread id we refuse, or one we do not know, resolves
to `OwnSource`: the core's own checks then refuse it (invalid_input, 404), audited.
`thread_store` is the same choice for a caller that already holds the row (a page's
thread detail, the support bundle).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa

from yuxi_dash import validation
from yuxi_dash.attach.platform_store import audited_platform_store
from yuxi_dash.errors import YuxiDashError
from yuxi_dash.platform.compress import AttachedRow
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.sources.attached import AttachedSource
from yuxi_dash.sources.base import ThreadSource
from yuxi_dash.sources.own import OwnSource
from yuxi_dash.store.checkpointer import CheckpointStore
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Conversation
from yuxi_dash.store.origin import compress_route, is_attached
from yuxi_dash.store.thread_store import state_store

_ROW = (
    Conversation.thread_id,
    Conversation.origin,
    Conversation.user_id,
    Conversation.agent_slug,
    Conversation.status,
    Conversation.summary_pressure_ratio,
    Conversation.checkpoint_id,
)


def _source(row: Any, settings: Settings) -> ThreadSource:
    """The source of one row of `_ROW`."""
    if not is_attached(row.origin):
        return OwnSource(row.thread_id, settings)
    return AttachedSource(
        row=AttachedRow(
            thread_id=row.thread_id,
            user_id=row.user_id,
            agent_slug=row.agent_slug,
            status=row.status,
            summary_pressure_ratio=row.summary_pressure_ratio,
        ),
        checkpoint_id=row.checkpoint_id,
        settings=settings,
        route=compress_route(row.origin, settings),
    )


def thread_sources(
    thread_ids: Iterable[str], settings: Settings | None = None
) -> dict[str, ThreadSource]:
    """Each thread id's source, in one read (unknown and invalid ids: `OwnSource`)."""
    settings = settings or get_settings()
    wanted = list(dict.fromkeys(thread_ids))
    valid = []
    for thread_id in wanted:
        try:
            valid.append(validation.thread_id(thread_id))
        except YuxiDashError:
            continue
    found: dict[str, ThreadSource] = {}
    if valid:
        with session_scope(settings) as session:
            for row in session.execute(sa.select(*_ROW).where(Conversation.thread_id.in_(valid))):
                found[row.thread_id] = _source(row, settings)
    return {t: found.get(t) or OwnSource(t, settings) for t in wanted}


def thread_source(thread_id: str, settings: Settings | None = None) -> ThreadSource:
    """The thread's source, read once (an unknown or invalid id: `OwnSource`)."""
    return thread_sources([thread_id], settings)[thread_id]


def thread_store(conv: Conversation, settings: Settings | None = None) -> CheckpointStore:
    """The checkpointer a thread's state is read from, for a caller holding its row."""
    settings = settings or get_settings()
    if is_attached(conv.origin):
        return audited_platform_store(conv.thread_id, conv.checkpoint_id, settings)
    return state_store(settings)
