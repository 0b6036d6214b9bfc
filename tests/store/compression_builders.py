"""Builders of the compression-record tests (CLI, API, /metrics, alerts): a thread whose
assistant cites its evidence (for a real compress), and records written as the writers
write them, with a ledger built from real `LedgerItem`s."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from yuxi_dash.compression.evidence_ledger import Ledger, LedgerItem
from yuxi_dash.store.compressions import insert_records
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import ORIGIN_ATTACHED, ORIGIN_DASHBOARD, Conversation


def cited_thread(turns: int = 6) -> list[Any]:
    """A thread whose assistant cites the records a knowledge-base search returned."""
    messages: list[Any] = []
    for turn in range(turns):
        records = [
            {"id": f"chunk-t{turn}-{n:03d}", "source": f"manual-{turn}.pdf", "chunk_index": n,
             "content": "word " * 120}
            for n in range(4)
        ]  # fmt: skip
        call_id = f"call-{turn}"
        messages.append(HumanMessage(f"Question {turn}: what does the manual say?"))
        messages.append(
            AIMessage(
                "", tool_calls=[{"name": "query_kb", "args": {"q": f"q{turn}"}, "id": call_id}]
            )
        )
        messages.append(ToolMessage(json.dumps({"records": records}), tool_call_id=call_id))
        messages.append(
            AIMessage(f"Answer {turn}. Sources: [chunk-t{turn}-001], https://docs.example/{turn}")
        )
    return messages


def item(
    value: str,
    state: str,
    *,
    kind: str = "kb_record",
    cited: bool = False,
    file: str | None = None,
    line: int | None = None,
) -> LedgerItem:
    """One ledger item; a recoverable one without a file is in the history file, line 1."""
    if state == "recoverable" and file is None:
        file, line = "outputs/conversation_history/h.md", line or 1
    return LedgerItem(kind, value, state, cited, False, file, line, 0)  # type: ignore[arg-type]


def put_thread_row(thread_id: str, *, agent: str = "agent-a", attached: bool = False) -> None:
    """A thread row (no checkpoint): records need one to belong to."""
    with session_scope() as session:
        if session.scalar(sa.select(Conversation.id).where(Conversation.thread_id == thread_id)):
            return
        origin = ORIGIN_ATTACHED if attached else ORIGIN_DASHBOARD
        session.add(
            Conversation(thread_id=thread_id, user_id="u1", agent_slug=agent, origin=origin)
        )


def put_record(
    thread_id: str,
    at: datetime,
    items: list[LedgerItem],
    *,
    agent: str = "agent-a",
    trigger: str = "automatic",
    actor: str | None = None,
    origin: str = "own",
    summary: str = "SUMMARY: what happened.",
) -> None:
    """One compression record of ``thread_id`` (its row made if missing), as a writer adds it."""
    put_thread_row(thread_id, agent=agent, attached=origin == "attached")
    ledger = Ledger(tuple(items), 10, 9, "outputs/conversation_history/h.md")
    totals, cited = ledger.state_counts(), ledger.state_counts(cited_only=True)
    row = {
        "thread_id": thread_id,
        "event_key": uuid.uuid4().hex,
        "at": at,
        "trigger": trigger,
        "actor": actor,
        "origin": origin,
        "agent_slug": agent,
        "checkpoint_id": None,
        "before_tokens": 12_000,
        "after_tokens": 1_500,
        "compressed_messages": 9,
        "summary": summary,
        "history_file": "outputs/conversation_history/h.md",
        "history_sha256": "0" * 64,
        "ledger": ledger.to_dict(),
        "evidence_visible": totals["visible"],
        "evidence_recoverable": totals["recoverable"],
        "evidence_lost": totals["lost"],
        "cited_total": sum(cited.values()),
        "cited_visible": cited["visible"],
        "cited_lost": cited["lost"],
    }
    with session_scope() as session:
        assert insert_records(session, [row]) == 1
