"""THE lock on a thread, and the checks every locked write makes first.

Every write to a thread happens in `thread_lock`: one transaction holding the
lock on the thread's `conversations` row until it commits. On PostgreSQL that
is `SELECT ... FOR UPDATE` with `lock_timeout` from settings, on SQLite
`BEGIN IMMEDIATE` with the same busy timeout; running out is 409 `thread_busy`
(reason "locked"), never a hang. Which database errors mean "the lock could not
be had" is `store.db.is_lock_failure`, shared with the audit log's writer.

The `require_*` checks are the refusals a locked write makes, in the order
the service applies them: the thread (404, deleted 404), its agent (404),
idle (409 `thread_busy`: a running run, a queued request, or an interrupted
run waiting to resume). A compress's lease on its thread (`take_compress_lease`)
is seen by compresses only: another compress is 409 `thread_busy` at once, and
a lease past its time (a killed process) is void; intake never looks at it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash.access.audit import thread_target
from yuxi_dash.compression.summarizers import SUMMARIZER_MAX_RETRIES
from yuxi_dash.errors import AgentNotFound, ThreadBusy, ThreadDeleted, ThreadNotFound
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import is_lock_failure, locked_session
from yuxi_dash.store.models import Agent, Conversation, utcnow
from yuxi_dash.store.queries import busy_reason

__all__ = [
    "clear_compress_lease",
    "compress_in_progress",
    "release_compress_lease",
    "require_agent",
    "require_compress_lease",
    "require_idle",
    "require_thread",
    "take_compress_lease",
    "thread_lock",
    "thread_target",
]

log = logging.getLogger(__name__)

COMPRESS_BUSY_REASON = "compressing"  # ThreadBusy's reason when another compress holds the lease


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


# --- the compress lease ----------------------------------------------------------------
# a lease outlasts every summarizer attempt by this (planning, the phase-3 lock wait)
COMPRESS_LEASE_MARGIN_SECONDS = 60.0


def compress_lease_seconds(settings: Settings) -> float:
    """How long a compress's lease lasts: every attempt the model client may make, a
    timeout each, plus the margin."""
    attempts = 1 + SUMMARIZER_MAX_RETRIES
    return settings.summarizer_timeout_seconds * attempts + COMPRESS_LEASE_MARGIN_SECONDS


def compress_in_progress(conv: Conversation, now: datetime | None = None) -> bool:
    """Whether a compress holds a live lease on the thread (one past its time is void)."""
    until = conv.compress_lease_until
    return conv.compress_lease_id is not None and until is not None and until > (now or utcnow())


def take_compress_lease(conv: Conversation, *, seconds: float) -> str:
    """Mark the thread's row as compressed by a new lease for ``seconds``; returns its id.

    The caller holds the row lock and commits the lease with it. 409 thread_busy (reason
    "compressing") when another compress holds a live lease; a void one is taken over.
    """
    now = utcnow()
    if compress_in_progress(conv, now):
        raise ThreadBusy(
            f"a compress of thread {conv.thread_id} is already in progress; "
            "try again when it has finished",
            reason=COMPRESS_BUSY_REASON,
        )
    lease_id = uuid.uuid4().hex
    conv.compress_lease_id = lease_id
    conv.compress_lease_until = now + timedelta(seconds=seconds)
    return lease_id


def require_compress_lease(conv: Conversation, lease_id: str) -> None:
    """409 thread_busy unless ``lease_id`` is still the thread's lease (it ran out and another
    compress took it over)."""
    if conv.compress_lease_id != lease_id:
        raise ThreadBusy(
            f"a compress of thread {conv.thread_id} took over this one's expired lease; "
            "nothing was written",
            reason=COMPRESS_BUSY_REASON,
        )


def clear_compress_lease(conv: Conversation) -> None:
    """Clear the lease on the locked row (the caller checked it is its own)."""
    conv.compress_lease_id = None
    conv.compress_lease_until = None


def release_compress_lease(thread_id: str, lease_id: str, *, settings: Settings) -> bool:
    """Clear the lease in a transaction of its own if it is still ``lease_id``'s.

    False when that could not be done (the row lock or the database out of reach):
    the lease then stays until its time runs out.
    """
    try:
        with thread_lock(thread_id, settings=settings) as (_session, conv):
            if conv is not None and conv.compress_lease_id == lease_id:
                clear_compress_lease(conv)
        return True
    except Exception:  # the attempt's own outcome matters more; the lease runs out by itself
        log.warning("could not release the compress lease of a thread", exc_info=True)
        return False
