"""Projecting checkpoints into the dashboard's tables: usage timeline, current usage, index, chat.

The checkpoint is the truth; the dashboard's rows are a projection of it that
can always be made again. `project_thread` reads the checkpoints newer than
the one the conversation row last saw (`conversations.checkpoint_id`) and, in
the caller's transaction:

- adds a `usage_snapshots` row for each checkpoint whose `token_usage`
  changed: source `manual_compression` when the usage says so (our compress
  writes it), `auto_compaction` when the summary event changed in that step,
  else `model_call`; a state with no usage at all (a platform without the
  token-usage middleware) is measured here with the agent's settings;
- moves the thread's current usage to the newest snapshot;
- indexes every saved tool result its messages point at (`tool_results`);
- appends each message a step added to the chat record, as it was first
  written (a tool result before it was offloaded), unless already recorded;
- records the newest checkpoint id.

Own threads are projected by the service right after it writes a checkpoint
(under the row lock); attached threads by the scanner.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from langchain_core.messages import BaseMessage, ToolMessage
from sqlalchemy.orm import Session

from yuxi_dash.agents import AGENT_DEFAULTS
from yuxi_dash.compression.agent_state import SUMMARIZATION_EVENT_KEY, TOKEN_USAGE_KEY
from yuxi_dash.compression.compaction import parse_saved_result
from yuxi_dash.compression.engine import count_state_tokens
from yuxi_dash.compression.state import chat_role, is_summary_message, message_text
from yuxi_dash.service.usage_writes import apply_usage, set_current_usage
from yuxi_dash.store.checkpoints import CheckpointStore, ThreadCheckpoint
from yuxi_dash.store.models import (
    SNAPSHOT_SOURCES,
    Agent,
    ChatMessage,
    Conversation,
    ToolResult,
    utcnow,
)
from yuxi_dash.usage import UsageSnapshot, summary_trigger_tokens

_MEASURED = ("llm_input_tokens", "next_llm_input_tokens", "context_window")


def checkpoints_since(
    store: CheckpointStore, thread_id: str, since: str | None
) -> tuple[ThreadCheckpoint | None, list[ThreadCheckpoint]]:
    """(the checkpoint ``since``, the newer ones oldest first); (None, all) when not found."""
    newer: list[ThreadCheckpoint] = []
    for checkpoint in store.history(thread_id):
        if since is not None and checkpoint.checkpoint_id == since:
            newer.reverse()
            return checkpoint, newer
        newer.append(checkpoint)
    newer.reverse()
    return None, newer


def usage_from_values(values: Mapping[str, Any]) -> UsageSnapshot | None:
    """The usage snapshot a checkpoint's ``token_usage`` states, None when it states none."""
    usage = values.get(TOKEN_USAGE_KEY)
    if not isinstance(usage, Mapping) or not all(
        isinstance(usage.get(key), int | float) for key in _MEASURED
    ):
        return None
    return UsageSnapshot(
        llm_input_tokens=int(usage["llm_input_tokens"]),
        next_llm_input_tokens=int(usage["next_llm_input_tokens"]),
        context_window=int(usage["context_window"]),
        summary_trigger_tokens=int(usage.get("summary_trigger_tokens") or 0),
        summary_active=bool(usage.get("summary_active")),
    )


def _measured_at(values: Mapping[str, Any], checkpoint: ThreadCheckpoint) -> datetime:
    usage = values.get(TOKEN_USAGE_KEY)
    stated = usage.get("measured_at") if isinstance(usage, Mapping) else None
    if isinstance(stated, str):
        try:
            return datetime.fromisoformat(stated)
        except ValueError:
            pass
    return checkpoint.created_at or utcnow()


def _imported(values: Mapping[str, Any]) -> bool:
    usage = values.get(TOKEN_USAGE_KEY)
    return isinstance(usage, Mapping) and bool(usage.get("imported"))


def _source(previous: Mapping[str, Any] | None, values: Mapping[str, Any]) -> str:
    usage = values.get(TOKEN_USAGE_KEY)
    stated = usage.get("source") if isinstance(usage, Mapping) else None
    if stated in SNAPSHOT_SOURCES:
        return str(stated)
    before = (previous or {}).get(SUMMARIZATION_EVENT_KEY)
    if (
        values.get(SUMMARIZATION_EVENT_KEY) is not None
        and values.get(SUMMARIZATION_EVENT_KEY) != before
    ):
        return "auto_compaction"
    return "model_call"


def measured_usage(checkpoint: ThreadCheckpoint, agent: Agent | None) -> UsageSnapshot:
    """Usage of a state that states none, measured with the agent's settings (or the defaults)."""
    state = checkpoint.context()
    tokens = count_state_tokens(state)
    window = agent.context_window if agent else AGENT_DEFAULTS["context_window"]
    threshold = agent.summary_threshold if agent else AGENT_DEFAULTS["summary_threshold"]
    return UsageSnapshot(
        llm_input_tokens=tokens,
        next_llm_input_tokens=tokens,
        context_window=window,
        summary_trigger_tokens=summary_trigger_tokens(threshold),
        summary_active=state.summary_active(),
    )


def project_thread(
    session: Session, conv: Conversation, store: CheckpointStore
) -> ThreadCheckpoint | None:
    """Bring the conversation's projection up to its newest checkpoint; return that checkpoint."""
    baseline, newer = checkpoints_since(store, conv.thread_id, conv.checkpoint_id)
    if not newer:
        return baseline
    previous = baseline.values if baseline is not None else None
    snapshots = 0
    chat = ChatRecorder(session, conv.thread_id)
    for checkpoint in newer:
        usage = usage_from_values(checkpoint.values)
        changed = previous is None or previous.get(TOKEN_USAGE_KEY) != checkpoint.values.get(
            TOKEN_USAGE_KEY
        )
        if usage is not None and changed and _imported(checkpoint.values):
            set_current_usage(conv, usage, measured_at=_measured_at(checkpoint.values, checkpoint))
            snapshots += 1  # an import measures the thread, it is not a model call
        elif usage is not None and changed:
            apply_usage(
                session,
                conv,
                usage,
                source=_source(previous, checkpoint.values),
                measured_at=_measured_at(checkpoint.values, checkpoint),
            )
            snapshots += 1
        # the messages this step added, as first written (a tool result before its offload)
        chat.record(
            _added_messages(previous, checkpoint.values), at=checkpoint.created_at or utcnow()
        )
        previous = checkpoint.values
    latest = newer[-1]
    if snapshots == 0 and usage_from_values(latest.values) is None:
        agent = session.scalar(sa.select(Agent).where(Agent.slug == conv.agent_slug))
        measured_at = latest.created_at or utcnow()
        apply_usage(
            session,
            conv,
            measured_usage(latest, agent),
            source="model_call",
            measured_at=measured_at,
        )
    index_saved_results(session, conv.thread_id, latest.values.get("messages") or [])
    conv.checkpoint_id = latest.checkpoint_id
    return latest


def _added_messages(
    previous: Mapping[str, Any] | None, values: Mapping[str, Any]
) -> list[BaseMessage]:
    """The messages of ``values`` whose ids ``previous`` does not have (all without a baseline)."""
    known = {m.id for m in (previous or {}).get("messages") or [] if isinstance(m, BaseMessage)}
    return [
        m for m in values.get("messages") or [] if isinstance(m, BaseMessage) and m.id not in known
    ]


def index_saved_results(session: Session, thread_id: str, messages: Iterable[BaseMessage]) -> int:
    """Index every saved tool result the messages point at and the index does not hold yet."""
    known = set(
        session.scalars(sa.select(ToolResult.path).where(ToolResult.thread_id == thread_id))
    )
    added = 0
    for message in messages:
        if not isinstance(message, ToolMessage):
            continue
        saved = parse_saved_result(message.content)
        if saved is None or not saved.path or not saved.sha256 or saved.path in known:
            continue
        approx = saved.approx_tokens or 0
        session.add(
            ToolResult(
                thread_id=thread_id,
                tool_name=(saved.tool or message.name or "tool")[:128],
                tool_call_id=message.tool_call_id,
                sha256=saved.sha256[:64],
                path=saved.path[:1024],
                chars=approx * 4,
                approx_tokens=approx,
            )
        )
        known.add(saved.path)
        added += 1
    return added


class ChatRecorder:
    """Appends state messages to one thread's chat record; reads the record once.

    A message is recorded once, by id. A row written before its message had an
    id (intake records the user's words as they arrive) is linked to the first
    message with the same role and text instead of being written a second time.
    """

    def __init__(self, session: Session, thread_id: str) -> None:
        self.session = session
        self.thread_id = thread_id
        self.recorded = set(
            session.scalars(
                sa.select(ChatMessage.message_id).where(
                    ChatMessage.thread_id == thread_id, ChatMessage.message_id.is_not(None)
                )
            )
        )
        self.unlinked: dict[tuple[str, str], list[int]] = {}
        for row in session.execute(  # only rows with no message yet need their text
            sa.select(ChatMessage.id, ChatMessage.role, ChatMessage.content)
            .where(ChatMessage.thread_id == thread_id, ChatMessage.message_id.is_(None))
            .order_by(ChatMessage.sequence)
        ):
            self.unlinked.setdefault((row.role, row.content), []).append(row.id)
        self.sequence = int(
            session.scalar(
                sa.select(sa.func.max(ChatMessage.sequence)).where(
                    ChatMessage.thread_id == thread_id
                )
            )
            or 0
        )

    def record(self, messages: Sequence[BaseMessage], *, at: datetime) -> int:
        """Record the messages not recorded yet, in order; return how many rows were added."""
        added = 0
        for message in messages:
            if not message.id or is_summary_message(message):
                continue
            message_id = str(message.id)[:128]
            if message_id in self.recorded:
                continue
            self.recorded.add(message_id)
            role, text = chat_role(message), message_text(message)
            waiting = self.unlinked.get((role, text))
            if waiting:
                row = self.session.get(ChatMessage, waiting.pop(0))
                if row is not None:
                    row.message_id = message_id
                continue
            self.sequence += 1
            self.session.add(
                ChatMessage(
                    thread_id=self.thread_id,
                    sequence=self.sequence,
                    role=role,
                    content=text,
                    created_at=at,
                    message_id=message_id,
                )
            )
            added += 1
        return added
