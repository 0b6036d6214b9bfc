"""Bad input is one typed refusal with an audit row, and nothing changes (SQLite and PostgreSQL).

Each test is one finding of the outside audit: NUL bytes, out-of-range ints and
deep JSON that reached the database as raw driver errors with no audit row,
memory refusals that were never audited, warm context sent as a write-capable
query with no timeout through a driver that logs its parameters, a re-import
that deleted what intake wrote, empty ids that listed everything, and deleted
threads reported as unknown.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import redis
import sqlalchemy as sa

from tests.service.builders import OPERATOR, conversation, import_payload, seed_thread
from yuxi_dash import service, sources
from yuxi_dash.access.audit import record_audit, wait_for_pending_audit
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.cli import main
from yuxi_dash.errors import InvalidInput, ThreadDeleted, ThreadNotFound
from yuxi_dash.memory.views import gated_views as memory_service
from yuxi_dash.memory.views.gate import open_view
from yuxi_dash.settings import Settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import (
    Agent,
    AgentRun,
    AuditEntry,
    ChatMessage,
    Conversation,
    RunRequest,
    ToolResult,
    UsageSnapshotRow,
)
from yuxi_dash.store.thread_store import state_store
from yuxi_dash.tool_results.index import list_tool_results, read_tool_result

VIEWER = Actor(id="viewer@example.com", role=Role.VIEWER)
_COUNTED = (
    Agent,
    Conversation,
    ChatMessage,
    RunRequest,
    AgentRun,
    UsageSnapshotRow,
    ToolResult,
)


def row_counts() -> dict[str, int]:
    """Rows in every table a refused call could have touched (the audit log aside).

    Thread state counts as the checkpointer's checkpoints, of every thread (each write adds one).
    """
    with session_scope() as session:
        counts = {
            model.__tablename__: int(
                session.scalar(sa.select(sa.func.count()).select_from(model)) or 0
            )
            for model in _COUNTED
        }
    counts["checkpoints"] = sum(1 for _ in state_store().saver.list(None))
    return counts


def audits(action: str | None = None) -> list[AuditEntry]:
    assert wait_for_pending_audit(30)
    with session_scope() as session:
        query = sa.select(AuditEntry).order_by(AuditEntry.id)
        if action is not None:
            query = query.where(AuditEntry.action == action)
        rows = list(session.scalars(query))
        session.expunge_all()
        return rows


def refused(rows: list[AuditEntry]) -> list[tuple[str, str, str]]:
    return [(r.target, r.outcome, r.detail.get("code")) for r in rows]


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main([*argv, "--json"])
    out, _ = capsys.readouterr()
    return code, json.loads(out)


# --- 11: NUL bytes, out-of-range ints, deep JSON ---------------------------------------


def test_nul_in_a_thread_id_is_invalid_input_with_an_audit_row(db_url: str) -> None:
    """Before: PostgreSQL raised a raw DataError and no audit row was written."""
    seed_thread()
    before = row_counts()
    with pytest.raises(InvalidInput) as caught:
        sources.compress_thread_context("t\x001", actor=OPERATOR)
    assert caught.value.exit_code == 2 and "NUL" in caught.value.message
    assert refused(audits("compress")) == [("thread:t\\x001", "refused", "invalid_input")]
    assert row_counts() == before


def test_nul_in_intake_content_is_invalid_input_with_an_audit_row(db_url: str) -> None:
    """Before: PostgreSQL raised a raw DataError; SQLite stored the NUL in the chat record."""
    seed_thread()
    before = row_counts()
    with pytest.raises(InvalidInput):
        service.enqueue_request("t1", content="hello\x00world")
    with pytest.raises(InvalidInput):
        service.enqueue_request("t1", content="fine", payload={"note": "a\x00b"})
    assert refused(audits("intake")) == [("thread:t1", "refused", "invalid_input")] * 2
    assert row_counts() == before


@pytest.mark.parametrize("result_id", [2**63, -(2**63) - 1, 10**30])
def test_a_tool_result_id_beyond_64_bits_is_invalid_input(db_url: str, result_id: int) -> None:
    """Before: DataError (bigint out of range) / OverflowError, and no audit row."""
    with pytest.raises(InvalidInput):
        read_tool_result(result_id, actor=VIEWER)
    assert refused(audits("read_tool_result")) == [
        (f"tool_result:{result_id}", "refused", "invalid_input")
    ]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("context_window", 10**30),
        ("context_window", 2**31),
        ("context_window", 0),
        ("summary_threshold", 2**40),
        ("summary_keep_messages", True),
    ],
)
def test_agent_sizes_out_of_range_are_invalid_input(db_url: str, key: str, value: Any) -> None:
    """Before: context_window=10**30 raised DataError (integer out of range), no audit row."""
    payload = import_payload()
    payload["agent"][key] = value
    before = row_counts()
    with pytest.raises(InvalidInput) as caught:
        service.import_thread(payload, actor=OPERATOR)
    assert key in caught.value.message
    assert refused(audits("import_thread")) == [("thread:imp-1", "refused", "invalid_input")]
    assert row_counts() == before


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": [value]}
    return value


def test_deeply_nested_import_json_is_invalid_input(db_url: str) -> None:
    """Before: the nesting reached the JSON column writer (RecursionError, no audit row)."""
    payload = import_payload()
    payload["messages"][0]["data"]["additional_kwargs"] = {"deep": _nested(5_000)}
    before = row_counts()
    with pytest.raises(InvalidInput) as caught:
        service.import_thread(payload, actor=OPERATOR)
    assert "nested deeper" in caught.value.message
    assert refused(audits("import_thread")) == [("thread:imp-1", "refused", "invalid_input")]
    assert row_counts() == before


def test_deeply_nested_import_file_is_exit_2_on_the_cli(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the JSON parser's RecursionError was `internal_error` (exit 1), with no audit row."""
    path = tmp_path / "deep.json"
    path.write_text('{"thread_id": "x", "messages": ' + "[" * 100_000 + "]" * 100_000 + "}")
    code, out = cli(capsys, "import-thread", str(path), "--actor", "ops")
    assert code == 2 and out["error"]["code"] == "invalid_input"
    assert refused(audits("import_thread")) == [("thread:?", "refused", "invalid_input")]
    assert row_counts()["conversations"] == 0


def test_an_audit_row_holding_nul_and_nan_is_still_written(db_url: str) -> None:
    """Before: the audit insert itself failed on PostgreSQL (NUL in text, NaN in JSON)."""
    record_audit(
        actor="ops\x00",
        action="probe",
        target="thread:\x00" * 100,
        outcome="refused",
        detail={"code": "invalid_input", "bad\x00key": "v\x00\ud800", "ratio": float("nan")},
    )
    (row,) = audits("probe")
    assert row.actor == "ops\\x00" and row.target.startswith("thread:\\x00thread:")
    assert len(row.target) == 256
    assert row.detail == {"code": "invalid_input", "bad\\x00key": "v\\x00\\ud800", "ratio": "nan"}


# --- 12: memory refusals are audited ------------------------------------------------------


@pytest.mark.parametrize("user_id", ["alice\x00chen", "x' OR 1=1 //", "", "a" * 129])
def test_memory_refusal_of_a_hostile_user_id_is_audited(db_url: str, user_id: str) -> None:
    """Before: `open_view` validated the id before auditing, so no row was written."""
    with pytest.raises(InvalidInput):
        open_view(user_id, "stats", actor=VIEWER)
    (row,) = audits("memory.view")
    assert (row.outcome, row.detail["code"], row.detail["view"]) == (
        "refused",
        "invalid_input",
        "stats",
    )
    assert row.target == "memory:" + user_id.replace("\x00", "\\x00")


def test_memory_refusals_on_the_cli_are_exit_2_and_audited(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: `memory stats ''` and `flags 'a b'` exited 2 with no audit row."""
    code, out = cli(capsys, "memory", "stats", "", "--actor", "ops")
    assert code == 2 and out["error"]["code"] == "invalid_input"
    code, out = cli(capsys, "flags", "a b")
    assert code == 2 and out["error"]["code"] == "invalid_input"
    assert [(r.action, r.target, r.outcome) for r in audits()] == [
        ("memory.view", "memory:", "refused"),
        ("memory.flags", "memory:a b", "refused"),
    ]


def test_memory_view_inputs_are_checked_and_audited(
    demo_graphs: Any, graph_client: Any, memory_settings: Settings
) -> None:
    """Before: a NUL in the entity search or uuid went into a Cypher parameter, unaudited."""
    from ldclient.integrations.test_data import TestData

    from yuxi_dash.flags import FlagEvaluator

    settings = memory_settings
    flags = TestData.data_source()
    flags.update(flags.flag("graphiti-memory").variation_for_all(True))
    evaluator = FlagEvaluator.from_test_data(settings, flags)
    try:
        access = open_view(
            "alice_chen", "entities", actor=VIEWER, settings=settings, evaluator=evaluator
        )
        sent = graph_client.queries_run
        with pytest.raises(InvalidInput):
            memory_service.entities(access, search="dark\x00", client=graph_client)
        with pytest.raises(InvalidInput):
            memory_service.entity_detail(access, "uuid\x00", client=graph_client)
        with pytest.raises(InvalidInput):
            memory_service.warm_context(access, "x" * 501, client=graph_client)
    finally:
        evaluator.close()
    assert graph_client.queries_run == sent  # refused before any query
    with session_scope(settings) as session:
        rows = session.scalars(
            sa.select(AuditEntry.outcome).where(AuditEntry.target == "memory:alice_chen")
        ).all()
    assert sorted(rows) == ["ok", "refused", "refused", "refused"]


# --- 13: warm context is a read-only query with a timeout, and logs no parameters -------


def test_warm_context_sends_only_ro_queries_with_the_timeout(
    demo_graphs: Any, graph_client: Any, falkordb_server: Any
) -> None:
    """Before: the fact search went out as GRAPH.QUERY with no timeout (graphiti's driver)."""
    from yuxi_dash.memory.views.warm_context import build_warm_context

    monitor_conn = redis.Redis(**falkordb_server.redis_kwargs())
    commands: list[str] = []
    with monitor_conn.monitor() as monitor:
        context = build_warm_context(graph_client, "user_alice_chen", "answers Polish", max_facts=5)
        graph_client.ro_value("user_alice_chen", "RETURN 'monitor-end'")
        for event in monitor.listen():
            commands.append(event["command"])
            if "monitor-end" in event["command"]:
                break
    monitor_conn.close()
    assert context.facts  # the search found something
    graph_commands = [c for c in commands if c.startswith("GRAPH.")]
    searches = [c for c in graph_commands if "queryRelationships" in c]
    assert len(searches) == 1
    assert all(c.startswith("GRAPH.RO_QUERY") for c in graph_commands), graph_commands
    assert all(" timeout " in c.lower() for c in graph_commands), graph_commands


def test_a_failing_warm_context_query_logs_no_parameters(
    demo_graphs: Any, graph_client: Any, falkordb_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: graphiti's driver logged the query and its parameters (the search text) at ERROR."""
    from yuxi_dash.memory.views.warm_context import build_warm_context

    conn = redis.Redis(**falkordb_server.redis_kwargs())
    conn.set("user_not_a_graph", "plain string")  # every graph query on this key fails
    caplog.set_level(logging.DEBUG)
    try:
        with pytest.raises(redis.ResponseError):
            build_warm_context(graph_client, "user_not_a_graph", "needle secret", max_facts=5)
    finally:
        conn.delete("user_not_a_graph")
        conn.close()
    assert "needle" not in caplog.text and "secret" not in caplog.text


# --- 14: a re-import keeps what intake wrote ------------------------------------------------


def test_reimport_never_loses_chat_rows_from_intake(db_url: str) -> None:
    """Before: the re-import deleted every chat row of the thread, intake's included."""
    service.import_thread(import_payload(conversation(3)), actor=OPERATOR)
    request = service.enqueue_request("imp-1", content="a question that came through intake")
    run = service.dispatch_next_request("imp-1")
    assert run is not None and run.request_id == request.id
    service.finish_run(run.id)
    service.import_thread(import_payload(conversation(3)), actor=OPERATOR)  # the same export again
    service.import_thread(import_payload(conversation(4)), actor=OPERATOR)  # a longer export
    with session_scope() as session:
        chat = session.scalars(sa.select(ChatMessage.content).order_by(ChatMessage.sequence)).all()
    assert "a question that came through intake" in chat
    assert len(chat) == 12 + 1 + 4  # three turns, the intake, the fourth turn: nothing twice
    said = [line for line in chat if line]  # the tool-calling turns have no text
    assert len(set(said)) == len(said)


# --- 15: empty ids and deleted threads --------------------------------------------------------


def _index_one_tool_result() -> None:
    with session_scope() as session:
        session.add(
            ToolResult(
                thread_id="t1",
                tool_name="run_command",
                sha256="0" * 64,
                path="outputs/tool_results/x.txt",
                chars=10,
                approx_tokens=3,
            )
        )


def test_an_empty_thread_filter_is_invalid_input_not_everything(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: `tool-results --thread ""` listed every tool result (exit 0)."""
    seed_thread()
    _index_one_tool_result()
    code, out = cli(capsys, "tool-results", "--thread", "")
    assert code == 2 and out["error"]["code"] == "invalid_input"
    code, out = cli(capsys, "tool-results", "--thread", "", "--verify")
    assert code == 2 and out["error"]["code"] == "invalid_input"
    with session_scope() as session, pytest.raises(InvalidInput):
        list_tool_results(session, thread_id="")
    assert refused(audits("cli.tool_results")) == [("thread:", "refused", "invalid_input")] * 2


def test_compress_of_an_empty_id_is_invalid_input(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: `compress ""` said `thread  not found` (exit 3)."""
    seed_thread()
    before = row_counts()
    code, out = cli(capsys, "compress", "", "--actor", "ops")
    assert code == 2 and out["error"]["code"] == "invalid_input"
    assert "empty" in out["error"]["message"]
    code, out = cli(capsys, "context", " ")
    assert code == 2 and out["error"]["code"] == "invalid_input"
    assert refused(audits()) == [
        ("thread:", "refused", "invalid_input"),
        ("thread: ", "refused", "invalid_input"),
    ]
    assert row_counts() == before


def test_a_deleted_thread_says_thread_deleted(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: a deleted thread was `thread_not_found`, while the pages said it is deleted."""
    from yuxi_dash.ui.compressibility import compress_blocker
    from yuxi_dash.ui.page_text import error_line

    seed_thread(status="deleted")
    before = row_counts()
    with pytest.raises(ThreadDeleted) as caught:
        sources.compress_thread_context("t1", actor=OPERATOR)
    assert isinstance(caught.value, ThreadNotFound) and caught.value.status_code == 404
    assert error_line(caught.value).endswith("thread t1 is deleted [thread_deleted]")
    assert compress_blocker({"status": "deleted"}, OPERATOR) == "thread is deleted"
    with pytest.raises(ThreadDeleted):
        service.enqueue_request("t1", content="hello?")
    code, out = cli(capsys, "compress", "t1", "--actor", "ops")
    assert code == 3 and out["error"]["code"] == "thread_deleted"
    code, out = cli(capsys, "context", "t1")
    assert code == 3 and out["error"]["code"] == "thread_deleted"
    with pytest.raises(ThreadNotFound) as other_user:  # not yours: still unknown, not "deleted"
        sources.compress_thread_context("t1", actor=OPERATOR, user_id="someone-else")
    assert other_user.value.code == "thread_not_found"
    assert [(r.action, r.detail["code"]) for r in audits()] == [
        ("compress", "thread_deleted"),
        ("intake", "thread_deleted"),
        ("compress", "thread_deleted"),
        ("cli.context", "thread_deleted"),
        ("compress", "thread_not_found"),
    ]
    assert row_counts() == before
