"""Which threads a compress would leave unchanged, read in one pass for a list page.

`compress_readiness` reads each thread's newest checkpoint (ours; never an attached
platform's, whose threads are not compressed here) and asks the engine whether a
compress would summarize (`compression.summary_readiness`). Read-only: nothing is
locked or written. A thread with no checkpoint has nothing to summarize.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from yuxi_dash.agents import DEFAULT_SUMMARY_KEEP_MESSAGES
from yuxi_dash.compression import Readiness, ThreadContextState, summary_readiness
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Agent, Conversation
from yuxi_dash.store.thread_store import load_state


def compress_readiness(
    thread_ids: Sequence[str], settings: Settings | None = None
) -> dict[str, Readiness]:
    """Each thread's `Readiness` (``reason`` None: a compress would summarize)."""
    settings = settings or get_settings()
    ids = list(dict.fromkeys(thread_ids))
    if not ids:
        return {}
    with session_scope(settings) as session:
        keeps: dict[str, int | None] = {
            thread_id: keep
            for thread_id, keep in session.execute(
                sa.select(Conversation.thread_id, Agent.summary_keep_messages)
                .outerjoin(Agent, Agent.slug == Conversation.agent_slug)
                .where(Conversation.thread_id.in_(ids))
            )
        }
    out: dict[str, Readiness] = {}
    for thread_id in ids:
        stored = load_state(thread_id, settings)
        state = stored.state if stored else ThreadContextState(thread_id=thread_id, messages=[])
        keep = keeps.get(thread_id) or DEFAULT_SUMMARY_KEEP_MESSAGES
        out[thread_id] = summary_readiness(state, keep_messages=keep)
    return out
