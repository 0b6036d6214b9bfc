"""The state repository: the service's one way to read and write a thread's state.

A thread's state is its newest checkpoint in the LangGraph checkpointer of the
configured database (`store.checkpointer`). Reads give the engine's view of it
with the checkpoint's id; every write goes through the state graph's
`update_state` and is a compare-and-swap on that id: a write that expected
another checkpoint than the newest raises StaleState instead of overwriting.
Callers hold the thread's row lock around a write; `locked_store` gives the
store that writes inside that lock's own transaction (PostgreSQL: the same
connection, so the checkpoint commits with the lock's transaction or not at all).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from langchain_core.messages import BaseMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from sqlalchemy.orm import Session

from yuxi_dash.compression.state_format import TOKEN_USAGE_KEY
from yuxi_dash.compression.thread_state import ThreadContextState
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.checkpointer import CheckpointStore, ThreadCheckpoint, checkpoint_store
from yuxi_dash.store.db import is_sqlite, normalize_url


@dataclass(frozen=True)
class StoredState:
    """A thread's newest checkpoint as the engine sees it."""

    state: ThreadContextState
    checkpoint_id: str | None
    token_usage: dict[str, Any]

    @classmethod
    def empty(cls, thread_id: str) -> StoredState:
        return cls(ThreadContextState(thread_id=thread_id, messages=[]), None, {})

    @classmethod
    def of(cls, checkpoint: ThreadCheckpoint) -> StoredState:
        usage = checkpoint.values.get(TOKEN_USAGE_KEY)
        return cls(
            state=checkpoint.context(),
            checkpoint_id=checkpoint.checkpoint_id,
            token_usage=dict(usage) if isinstance(usage, Mapping) else {},
        )


def state_store(settings: Settings | None = None) -> CheckpointStore:
    """The checkpoint store of the configured database."""
    return checkpoint_store(normalize_url((settings or get_settings()).database_url))


def locked_store(session: Session, store: CheckpointStore) -> CheckpointStore:
    """``store`` writing in ``session``'s transaction, the one that holds the thread's lock.

    PostgreSQL: the saver runs on the session's own psycopg connection, inside its
    open transaction, so the checkpoint, the projection and the lock commit or roll
    back together, and a session whose backend was ended writes nothing.
    SQLite: the checkpoints live in their own file, which one transaction cannot
    span; ``store`` itself is returned. There the lock (``BEGIN IMMEDIATE``) is held
    by this process until it commits or dies, so it cannot be lost while the write
    runs, but a crash between the checkpoint's commit and the session's leaves the
    checkpoint ahead of its projection, which the next locked write catches up on.
    """
    if is_sqlite(session):
        return store
    connection = session.connection().connection.driver_connection
    if not isinstance(connection, psycopg.Connection):  # pragma: no cover - our URLs use psycopg
        raise TypeError("the locking session is not on a psycopg connection")
    return store.bound_to(connection)


def load_state(thread_id: str, settings: Settings | None = None) -> StoredState | None:
    """The thread's newest checkpoint, or None when it has none."""
    checkpoint = state_store(settings).latest(thread_id)
    return StoredState.of(checkpoint) if checkpoint is not None else None


def write_state(
    thread_id: str,
    update: Mapping[str, Any],
    *,
    expected_checkpoint_id: str | None,
    settings: Settings | None = None,
) -> ThreadCheckpoint:
    """Write ``update`` as the thread's next checkpoint if the newest is still the expected one."""
    return state_store(settings).write(
        thread_id, update, expected_checkpoint_id=expected_checkpoint_id
    )


def replace_messages(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """A ``messages`` update that replaces the whole history (``add_messages`` semantics)."""
    return [RemoveMessage(id=REMOVE_ALL_MESSAGES), *messages]


def delete_thread_state(thread_id: str, settings: Settings | None = None) -> None:
    """Forget every checkpoint of a thread (demo reset)."""
    state_store(settings).saver.delete_thread(thread_id)
