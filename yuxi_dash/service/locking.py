"""THE lock on a thread, and the checks every locked write makes first.

Every write to a thread happens in `thread_lock`: one transaction holding the
lock on the thread's `conversations` row until it commits. On PostgreSQL that
is `SELECT ... FOR UPDATE` with `lock_timeout` from settings, on SQLite
`BEGIN IMMEDIATE` with the same busy timeout; running out is 409
`thread_busy` (reason "locked"), never a hang. Which database errors mean
"the lock could not be had" is `store.db.is_lock_failure`, shared with the
audit log's background writer.

The `require_*` checks are the refusals a locked write makes, in the order
the service applies them: the thread (404, deleted 404), its agent (404),
idle (409 `thread_busy`: a running run, a queued request, or an interrupted
run waiting to resume).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash.access.audit import thread_target
from yuxi_dash.errors import AgentNotFound, ThreadBusy, ThreadDeleted, ThreadNotFound
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import is_lock_failure, locked_session
from yuxi_dash.store.models import Agent, Conversation
from yuxi_dash.store.queries import busy_reason

__all__ = ["require_agent", "require_idle", "require_thread", "thread_lock", "thread_target"]


@contextmanager
def thread_lock(
    thread_id: str,
    *,
    settings: Settings | None = None,
    wait_seconds: float | None = None,
) -> Iterator[tuple[Session, Conversation | None]]:
    """One transaction holding THE lock on the thread's conversation row until it commits.

    Yields the session and the locked row (None when there is no such thread).
    Waiting longer than `wait_seconds` (default settings.lock_timeout_seconds)
    raises ThreadBusy.
    """
    settings = settings or get_settings()
    wait = settings.lock_timeout_seconds if wait_seconds is None else wait_seconds
    try:
        with locked_session(settings, wait_seconds=wait) as session:
            conv = session.scalar(
                sa.select(Conversation).where(Conversation.thread_id == thread_id).with_for_update()
            )
            yield session, conv
    except sa.exc.OperationalError as exc:
        if is_lock_failure(exc):
            raise ThreadBusy(
                f"thread {thread_id} is locked by another operation; try again shortly",
                reason="locked",
            ) from exc
        raise


def require_thread(
    conv: Conversation | None, thread_id: str, *, user_id: str | None = None
) -> Conversation:
    """The thread's row; 404 when there is none (or it is another user's), 404 deleted."""
    if conv is None or (user_id is not None and conv.user_id != user_id):
        raise ThreadNotFound(f"thread {thread_id} not found")
    if conv.status == "deleted":  # after the ownership check: another user's thread stays unknown
        raise ThreadDeleted(f"thread {thread_id} is deleted")
    return conv


def require_agent(session: Session, slug: str) -> Agent:
    """The agent row; 404 agent_not_found when there is none."""
    agent = session.scalar(sa.select(Agent).where(Agent.slug == slug))
    if agent is None:
        raise AgentNotFound(f"agent {slug} not found")
    return agent


def require_idle(session: Session, thread_id: str) -> None:
    """409 thread_busy (with the reason) unless the thread is idle."""
    reason = busy_reason(session, thread_id)
    if reason is not None:
        raise ThreadBusy(
            f"thread {thread_id} is busy ({reason}); try again when it is idle", reason=reason
        )
