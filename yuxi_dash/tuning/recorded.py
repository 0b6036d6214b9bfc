"""An agent's recorded threads, read for a replay: `thread_rows` and `load_recorded`.

`thread_rows` lists the agent's threads, ours and attached, with what a stratified sample
needs (the pressure at the last model call, the model calls recorded), in one query.
`load_recorded` reads each thread's newest checkpoint through its source (an attached
thread from the platform's checkpointer, read only) and puts each offloaded result's
original back from the workdir (the platform's volume for its threads): verified against
its header's SHA-256, only under ``outputs/large_tool_results``, at most
`MAX_ORIGINAL_CHARS`; otherwise it stays as its header, counted in ``unrestored``. The
system prompt and tool schemas are the first model call's ``next_llm_input_tokens`` less
the engine's count of its messages.

Only reads: nothing here writes to a thread, a table or a file, but for what a refused
platform checkpoint writes as it is read (`sources`: a quarantine row and its audit row).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from langchain_core.messages import BaseMessage, ToolMessage
from sqlalchemy.orm import Session

from yuxi_dash.agents import AGENT_DEFAULTS
from yuxi_dash.compression import count_tokens, parse_saved_result, truncate_tool_args
from yuxi_dash.errors import InvalidInput, WorkdirUnavailable, YuxiDashError
from yuxi_dash.files.workdir import TOOL_RESULTS_DIR, Workdir
from yuxi_dash.settings import Settings
from yuxi_dash.sources import thread_sources
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Agent, Conversation, UsageSnapshotRow
from yuxi_dash.store.origin import attached_platform, origin_label, origin_name
from yuxi_dash.tuning.replay import RecordedThread, model_call_indices

MODEL_CALL = "model_call"  # the usage snapshot source of a plain model call
MANUAL_COMPRESSION = "manual_compression"  # a snapshot that is no model call
_READ_FAILURES = (OSError, InvalidInput, WorkdirUnavailable)  # PathRefused is an InvalidInput
LOAD_BATCH = 200  # threads whose sources and first snapshots are read in one go
MAX_ORIGINAL_CHARS = 4_000_000  # an original larger than this stays as its header


@dataclass(frozen=True)
class ThreadRow:
    """One of the agent's threads as the listing knows it, before its state is read."""

    thread_id: str
    origin: str  # `store.origin.origin_name`: "own" or "attached"
    pressure_ratio: float  # at its last model call
    model_calls: int  # usage snapshots recorded
    label: str = "ours"  # what pages call its source: "ours" or "attached: <platform>"


@dataclass(frozen=True)
class Unreadable:
    """A thread whose state could not be read (an attached platform out of reach)."""

    thread_id: str
    code: str


def thread_rows(session: Session, agent_slug: str) -> list[ThreadRow]:
    """The agent's threads that are not deleted, oldest first (model calls: each thread's
    usage snapshots but its manual compressions', counted per thread)."""
    calls = (
        sa.select(sa.func.count())
        .where(
            UsageSnapshotRow.thread_id == Conversation.thread_id,
            UsageSnapshotRow.source != MANUAL_COMPRESSION,
        )
        .correlate(Conversation)
        .scalar_subquery()
    )
    query = (
        sa.select(
            Conversation.thread_id,
            Conversation.origin,
            Conversation.summary_pressure_ratio,
            calls,
        )
        .where(Conversation.agent_slug == agent_slug, Conversation.deleted_at.is_(None))
        .order_by(Conversation.id)
    )
    platform = attached_platform(session)
    return [
        ThreadRow(
            thread_id,
            origin_name(origin),
            float(ratio or 0.0),
            int(count),
            origin_label(origin, platform),
        )
        for thread_id, origin, ratio, count in session.execute(query)
    ]


def agent_settings(session: Session) -> list[dict[str, object]]:
    """Every agent with threads or a row, by slug, with its settings in force (`Agent`'s
    fields; an attached platform's agent with no row here has the defaults)."""
    rows = {agent.slug: agent for agent in session.scalars(sa.select(Agent))}
    slugs = set(rows) | set(session.scalars(sa.select(Conversation.agent_slug).distinct()))
    return [
        {"slug": slug, **{name: int(getattr(rows[slug], name)) for name in AGENT_DEFAULTS}}
        if slug in rows
        else {"slug": slug, **AGENT_DEFAULTS}
        for slug in sorted(slugs)
    ]


def first_snapshots(session: Session, thread_ids: Sequence[str]) -> dict[str, tuple[str, int]]:
    """Each thread's first usage snapshot: (source, next_llm_input_tokens)."""
    if not thread_ids:
        return {}
    first = (
        sa.select(sa.func.min(UsageSnapshotRow.id))
        .where(UsageSnapshotRow.thread_id.in_(list(thread_ids)))
        .group_by(UsageSnapshotRow.thread_id)
    )
    rows = session.execute(
        sa.select(
            UsageSnapshotRow.thread_id,
            UsageSnapshotRow.source,
            UsageSnapshotRow.next_llm_input_tokens,
        ).where(UsageSnapshotRow.id.in_(first))
    )
    return {thread_id: (str(source), int(tokens)) for thread_id, source, tokens in rows}


def overhead_tokens(messages: Sequence[BaseMessage], first: tuple[str, int] | None) -> int:
    """The system prompt and tool schemas of the first model call, in tokens (0 when unknown).

    That call was sent the messages before the first AI message (long file-write arguments
    shortened) and answered with it (in full); its snapshot counted both with the prompt
    and the schemas.
    """
    calls = model_call_indices(messages)
    if first is None or first[0] != MODEL_CALL or not calls:
        return 0
    exchanged = [*truncate_tool_args(messages[: calls[0]]), messages[calls[0]]]
    return max(0, first[1] - count_tokens(exchanged))


def _readable(path: str, approx_tokens: int | None) -> bool:
    """Whether a header's file may be read: under the tool results directory, not too big."""
    if not path.startswith(TOOL_RESULTS_DIR + "/"):
        return False
    return approx_tokens is None or approx_tokens * 4 <= MAX_ORIGINAL_CHARS


def restore_originals(
    messages: Sequence[BaseMessage], workdir: Workdir | None
) -> tuple[tuple[BaseMessage, ...], int]:
    """The messages with each offloaded result's original text back; (messages, not restored)."""
    restored = list(messages)
    missing = 0
    for index, message in enumerate(restored):
        if not isinstance(message, ToolMessage):
            continue
        saved = parse_saved_result(message.content)
        if saved is None:
            continue
        text: str | None = None
        if workdir is not None and saved.sha256 and _readable(saved.path, saved.approx_tokens):
            try:
                read, status = workdir.read_verified(saved.path, saved.sha256)
                text = read if status == "ok" and len(read) <= MAX_ORIGINAL_CHARS else None
            except _READ_FAILURES:
                text = None
        if text is None:
            missing += 1
            continue
        restored[index] = message.model_copy(update={"content": text})
    return tuple(restored), missing


def load_recorded(
    rows: Sequence[ThreadRow], settings: Settings, workdir: Workdir | None = None
) -> Iterator[RecordedThread | Unreadable]:
    """Each row's thread, read and ready to replay, in the order given.

    Originals are read from ``workdir`` when given, else from where the thread's files
    resolve (`Settings.workdir_for`: the attached platform's volume for its threads).
    """
    workdirs: dict[str, Workdir] = {}
    for start in range(0, len(rows), LOAD_BATCH):
        batch = rows[start : start + LOAD_BATCH]
        ids = [row.thread_id for row in batch]
        sources = thread_sources(ids, settings)
        with session_scope(settings) as session:
            firsts = first_snapshots(session, ids)
        for row in batch:
            try:
                checkpoint = sources[row.thread_id].state_store().latest(row.thread_id)
            except YuxiDashError as exc:
                yield Unreadable(row.thread_id, exc.code)
                continue
            state = checkpoint.context() if checkpoint is not None else None
            recorded = list(state.messages) if state is not None else []
            files = workdir or workdirs.setdefault(
                row.origin, Workdir(settings.workdir_for(row.origin))
            )
            messages, missing = restore_originals(recorded, files)
            yield RecordedThread(
                thread_id=row.thread_id,
                origin=row.label,
                messages=messages,
                overhead_tokens=overhead_tokens(messages, firsts.get(row.thread_id)),
                unrestored=missing,
            )
