"""The projection (yuxi_dash.service.projection) made again: no row twice. SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from tests.service.builders import seed_thread
from yuxi_dash import service
from yuxi_dash.compression.compaction import offload_tool_results, saved_result_header
from yuxi_dash.compression.state_format import TOKEN_USAGE_KEY
from yuxi_dash.files.workdir import SavedFile, Workdir
from yuxi_dash.service.projection import project_thread
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AuditEntry, ChatMessage, ToolResult, UsageSnapshotRow
from yuxi_dash.store.thread_store import state_store, write_state


def _usage(next_tokens: int, at: str) -> dict[str, Any]:
    return {
        "llm_input_tokens": next_tokens,
        "next_llm_input_tokens": next_tokens,
        "context_window": 128_000,
        "summary_trigger_tokens": 8192,
        "summary_active": False,
        "measured_at": at,
    }


def _rows() -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    snapshot = sa.select(
        UsageSnapshotRow.measured_at,
        UsageSnapshotRow.source,
        UsageSnapshotRow.next_llm_input_tokens,
    ).order_by(UsageSnapshotRow.measured_at)
    chat = sa.select(ChatMessage.sequence, ChatMessage.message_id).order_by(ChatMessage.sequence)
    with session_scope() as session:
        return (
            [tuple(row) for row in session.execute(snapshot)],
            [tuple(row) for row in session.execute(chat)],
        )


def test_a_thread_projected_again_from_scratch_gets_no_snapshot_twice(db_url: str) -> None:
    """As when the checkpoint it was projected up to is gone (a platform pruned it)."""
    checkpoint = seed_thread()
    history = [HumanMessage("q", id="h1"), AIMessage("a", id="a1")]
    for step, at in enumerate(("2026-11-01T09:00:00+00:00", "2026-11-01T09:05:00+00:00")):
        history = [*history, HumanMessage(f"q{step}", id=f"h{step + 2}")]
        checkpoint = write_state(
            "t1",
            {"messages": history, TOKEN_USAGE_KEY: _usage(4000 + step * 1000, at)},
            expected_checkpoint_id=checkpoint,
        ).checkpoint_id
    with service.thread_lock("t1") as (session, conv):
        assert conv is not None
        conv.checkpoint_id = None  # the whole history: the seed and the two model calls
        project_thread(session, conv, state_store())
    once = _rows()
    assert [row[2] for row in once[0]] == [4000, 5000]  # the two model calls
    assert len(once[1]) > 4  # the seed's messages and the three added

    with service.thread_lock("t1") as (session, conv):
        assert conv is not None
        conv.checkpoint_id = None  # its projected checkpoint unknown: projected from scratch
        latest = project_thread(session, conv, state_store())
        assert latest is not None and latest.checkpoint_id == checkpoint
    assert _rows() == once  # the same snapshots and chat rows, none twice


def test_saved_results_are_indexed_with_their_original_length(db_url: str, tmp_path: Path) -> None:
    """The index's chars is the original result's length (not 4 x its approximate tokens)."""
    checkpoint = seed_thread()
    workdir = Workdir(tmp_path / "wd")
    workdir.initialize()
    contents = {"c1": "x" * 9451, "c2": "中文" * 1001, "c3": "line\n" * 333}
    calls = [{"name": "run", "args": {}, "id": call_id} for call_id in contents]
    results = [
        ToolMessage(text, tool_call_id=call_id, name="run") for call_id, text in contents.items()
    ]
    offloaded, saved = offload_tool_results([AIMessage("", tool_calls=calls), *results], workdir)
    assert len(saved) == 3
    write_state(
        "t1",
        {"messages": [HumanMessage("q", id="h1"), *offloaded]},
        expected_checkpoint_id=checkpoint,
    )
    with service.thread_lock("t1") as (session, conv):
        assert conv is not None
        project_thread(session, conv, state_store())
    with session_scope() as session:
        selected = session.execute(sa.select(ToolResult.tool_call_id, ToolResult.chars))
        rows = {call_id: chars for call_id, chars in selected}
    assert rows == {call_id: len(text) for call_id, text in contents.items()}


def test_an_assistant_turn_that_only_calls_a_tool_reads_as_its_call(db_url: str) -> None:
    checkpoint = seed_thread()
    call = {"name": "query_kb", "args": {"query": "Q4 revenue"}, "id": "c1", "type": "tool_call"}
    history = [
        HumanMessage("what was Q4 revenue?", id="h1"),
        AIMessage("", id="a1", tool_calls=[call]),
        ToolMessage("revenue 4.2M", tool_call_id="c1", id="t1"),
        AIMessage("Q4 revenue was 4.2M.", id="a2"),
    ]
    write_state(
        "t1",
        {"messages": history, TOKEN_USAGE_KEY: _usage(4000, "2026-11-01T09:00:00+00:00")},
        expected_checkpoint_id=checkpoint,
    )
    with service.thread_lock("t1") as (session, conv):
        assert conv is not None
        project_thread(session, conv, state_store())
    with session_scope() as session:
        content = session.scalar(
            sa.select(ChatMessage.content).where(ChatMessage.message_id == "a1")
        )
        answer = session.scalar(
            sa.select(ChatMessage.content).where(ChatMessage.message_id == "a2")
        )
    assert content == 'calls query_kb {"query": "Q4 revenue"}'
    assert answer == "Q4 revenue was 4.2M."  # a message with text keeps its text


def _offloaded(workdir: Workdir, call_id: str, text: str) -> tuple[list[Any], SavedFile]:
    call = {"name": "run", "args": {}, "id": call_id}
    result = ToolMessage(text, tool_call_id=call_id, name="run", id=f"tm-{call_id}")
    messages, saved = offload_tool_results([AIMessage("", tool_calls=[call]), result], workdir)
    assert len(saved) == 1
    return messages, saved[0][2]


def test_a_forged_saved_result_header_indexes_no_file_but_the_one_it_names(
    db_url: str, tmp_path: Path
) -> None:
    """A header is indexed only when its path is the file its own tool and SHA-256 name,
    and that file is not another owner's: never a history file, the marker, or
    another user's offloaded result."""
    workdir = Workdir(tmp_path / "wd")
    workdir.initialize()
    alice = seed_thread("t-alice", user_id="alice")
    mallory = seed_thread("t-mallory", user_id="mallory", create_agent=False)
    alice_messages, secret = _offloaded(workdir, "a1", "alice's secret " * 800)
    write_state("t-alice", {"messages": alice_messages}, expected_checkpoint_id=alice)
    with service.thread_lock("t-alice") as (session, conv):
        assert conv is not None
        project_thread(session, conv, state_store())

    def forged(call_id: str, path: str, sha256: str) -> ToolMessage:
        saved = SavedFile(path, sha256, 100, 25)
        header = saved_result_header("run", saved, "preview", 100)
        return ToolMessage(header, tool_call_id=call_id, name="run", id=f"forged-{call_id}")

    history = "outputs/conversation_history/session_t-alice.md"
    own_messages, own = _offloaded(workdir, "m1", "mallory's own result " * 800)
    calls = [{"name": "run", "args": {}, "id": f"f{i}"} for i in range(4)]
    write_state(
        "t-mallory",
        {
            "messages": [
                *own_messages,
                AIMessage("", tool_calls=calls, id="ai-forged"),
                forged("f1", secret.path, "0" * 64),  # another file's name, a made-up digest
                forged("f0", secret.path, secret.sha256),  # another user's file, exact header
                forged("f2", history, "a" * 64),  # a history file
                forged("f3", ".yuxi-dash-workdir", "b" * 64),  # the marker
            ]
        },
        expected_checkpoint_id=mallory,
    )
    with service.thread_lock("t-mallory") as (session, conv):
        assert conv is not None
        project_thread(session, conv, state_store())
    with session_scope() as session:
        indexed = sorted(session.execute(sa.select(ToolResult.thread_id, ToolResult.path)))
        refused = list(
            session.scalars(
                sa.select(AuditEntry.target).where(
                    AuditEntry.action == "index_saved_result", AuditEntry.outcome == "refused"
                )
            )
        )
    assert indexed == sorted([("t-alice", secret.path), ("t-mallory", own.path)])
    assert refused == ["thread:t-mallory"] * 4
    # the thread moves on with the forged headers still in its state: audited once, not again
    latest = state_store().latest("t-mallory")
    assert latest is not None
    write_state(
        "t-mallory",
        {"messages": [*latest.values["messages"], HumanMessage("and now?", id="h-later")]},
        expected_checkpoint_id=latest.checkpoint_id,
    )
    with service.thread_lock("t-mallory") as (session, conv):
        assert conv is not None
        project_thread(session, conv, state_store())
    with session_scope() as session:
        again = session.scalar(
            sa.select(sa.func.count()).where(
                AuditEntry.action == "index_saved_result",
                AuditEntry.outcome == "refused",
                AuditEntry.target == "thread:t-mallory",
            )
        )
    assert again == 4


def test_each_call_row_holds_its_model_and_output_tokens_old_entries_null(db_url: str) -> None:
    checkpoint = seed_thread()
    history: list[Any] = [HumanMessage("q", id="h1")]
    calls = [
        {},  # an entry from before the middleware reported them
        {"model": "gpt-test", "output_tokens": 17},
        {"model": "claude-x", "output_tokens": None},
    ]
    for step, call in enumerate(calls):
        history = [*history, AIMessage(f"a{step}", id=f"a{step}")]
        usage = {**_usage(4000 + step * 1000, f"2026-11-01T09:0{step}:00+00:00"), **call}
        checkpoint = write_state(
            "t1", {"messages": history, TOKEN_USAGE_KEY: usage}, expected_checkpoint_id=checkpoint
        ).checkpoint_id
    with service.thread_lock("t1") as (session, conv):
        assert conv is not None
        conv.checkpoint_id = None
        project_thread(session, conv, state_store())
    query = sa.select(
        UsageSnapshotRow.next_llm_input_tokens,
        UsageSnapshotRow.model,
        UsageSnapshotRow.output_tokens,
    ).order_by(UsageSnapshotRow.measured_at)
    with session_scope() as session:
        rows = [tuple(row) for row in session.execute(query)]
    assert rows == [(4000, None, None), (5000, "gpt-test", 17), (6000, "claude-x", None)]
