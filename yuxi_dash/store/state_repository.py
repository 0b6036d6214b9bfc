"""The state repository: the only writer of `thread_states`.

Every write is a compare-and-swap on `version`: `UPDATE ... WHERE thread_id =
:t AND version = :expected`; zero rows means someone else moved the state and
the write raises StaleState instead of overwriting. The first write of a thread
is an INSERT at version 1 (a concurrent first write hits the primary key and is
reported as StaleState too). Callers run inside their own transaction (the
service holds the conversation row lock around it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash.compression.state import ThreadContextState
from yuxi_dash.errors import StaleState
from yuxi_dash.store.models import ThreadState, utcnow


@dataclass(frozen=True)
class StoredState:
    """A checkpoint as read: the context state, its version and token usage."""

    state: ThreadContextState
    version: int
    token_usage: dict[str, Any]


def load_state(session: Session, thread_id: str) -> StoredState | None:
    """The current checkpoint of a thread, or None when it was never written."""
    row = session.execute(
        sa.select(
            ThreadState.version,
            ThreadState.messages,
            ThreadState.summary,
            ThreadState.history_session_id,
            ThreadState.token_usage,
        ).where(ThreadState.thread_id == thread_id)
    ).one_or_none()
    if row is None:
        return None
    state = ThreadContextState.from_storage(
        thread_id,
        {
            "messages": row.messages,
            "summary": row.summary,
            "history_session_id": row.history_session_id,
        },
    )
    return StoredState(state=state, version=row.version, token_usage=dict(row.token_usage or {}))


def current_version(session: Session, thread_id: str) -> int:
    """The checkpoint version (0 when no checkpoint exists yet)."""
    version = session.scalar(
        sa.select(ThreadState.version).where(ThreadState.thread_id == thread_id)
    )
    return int(version or 0)


def write_state(
    session: Session,
    state: ThreadContextState,
    *,
    expected_version: int,
    token_usage: dict[str, Any] | None = None,
) -> int:
    """Write `state` if the stored version is still `expected_version`; return the new version.

    `expected_version=0` means "no checkpoint yet" (an INSERT). `token_usage=None`
    keeps the stored token usage. Raises StaleState when the version moved.
    """
    storage = state.to_storage()
    values: dict[str, Any] = {
        "messages": storage["messages"],
        "summary": storage["summary"],
        "history_session_id": storage["history_session_id"],
        "updated_at": utcnow(),
    }
    if token_usage is not None:
        values["token_usage"] = dict(token_usage)
    if expected_version == 0:
        try:
            with session.begin_nested():
                session.execute(
                    sa.insert(ThreadState).values(
                        thread_id=state.thread_id,
                        version=1,
                        token_usage=values.pop("token_usage", {}),
                        **values,
                    )
                )
        except sa.exc.IntegrityError as exc:
            raise StaleState(
                f"thread {state.thread_id} already has a checkpoint; reload and retry"
            ) from exc
        return 1
    result = session.execute(
        sa.update(ThreadState)
        .where(
            ThreadState.thread_id == state.thread_id,
            ThreadState.version == expected_version,
        )
        .values(version=ThreadState.version + 1, **values)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:
        raise StaleState(
            f"thread {state.thread_id} moved past version {expected_version}; reload and retry"
        )
    return expected_version + 1
