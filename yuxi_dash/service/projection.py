"""Projecting checkpoints into the dashboard's tables: usage timeline, current usage, index, chat.

The checkpoint is the truth; our rows are a projection that can be made again and write
nothing twice. `project_thread` reads the checkpoints newer than
`conversations.checkpoint_id` and, in the caller's transaction:
- adds a `usage_snapshots` row (with the call's model and output tokens, if stated) per
  checkpoint whose `token_usage` changed (no usage: measured with the agent's settings);
- moves the current usage to the newest snapshot and records the newest checkpoint id;
- indexes the saved tool results (each header held to its writer's namespace,
  `service.saved_results`) and appends new messages to the chat record, as first written;
- records each new summarization event once (`service.compression_records`).

Usage not finite, whole, non-negative or within 32 bits is `ImpossibleUsage`; text with a
NUL is `InvalidInput` (the scan quarantines it). The batch path (`load_projected`,
`project_checkpoints`, `ProjectionWrites.flush`) runs the same steps split: the same rows.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from langchain_core.messages import BaseMessage
from sqlalchemy.orm import Session

from yuxi_dash import validation
from yuxi_dash.agents import AGENT_DEFAULTS
from yuxi_dash.compression.engine import count_state_tokens
from yuxi_dash.compression.state_format import TOKEN_USAGE_KEY
from yuxi_dash.compression.thread_state import (
    ThreadContextState,
    chat_role,
    chat_text,
    is_summary_message,
)
from yuxi_dash.errors import ImpossibleUsage
from yuxi_dash.files.workdir import Workdir
from yuxi_dash.service.bulk_rows import given_rows, insert_rows
from yuxi_dash.service.compression_records import compression_row, new_event
from yuxi_dash.service.projected_rows import THREAD_CHUNK, ProjectedRows, load_projected
from yuxi_dash.service.saved_results import audit_refusals, index_saved_results, owned_results
from yuxi_dash.service.usage_writes import (
    move_current_usage,
    reported_call,
    set_current_usage,
    snapshot_row,
)
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.checkpointer import CheckpointStore, ThreadCheckpoint
from yuxi_dash.store.compressions import insert_records
from yuxi_dash.store.db import is_sqlite
from yuxi_dash.store.models import (
    SNAPSHOT_SOURCES,
    Agent,
    Base,
    ChatMessage,
    Conversation,
    ToolResult,
    UsageSnapshotRow,
    utcnow,
)
from yuxi_dash.usage import UsageSnapshot, summary_trigger_tokens
from yuxi_dash.validation import CONTEXT_WINDOW_RANGE, INT32_MAX

_MEASURED = ("llm_input_tokens", "next_llm_input_tokens", "context_window")
log = logging.getLogger(__name__)

# what makes two snapshot rows the same measurement (a checkpoint's, projected twice)
_SNAPSHOT_KEY = ("measured_at", "source", "llm_input_tokens", "next_llm_input_tokens",
                 "context_window")  # fmt: skip


def checkpoints_since(
    store: CheckpointStore, thread_id: str, since: str | None
) -> tuple[ThreadCheckpoint | None, list[ThreadCheckpoint]]:
    """(the checkpoint ``since``, the newer ones oldest first); (None, all) when not found."""
    return split_since(store.history(thread_id), since)


def split_since(
    newest_first: Iterable[ThreadCheckpoint], since: str | None
) -> tuple[ThreadCheckpoint | None, list[ThreadCheckpoint]]:
    """`checkpoints_since` over checkpoints already read (newest first); stops at ``since``."""
    newer: list[ThreadCheckpoint] = []
    for checkpoint in newest_first:
        if since is not None and checkpoint.checkpoint_id == since:
            newer.reverse()
            return checkpoint, newer
        newer.append(checkpoint)
    newer.reverse()
    return None, newer


def usage_from_values(values: Mapping[str, Any]) -> UsageSnapshot | None:
    """The usage snapshot a checkpoint's ``token_usage`` states, None when it states none.

    ImpossibleUsage when it states figures no model call has (not finite, not
    whole, negative, past a 32-bit column, a window outside 1..10,000,000):
    such usage is refused, never drawn.
    """
    usage = values.get(TOKEN_USAGE_KEY)
    if not isinstance(usage, Mapping) or not all(
        isinstance(usage.get(key), int | float) and not isinstance(usage.get(key), bool)
        for key in _MEASURED
    ):
        return None
    window_low, window_high = CONTEXT_WINDOW_RANGE
    return UsageSnapshot(
        llm_input_tokens=_possible(usage["llm_input_tokens"], "llm_input_tokens"),
        next_llm_input_tokens=_possible(usage["next_llm_input_tokens"], "next_llm_input_tokens"),
        context_window=_possible(
            usage["context_window"], "context_window", low=window_low, high=window_high
        ),
        summary_trigger_tokens=_possible(
            usage.get("summary_trigger_tokens") or 0, "summary_trigger_tokens"
        ),
        summary_active=bool(usage.get("summary_active")),
    )


def _possible(value: Any, name: str, *, low: int = 0, high: int = INT32_MAX) -> int:
    """A token figure as an int, or ImpossibleUsage (the message names the field, not the value)."""
    whole = (
        isinstance(value, int)
        or (isinstance(value, float) and math.isfinite(value) and value.is_integer())
    ) and not isinstance(value, bool)
    if not whole or not low <= value <= high:
        raise ImpossibleUsage(
            f"token_usage {name} must be a whole number between {low:,} and {high:,}"
        )
    return int(value)


def usage_measured_at(values: Mapping[str, Any], checkpoint: ThreadCheckpoint) -> datetime:
    """When a checkpoint's usage was measured: its ``token_usage`` says, else the checkpoint's time."""
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
    if new_event(previous, values):
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


def new_message_ids(
    baseline: ThreadCheckpoint | None, newer: Sequence[ThreadCheckpoint]
) -> set[str]:
    """The ids of the messages projecting ``newer`` after ``baseline`` may record."""
    found: set[str] = set()
    previous = baseline.values if baseline is not None else None
    for checkpoint in newer:
        found.update(str(m.id)[:128] for m in _added_messages(previous, checkpoint.values) if m.id)
        previous = checkpoint.values
    return found


@dataclass
class ProjectionWrites:
    """The rows a projection adds, for one thread or a batch, written by `flush`."""

    snapshots: list[dict[str, Any]] = field(default_factory=list)
    chat: list[dict[str, Any]] = field(default_factory=list)
    links: list[tuple[int, str]] = field(default_factory=list)  # (chat row id, message id)
    tools: list[dict[str, Any]] = field(default_factory=list)
    known: set[str] = field(default_factory=set)  # threads that may hold snapshots already
    owners: dict[str, Conversation] = field(default_factory=dict)  # thread id -> its row
    refused: list[tuple[str, str, str]] = field(default_factory=list)  # `Refusal`s: not indexed
    compressions: list[dict[str, Any]] = field(default_factory=list)  # `store.compressions` rows
    settings: Settings | None = None  # where the threads' files resolve (the records' ledgers)

    def flush(self, session: Session) -> int:
        """Insert the rows (one statement per table); return the snapshots written."""
        snapshots = self._new_snapshots(session)
        _insert(session, UsageSnapshotRow, snapshots)
        _insert(session, ChatMessage, self.chat)
        for row_id, message_id in self.links:  # rows intake wrote before their message had an id
            row = session.get(ChatMessage, row_id)
            if row is not None:
                row.message_id = message_id
        owned = owned_results(session, self.tools, self.owners, self.refused)
        _insert(session, ToolResult, owned)
        audit_refusals(session, self.refused)
        insert_records(session, self.compressions)
        return len(snapshots)

    def _new_snapshots(self, session: Session) -> list[dict[str, Any]]:
        """The snapshots the table does not hold yet (one read, of the known threads' rows).

        On PostgreSQL the rows read are those at the (thread, time) pairs of the
        new snapshots, one pair of arrays joined on the (thread_id, measured_at)
        index; on SQLite each known thread's rows from the earliest new time on.
        """
        known = [row for row in self.snapshots if row["thread_id"] in self.known]
        if not known:
            return self.snapshots
        columns = [UsageSnapshotRow.thread_id] + [
            getattr(UsageSnapshotRow, name) for name in _SNAPSHOT_KEY
        ]
        if is_sqlite(session):
            threads = sorted({row["thread_id"] for row in known})
            earliest = min(_utc(row["measured_at"]) for row in known)
            queries = [
                sa.select(*columns).where(
                    UsageSnapshotRow.thread_id.in_(threads[start : start + THREAD_CHUNK]),
                    UsageSnapshotRow.measured_at >= earliest,
                )
                for start in range(0, len(threads), THREAD_CHUNK)
            ]
        else:
            given = given_rows(
                {
                    "thread_id": (sa.String(), [row["thread_id"] for row in known]),
                    "measured_at": (
                        sa.DateTime(timezone=True),
                        [_utc(row["measured_at"]) for row in known],
                    ),
                }
            )
            queries = [
                sa.select(*columns).join(
                    given,
                    sa.and_(
                        UsageSnapshotRow.thread_id == given.c.thread_id,
                        UsageSnapshotRow.measured_at == given.c.measured_at,
                    ),
                )
            ]
        held = {_snapshot_key(row._asdict()) for query in queries for row in session.execute(query)}
        return [row for row in self.snapshots if _snapshot_key(row) not in held]


def _insert(session: Session, model: type[Base], rows: list[dict[str, Any]]) -> None:
    """One statement for all the rows (`service.bulk_rows`), not one per row."""
    insert_rows(session, model.__table__, rows)  # type: ignore[arg-type]


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _snapshot_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return (row["thread_id"], _utc(row["measured_at"])) + tuple(
        row[name] for name in _SNAPSHOT_KEY[1:]
    )


def _snapshot(
    writes: ProjectionWrites,
    conv: Conversation,
    figures: UsageSnapshot,
    *,
    source: str,
    measured_at: datetime,
    usage: Any = None,
) -> None:
    """A `usage_snapshots` row (model and output tokens as ``usage`` reports them), and the
    thread's current usage moved to it (as `apply_usage`)."""
    row = snapshot_row(conv, figures, source=source, measured_at=measured_at)
    writes.snapshots.append({**row, **reported_call(usage)})
    move_current_usage(conv, figures, source=source, measured_at=measured_at)


def project_checkpoints(
    conv: Conversation,
    baseline: ThreadCheckpoint | None,
    newer: Sequence[ThreadCheckpoint],
    rows: ProjectedRows,
    writes: ProjectionWrites,
    agent_of: Callable[[str], Agent | None],
) -> ThreadCheckpoint | None:
    """Project ``newer`` (oldest first, after ``baseline``) into ``conv`` and ``writes``.

    ``rows`` is what our tables hold of the thread (`load_projected`); it is
    kept up to date, so the next batch can go on from it. Returns the newest
    checkpoint (``baseline`` when there is nothing newer).
    """
    if not newer:
        return baseline
    previous = baseline.values if baseline is not None else None
    before = baseline
    snapshots = 0
    chat = ChatRecorder(conv.thread_id, rows, writes)
    for checkpoint in newer:
        if new_event(previous, checkpoint.values):
            _record_event(writes, conv, before, checkpoint)
        usage = usage_from_values(checkpoint.values)
        changed = previous is None or previous.get(TOKEN_USAGE_KEY) != checkpoint.values.get(
            TOKEN_USAGE_KEY
        )
        if usage is not None and changed and _imported(checkpoint.values):
            set_current_usage(
                conv, usage, measured_at=usage_measured_at(checkpoint.values, checkpoint)
            )
            snapshots += 1  # an import measures the thread, it is not a model call
        elif usage is not None and changed:
            _snapshot(
                writes,
                conv,
                usage,
                source=_source(previous, checkpoint.values),
                measured_at=usage_measured_at(checkpoint.values, checkpoint),
                usage=checkpoint.values.get(TOKEN_USAGE_KEY),
            )
            snapshots += 1
        # the messages this step added, as first written (a tool result before its offload)
        chat.record(
            _added_messages(previous, checkpoint.values), at=checkpoint.created_at or utcnow()
        )
        previous, before = checkpoint.values, checkpoint
    latest = newer[-1]
    if snapshots == 0 and usage_from_values(latest.values) is None:
        _snapshot(
            writes,
            conv,
            measured_usage(latest, agent_of(conv.agent_slug)),
            source="model_call",
            measured_at=latest.created_at or utcnow(),
        )
    writes.owners[conv.thread_id] = conv
    index_saved_results(
        writes.tools, writes.refused, conv.thread_id, latest.values.get("messages") or [], rows
    )
    conv.checkpoint_id = latest.checkpoint_id
    return latest


def _record_event(
    writes: ProjectionWrites,
    conv: Conversation,
    before: ThreadCheckpoint | None,
    after: ThreadCheckpoint,
) -> None:
    """The record of a summarization event the checkpoints show (`service.compression_records`).

    The state it summarized is every message up to the event's ``created_at_index`` under
    the summary before it (a read that folds steps may not hold that exact checkpoint). A
    record that cannot be built is left out, never the projection: one log line, its type.
    """
    try:
        state = after.context()
        previous = before.context() if before is not None else None
        made_at = state.summary.created_at_index if state.summary is not None else None
        summarized = ThreadContextState(
            conv.thread_id,
            state.messages[:made_at] if made_at is not None else list(state.messages),
            previous.summary if previous is not None else None,
        )
        if made_at is None and previous is not None:
            summarized = previous
        settings = writes.settings or get_settings()
        row = compression_row(
            thread_id=conv.thread_id,
            agent_slug=conv.agent_slug,
            origin=conv.origin,
            before=summarized,
            after=state,
            at=after.created_at or utcnow(),
            checkpoint_id=after.checkpoint_id,
            workdir=Workdir(settings.workdir_for(conv.origin)),
        )
    except Exception as exc:  # noqa: BLE001 - the projection stands without its record
        log.warning("compression record left out for a thread: %s", type(exc).__name__)
        return
    if row is not None:
        writes.compressions.append(row)


def project_thread(
    session: Session,
    conv: Conversation,
    store: CheckpointStore,
    settings: Settings | None = None,
    *,
    naming: Callable[[Conversation, ThreadCheckpoint], None] | None = None,
) -> ThreadCheckpoint | None:
    """Bring the conversation's projection up to its newest checkpoint; return that checkpoint
    (``naming``: the row's user and agent set from it first)."""
    baseline, newer = checkpoints_since(store, conv.thread_id, conv.checkpoint_id)
    if not newer:
        return baseline
    if naming is not None:
        naming(conv, newer[-1])  # what the checkpoints record is the newest agent's
    rows = load_projected(session, [conv.thread_id])[conv.thread_id]
    writes = ProjectionWrites(known={conv.thread_id}, settings=settings)
    latest = project_checkpoints(
        conv,
        baseline,
        newer,
        rows,
        writes,
        lambda slug: session.scalar(sa.select(Agent).where(Agent.slug == slug)),
    )
    session.flush()  # the thread's row first: the rows written next refer to it
    writes.flush(session)
    return latest


def catch_up(
    session: Session, conv: Conversation, store: CheckpointStore, settings: Settings | None = None
) -> dict[str, Any] | None:
    """`project_thread`, and what it caught up on ({from, to, source}; None when nothing). A row
    behind means a projection never committed or a write outside the lock: the caller audits."""
    before = conv.checkpoint_id
    latest = project_thread(session, conv, store, settings)
    if latest is None or latest.checkpoint_id == before:
        return None
    usage = latest.values.get(TOKEN_USAGE_KEY)
    source = usage.get("source") if isinstance(usage, Mapping) else None
    return {"from": before, "to": latest.checkpoint_id, "source": source}


def _added_messages(
    previous: Mapping[str, Any] | None, values: Mapping[str, Any]
) -> list[BaseMessage]:
    """The messages of ``values`` whose ids ``previous`` does not have (all without a baseline)."""
    known = {m.id for m in (previous or {}).get("messages") or [] if isinstance(m, BaseMessage)}
    return [
        m for m in values.get("messages") or [] if isinstance(m, BaseMessage) and m.id not in known
    ]


class ChatRecorder:
    """Appends state messages to one thread's chat record (into a `ProjectionWrites`).

    A message is recorded once, by id. A row written before its message had an
    id (intake records the user's words as they arrive) is linked to the first
    message with the same role and text instead of being written a second time.
    """

    def __init__(self, thread_id: str, rows: ProjectedRows, writes: ProjectionWrites) -> None:
        self.thread_id = thread_id
        self.rows = rows
        self.writes = writes

    def record(self, messages: Sequence[BaseMessage], *, at: datetime) -> int:
        """Record the messages not recorded yet, in order; return how many rows were added."""
        added = 0
        rows = self.rows
        for message in messages:
            if not message.id or is_summary_message(message):
                continue
            message_id = validation.text(str(message.id), "a message id")[:128]
            if message_id in rows.recorded:
                continue
            rows.recorded.add(message_id)
            role = chat_role(message)
            text = validation.text(chat_text(message), "a message's text")  # no NUL, no surrogate
            waiting = rows.unlinked.get((role, text))
            if waiting:
                self.writes.links.append((waiting.pop(0), message_id))
                continue
            rows.sequence += 1
            self.writes.chat.append(
                {
                    "thread_id": self.thread_id,
                    "sequence": rows.sequence,
                    "role": role,
                    "content": text,
                    "created_at": at,
                    "message_id": message_id,
                }
            )
            added += 1
        return added
