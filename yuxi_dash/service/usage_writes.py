"""The usage, index and chat writes that projection, compress, import and intake share.

A usage measurement (`yuxi_dash.usage.UsageSnapshot`) becomes a
`usage_snapshots` row and the thread's current-usage columns in the same
transaction (`apply_usage`); an import sets the current usage alone
(`set_current_usage`). `index_saved_files` adds newly offloaded tool results to
the `tool_results` index, `append_chat` extends the chat record, and
`merged_token_usage` is the checkpoint's `token_usage` after a compress: the
per-call context figures a compression makes stale are dropped, the rest kept.
`reported_call` is a call's model name and output tokens as its ``token_usage``
states them (None when not stated; a NUL in the name is `InvalidInput`, output
tokens not whole or past 32 bits `ImpossibleUsage`).
All of them run inside a caller's `thread_lock`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash import validation
from yuxi_dash.compression.state_format import MODEL_NAME_MAX
from yuxi_dash.errors import ImpossibleUsage, InvalidInput
from yuxi_dash.files.workdir import SavedFile
from yuxi_dash.store.models import (
    SNAPSHOT_SOURCES,
    ChatMessage,
    Conversation,
    ToolResult,
    UsageSnapshotRow,
)
from yuxi_dash.usage import UsageSnapshot

# per-call context fields of token_usage that a compression makes stale
PER_CALL_USAGE_FIELDS = frozenset(
    {
        "llm_input_tokens",
        "context_usage_ratio",
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "context_breakdown",
        "context_window_used",
        "last_call",
        "model",
    }
)


def apply_usage(
    session: Session,
    conv: Conversation,
    figures: UsageSnapshot,
    *,
    source: str,
    measured_at: datetime,
) -> None:
    """Insert a snapshot and move the thread's current usage to it (same transaction)."""
    session.add(
        UsageSnapshotRow(**snapshot_row(conv, figures, source=source, measured_at=measured_at))
    )
    move_current_usage(conv, figures, source=source, measured_at=measured_at)


COMPACTION_SOURCES = ("auto_compaction", "manual_compression")


def snapshot_row(
    conv: Conversation, figures: UsageSnapshot, *, source: str, measured_at: datetime
) -> dict[str, Any]:
    """The values of one `usage_snapshots` row; an unknown source is refused."""
    if source not in SNAPSHOT_SOURCES:
        raise InvalidInput(f"unknown snapshot source {source!r}")
    return {
        "thread_id": conv.thread_id,
        "measured_at": measured_at,
        "llm_input_tokens": figures.llm_input_tokens,
        "next_llm_input_tokens": figures.next_llm_input_tokens,
        "context_window": figures.context_window,
        "context_usage_ratio": figures.context_usage_ratio,
        "summary_trigger_tokens": figures.summary_trigger_tokens,
        "summary_pressure_ratio": figures.summary_pressure_ratio,
        "summary_active": figures.summary_active,
        "source": source,
        "model": None,
        "output_tokens": None,
    }


def reported_call(usage: Any) -> dict[str, Any]:
    """``model`` and ``output_tokens`` of a `usage_snapshots` row from a ``token_usage`` value."""
    if not isinstance(usage, Mapping):
        return {"model": None, "output_tokens": None}
    name, out = usage.get("model"), usage.get("output_tokens")
    model = validation.text(name, "a model name") if isinstance(name, str) else None
    if out is not None and (
        not isinstance(out, int) or isinstance(out, bool) or not 0 <= out <= validation.INT32_MAX
    ):
        raise ImpossibleUsage("token_usage output_tokens must be a whole number in 32 bits")
    return {"model": model[:MODEL_NAME_MAX] if model else None, "output_tokens": out}


def move_current_usage(
    conv: Conversation, figures: UsageSnapshot, *, source: str, measured_at: datetime
) -> None:
    """The thread's current usage, last compression and last activity after one snapshot."""
    set_current_usage(conv, figures, measured_at=measured_at)
    if source in COMPACTION_SOURCES:
        conv.last_compression_at = measured_at
    conv.last_activity_at = max(conv.last_activity_at or measured_at, measured_at)


def set_current_usage(conv: Conversation, figures: UsageSnapshot, *, measured_at: datetime) -> None:
    """The thread's current-usage columns (what the 85% list scans) from one measurement."""
    conv.llm_input_tokens = figures.llm_input_tokens
    conv.next_llm_input_tokens = figures.next_llm_input_tokens
    conv.context_window = figures.context_window
    conv.context_usage_ratio = figures.context_usage_ratio
    conv.summary_trigger_tokens = figures.summary_trigger_tokens
    conv.summary_pressure_ratio = figures.summary_pressure_ratio
    conv.summary_active = figures.summary_active
    conv.usage_measured_at = measured_at


def index_saved_files(
    session: Session,
    thread_id: str,
    saved_files: Sequence[tuple[str | None, str, SavedFile]],
) -> int:
    """Add the newly offloaded files to `tool_results` (one row per thread and path)."""
    added = 0
    for tool_call_id, tool_name, saved in saved_files:
        exists = session.scalar(
            sa.select(ToolResult.id).where(
                ToolResult.thread_id == thread_id, ToolResult.path == saved.path
            )
        )
        if exists is not None:
            continue
        session.add(
            ToolResult(
                thread_id=thread_id,
                tool_name=tool_name,
                tool_call_id=tool_call_id,
                sha256=saved.sha256,
                path=saved.path,
                chars=saved.chars,
                approx_tokens=saved.approx_tokens,
            )
        )
        session.flush()
        added += 1
    return added


def append_chat(
    session: Session,
    thread_id: str,
    messages: Sequence[tuple[str, str]],
    *,
    at: datetime,
) -> int:
    """Append (role, content) lines to the thread's chat record; returns how many."""
    if not messages:
        return 0
    last = session.scalar(
        sa.select(sa.func.max(ChatMessage.sequence)).where(ChatMessage.thread_id == thread_id)
    )
    sequence = int(last or 0)
    for role, content in messages:
        sequence += 1
        session.add(
            ChatMessage(
                thread_id=thread_id, sequence=sequence, role=role, content=content, created_at=at
            )
        )
    return len(messages)


def merged_token_usage(
    previous: Mapping[str, Any], *, compression: dict[str, Any], figures: UsageSnapshot
) -> dict[str, Any]:
    """A checkpoint's `token_usage` after a compress: stale per-call figures dropped."""
    merged = {k: v for k, v in previous.items() if k not in PER_CALL_USAGE_FIELDS}
    merged.update(
        {
            "compression": compression,
            "summary_active": True,
            "summary_trigger_tokens": figures.summary_trigger_tokens,
            "next_llm_input_tokens": figures.next_llm_input_tokens,
            "summary_pressure_ratio": figures.summary_pressure_ratio,
            "context_window": figures.context_window,
        }
    )
    return merged
