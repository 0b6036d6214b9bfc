"""What the projection needs to know of threads' rows in our tables, read for a whole batch.

`load_projected` reads, for many threads at once (one statement per table per
1,000 threads), the chat record's ids and last sequence number, the chat rows
still waiting for their message id, and the saved tool results already
indexed: the `ProjectedRows` `service.projection.project_checkpoints` keeps
up to date while it projects.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash.service.bulk_rows import given_rows
from yuxi_dash.store.db import is_sqlite
from yuxi_dash.store.models import ChatMessage, Conversation, ToolResult

THREAD_CHUNK = 1000  # thread ids in one IN (...) list
_SQLITE_IDS = 900  # message ids in one IN (...) list on SQLite (with the thread ids)


@dataclass
class ProjectedRows:
    """What the projection needs to know of one thread's rows in our tables."""

    recorded: set[str] = field(default_factory=set)  # chat message ids already recorded
    unlinked: dict[tuple[str, str], list[int]] = field(default_factory=dict)  # (role, text) -> ids
    sequence: int = 0  # the chat record's last sequence number
    tool_paths: set[str] = field(default_factory=set)  # saved results already indexed


def load_projected(
    session: Session,
    thread_ids: Sequence[str],
    *,
    messages: Mapping[str, set[str]] | None = None,
    indexing: Collection[str] | None = None,
) -> dict[str, ProjectedRows]:
    """`ProjectedRows` of each thread: one statement per table (per 1,000 threads).

    ``messages``: the message ids each thread's projection may record
    (`new_message_ids`); then only the chat rows that matter are read (those
    ids, the rows with no message yet, the last sequence number), and none for
    a thread with no new message. None reads every chat row of the threads.
    ``indexing``: the threads whose saved tool results the projection indexes
    (those whose newest checkpoint was read with its messages); None: all.
    """
    found = {thread_id: ProjectedRows() for thread_id in thread_ids}
    for start in range(0, len(thread_ids), THREAD_CHUNK):
        chunk = list(thread_ids[start : start + THREAD_CHUNK])
        if messages is None:
            _load_chat(session, found, chunk, None)
        else:
            talking = [t for t in chunk if messages.get(t)]
            if talking:
                _load_chat(session, found, talking, {t: messages[t] for t in talking})
        tooled = chunk if indexing is None else [t for t in chunk if t in indexing]
        if not tooled:
            continue
        for thread_id, path in session.execute(
            sa.select(ToolResult.thread_id, ToolResult.path).where(ToolResult.thread_id.in_(tooled))
        ):
            found[thread_id].tool_paths.add(path)
    return found


def _load_chat(
    session: Session,
    found: dict[str, ProjectedRows],
    thread_ids: list[str],
    wanted: Mapping[str, set[str]] | None,
) -> None:
    """The chat rows of ``thread_ids``: all, or those of the ``wanted`` ids and those with none.

    On PostgreSQL the wanted (thread, message id) pairs are one pair of arrays
    joined on the (thread_id, message_id) index: a long ``IN`` list of ids
    ORed with ``IS NULL`` is planned as a scan of the whole table. SQLite
    gets the ids in lists of `_SQLITE_IDS` (it caps the parameters of one
    statement).
    """
    unlinked_text = sa.case((ChatMessage.message_id.is_(None), ChatMessage.content))
    columns = (
        ChatMessage.thread_id,
        ChatMessage.id,
        ChatMessage.message_id,
        ChatMessage.sequence,
        ChatMessage.role,
        unlinked_text,  # only rows with no message yet need their text
    )
    of_threads = sa.select(*columns).where(ChatMessage.thread_id.in_(thread_ids))
    queries: list[sa.Select[Any]] = [of_threads]
    if wanted is not None:
        queries = [of_threads.where(ChatMessage.message_id.is_(None))]
        if is_sqlite(session):
            ids = sorted(set().union(*wanted.values()))
            queries += [
                of_threads.where(ChatMessage.message_id.in_(ids[start : start + _SQLITE_IDS]))
                for start in range(0, len(ids), _SQLITE_IDS)
            ]
        else:
            pairs = [(t, m) for t, ids in wanted.items() for m in sorted(ids)]
            given = given_rows(
                {
                    "thread_id": (sa.String(), [t for t, _ in pairs]),
                    "message_id": (sa.String(), [m for _, m in pairs]),
                }
            )
            queries.append(
                sa.select(*columns).join(
                    given,
                    sa.and_(
                        ChatMessage.thread_id == given.c.thread_id,
                        ChatMessage.message_id == given.c.message_id,
                    ),
                )
            )
    if wanted is not None:  # the rows read may not include the last one
        # per thread, so that each is one probe of the (thread_id, sequence) index
        last = (
            sa.select(sa.func.max(ChatMessage.sequence))
            .where(ChatMessage.thread_id == Conversation.thread_id)
            .scalar_subquery()
        )
        for thread_id, sequence in session.execute(
            sa.select(Conversation.thread_id, last).where(Conversation.thread_id.in_(thread_ids))
        ):
            found[thread_id].sequence = int(sequence or 0)
    read = sorted(
        (row for query in queries for row in session.execute(query)),
        key=lambda r: (r[0], r[3]),  # thread, sequence
    )
    for thread_id, row_id, message_id, sequence, role, text in read:  # unlinked rows: in order
        rows = found[thread_id]
        rows.sequence = max(rows.sequence, int(sequence))
        if message_id is not None:
            rows.recorded.add(message_id)
        else:
            rows.unlinked.setdefault((role, text), []).append(row_id)
