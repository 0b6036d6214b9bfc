"""Compression records (`service.compression_records`, `store.compressions`): one per
compression we see, with its ledger; none for a failed or refused compress; the attached
platform's automatic summaries recorded once however often we scan."""

from __future__ import annotations

import json
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg import Connection
from psycopg.rows import dict_row

from tests.compression.agents import scripted_model
from tests.compression.builders import kb_payload
from tests.compression.deep_agent import TURNS, claude_script, play, summarizing_agent
from tests.fixtures.platform import Platform
from tests.service.builders import OPERATOR, VIEWER, BrokenSummarizer, seed_thread
from yuxi_dash import sources
from yuxi_dash.cli import main
from yuxi_dash.compression.state_format import SUMMARIZATION_EVENT_KEY
from yuxi_dash.errors import Forbidden, SummarizerFailed
from yuxi_dash.store.compressions import CompressionRecord, list_compressions
from yuxi_dash.store.db import session_scope


def _records(thread_id: str) -> list[CompressionRecord]:
    with session_scope() as session:
        rows = list(
            session.scalars(
                sa.select(CompressionRecord)
                .where(CompressionRecord.thread_id == thread_id)
                .order_by(CompressionRecord.id)
            )
        )
        session.expunge_all()
    return rows


def _cited_thread() -> list[Any]:
    """A thread whose assistant cites the records a knowledge-base search returned."""
    messages: list[Any] = []
    for turn in range(6):
        payload = json.loads(kb_payload(4, kb_id=f"kb-{turn}"))
        for n, record in enumerate(payload["results"]):
            record["id"] = f"chunk-t{turn}-{n:03d}"
        call_id = f"call-{turn}"
        messages.append(HumanMessage(f"Question {turn}: what does the manual say?"))
        messages.append(
            AIMessage(
                "",
                tool_calls=[{"name": "query_kb", "args": {"q": f"q{turn}"}, "id": call_id}],
            )
        )
        messages.append(ToolMessage(json.dumps(payload), tool_call_id=call_id, name="query_kb"))
        messages.append(
            AIMessage(f"Answer {turn}. Sources: [chunk-t{turn}-001], https://docs.example/{turn}")
        )
    return messages


def test_a_manual_compress_writes_one_record_with_its_ledger(db_url: str) -> None:
    seed_thread(messages=_cited_thread(), keep_messages=4)
    result = sources.compress_thread_context("t1", actor=OPERATOR)
    assert result.status == "completed"
    [record] = _records("t1")
    assert (record.trigger, record.actor, record.origin) == ("manual", OPERATOR.id, "own")
    assert (record.before_tokens, record.after_tokens) == (
        result.before_tokens,
        result.after_tokens,
    )
    assert record.compressed_messages == result.compressed_messages > 0
    assert record.checkpoint_id == result.checkpoint_id
    assert record.summary and record.history_file == result.file_path
    assert record.history_sha256 is not None and len(record.history_sha256) == 64
    items = record.ledger["items"]
    assert items and all(i["state"] in ("visible", "recoverable", "lost") for i in items)
    totals = record.ledger["totals"]
    assert sum(totals.values()) == len(items)  # every item in exactly one state
    assert (record.evidence_visible, record.evidence_recoverable, record.evidence_lost) == (
        totals["visible"],
        totals["recoverable"],
        totals["lost"],
    )
    cited = [i for i in items if i["cited"]]
    assert {i["value"] for i in cited} >= {"chunk-t0-001", "https://docs.example/0"}
    assert record.cited_total == len(cited)
    assert all(i["state"] == "visible" for i in cited)  # the summary keeps what was cited
    assert record.cited_visible == record.cited_total and record.cited_lost == 0
    for item in items:
        if item["state"] == "recoverable":
            assert item["file"] and item["line"] >= 1
    with session_scope() as session:  # the read the CLI and the API share
        [view] = list_compressions(session, "t1")
    assert view.to_dict()["ledger"]["totals"] == totals


def test_a_failed_or_refused_compress_writes_no_record(db_url: str) -> None:
    seed_thread(messages=_cited_thread(), keep_messages=4)
    with pytest.raises(SummarizerFailed):
        sources.compress_thread_context("t1", actor=OPERATOR, summarizer=BrokenSummarizer())
    with pytest.raises(Forbidden):
        sources.compress_thread_context("t1", actor=VIEWER)
    assert _records("t1") == []
    assert sources.compress_thread_context("t1", actor=OPERATOR).status == "completed"
    again = sources.compress_thread_context("t1", actor=OPERATOR)  # 4 kept: nothing to summarize
    assert again.status == "no_op"
    assert len(_records("t1")) == 1


# --- the attached platform's automatic summaries ----------------------------------------


def _platform_events(platform: Platform, thread_id: str) -> set[str]:
    """The distinct summarization events in the platform's own history of a thread."""
    found: set[str] = set()
    with Connection.connect(platform.owner_conninfo, autocommit=True, row_factory=dict_row) as conn:
        saver = PostgresSaver(conn)  # type: ignore[arg-type]
        config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        for item in saver.list(config):
            event = item.checkpoint["channel_values"].get(SUMMARIZATION_EVENT_KEY)
            if event is not None:
                found.add(str(event.get("file_path")) + str(event.get("cutoff_index")))
    return found


@pytest.mark.services
def test_the_platforms_automatic_summaries_are_recorded_once_across_three_scans(
    db_url: str, attached: Platform, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = {"thread_id": "plat-sum", "user_id": "alice", "agent": "research", "turns": 3,
            "result_words": 250}  # fmt: skip
    for round_number in (1, 2, 3):
        ran = attached.run([{**spec, "round": round_number}])
        if round_number == 2:  # a scan between the platform's compressions
            assert main(["attach", "scan", "--json"]) == 0
    assert ran["plat-sum"]["summarized"], ran
    events = _platform_events(attached, "plat-sum")
    assert events, "the stand-in platform's middleware summarized nothing"
    for _ in range(3):
        assert main(["attach", "scan", "--json"]) == 0
        capsys.readouterr()
    records = _records("plat-sum")
    assert len(records) == len(events)
    assert {(r.trigger, r.origin, r.actor) for r in records} == {("automatic", "attached", None)}
    assert len({r.event_key for r in records}) == len(records)


@pytest.mark.services
def test_deepagents_summaries_on_the_platform_are_recorded_once_across_three_scans(
    db_url: str, attached: Platform, capsys: pytest.CaptureFixture[str]
) -> None:
    """The platform runs deepagents' own SummarizationMiddleware (a real `create_agent`)."""
    with Connection.connect(attached.owner_conninfo, autocommit=True, row_factory=dict_row) as conn:
        saver = PostgresSaver(conn)  # type: ignore[arg-type]
        agent = summarizing_agent(
            scripted_model(claude_script(TURNS)), saver, attached.workdir, trigger_tokens=450
        )
        play(agent, "deep-1", TURNS)
    events = _platform_events(attached, "deep-1")
    assert len(events) >= 2, "deepagents summarized fewer than twice"
    for _ in range(3):
        assert main(["attach", "scan", "--json"]) == 0
        capsys.readouterr()
    records = _records("deep-1")
    assert len(records) == len(events)
    assert all(r.trigger == "automatic" and r.origin == "attached" for r in records)
    assert all(sum(r.ledger["totals"].values()) == len(r.ledger["items"]) for r in records)
