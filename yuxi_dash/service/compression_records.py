"""The compression records our writers add: one per summarization event, with its ledger.

`compression_row` builds one `store.compressions.CompressionRecord` row from the state
before and after a compression: tokens (the engine's count of each model view unless the
writer measured them), the messages summarized, the summary text, the history file and its
SHA-256, and the evidence ledger (`compression.evidence_ledger`) read from the workdir the
thread's files resolve under (`Settings.workdir_for`). `new_event` says whether a
checkpoint carries a summarization event its parent did not (the projection records those:
our middleware's automatic compressions and the attached platform's). `event_key` names an
event the same way whoever sees it, so a scan seeing it again writes nothing.
A file that cannot be read makes its items lost, never an error: the record is still written.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from yuxi_dash.compression.engine import count_state_tokens
from yuxi_dash.compression.evidence_keep import named_evidence_index
from yuxi_dash.compression.evidence_ledger import Ledger, build_ledger
from yuxi_dash.compression.state_format import SUMMARIZATION_EVENT_KEY
from yuxi_dash.compression.thread_state import ThreadContextState, message_text
from yuxi_dash.files.workdir import Workdir
from yuxi_dash.store.compressions import TRIGGER_AUTOMATIC
from yuxi_dash.store.origin import origin_name

log = logging.getLogger(__name__)
HISTORY_PATH_MAX = 1024  # `compressions.history_file`


def new_event(previous: Mapping[str, Any] | None, values: Mapping[str, Any]) -> bool:
    """Whether ``values`` carries a summarization event ``previous`` did not."""
    event = values.get(SUMMARIZATION_EVENT_KEY)
    return event is not None and event != (previous or {}).get(SUMMARIZATION_EVENT_KEY)


def event_key(state: ThreadContextState) -> str | None:
    """A SHA-256 naming the state's summary event: its cutoff, history file and summary text."""
    summary = state.summary
    if summary is None:
        return None
    text = summary.summary_message.content
    named = json.dumps(
        [summary.cutoff_index, summary.file_path, text if isinstance(text, str) else repr(text)],
        ensure_ascii=True,
    )
    return hashlib.sha256(named.encode("utf-8")).hexdigest()


def _history_sha256(workdir: Workdir | None, path: str | None) -> str | None:
    if workdir is None or not path:
        return None
    try:
        return hashlib.sha256(workdir.read_text(path).encode("utf-8")).hexdigest()
    except Exception:  # noqa: BLE001 - gone or refused: the record says so with None
        return None


def summary_text(state: ThreadContextState) -> str:
    """The summary as text; a NUL (which no text column takes) written as ``\\x00``."""
    text = message_text(state.summary.summary_message) if state.summary is not None else ""
    return text.replace("\x00", "\\x00")


def _history_path(path: str | None) -> str | None:
    """The history file's path as a record keeps it: None when empty or too long to be ours."""
    return path if path and len(path) <= HISTORY_PATH_MAX and "\x00" not in path else None


def compression_row(
    *,
    thread_id: str,
    agent_slug: str,
    origin: str,
    before: ThreadContextState,
    after: ThreadContextState,
    at: datetime,
    checkpoint_id: str | None,
    workdir: Workdir | None,
    trigger: str = TRIGGER_AUTOMATIC,
    actor: str | None = None,
    tokens: tuple[int, int] | None = None,
    ledger: Ledger | None = None,
) -> dict[str, Any] | None:
    """The record of the compression that turned ``before`` into ``after`` (None: no event).

    ``tokens``: (before, after) as the writer measured them; ``ledger``: the one the
    engine built (`CompressionOutcome.ledger`), else it is built here.
    """
    key = event_key(after)
    if key is None or after.summary is None:
        return None
    if ledger is None:  # read from a checkpoint: the index its summary names counts too
        index = named_evidence_index(summary_text(after))
        ledger = build_ledger(before, after, workdir, extra_files=[index] if index else [])
    start = before.visible_start  # this compression's span: what the summary before it kept
    ledger = replace(ledger, items=tuple(i for i in ledger.items if i.message_index >= start))
    counts = ledger.state_counts()
    cited = ledger.state_counts(cited_only=True)
    before_tokens, after_tokens = tokens or (count_state_tokens(before), count_state_tokens(after))
    previous_cutoff = before.summary.cutoff_index if before.summary is not None else 0
    return {
        "thread_id": thread_id,
        "event_key": key,
        "at": at,
        "trigger": trigger,
        "actor": actor,
        "origin": origin_name(origin),
        "agent_slug": agent_slug,
        "checkpoint_id": checkpoint_id,
        "before_tokens": int(before_tokens),
        "after_tokens": int(after_tokens),
        "compressed_messages": max(0, after.summary.cutoff_index - previous_cutoff),
        "summary": summary_text(after),
        "history_file": _history_path(after.summary.file_path),
        "history_sha256": _history_sha256(workdir, _history_path(after.summary.file_path)),
        "ledger": ledger.to_dict(),
        "evidence_visible": counts.get("visible", 0),
        "evidence_recoverable": counts.get("recoverable", 0),
        "evidence_lost": counts.get("lost", 0),
        "cited_total": sum(cited.values()),
        "cited_visible": cited.get("visible", 0),
        "cited_lost": cited.get("lost", 0),
    }
