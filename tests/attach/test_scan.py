"""`yuxi-dash attach scan` against another platform's real LangGraph checkpointer.

The platform is a separate process running a real `create_agent` graph with our
compression middleware and LangGraph's PostgresSaver in its own database; the
dashboard attaches with a role that may only SELECT there. On SQLite and on
PostgreSQL for our own tables.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg import Connection
from psycopg.rows import dict_row

from tests.attach.checkpoints import put_checkpoint, usage, values
from tests.fixtures.platform import Platform
from yuxi_dash.cli import main
from yuxi_dash.compression import context_view
from yuxi_dash.compression.compaction import saved_result_header
from yuxi_dash.compression.state_format import context_state
from yuxi_dash.files.workdir import SavedFile
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import ChatMessage, Conversation, ScanWatermark, UsageSnapshotRow
from yuxi_dash.store.queries import list_audit

pytestmark = pytest.mark.services

ROUND_ONE = [
    {"thread_id": "plat-hot", "user_id": "alice", "agent": "research", "turns": 3,
     "result_words": 250},
    {"thread_id": "plat-cool", "user_id": "bob", "agent": "research", "turns": 1,
     "result_words": 20},
    {"thread_id": "plat-big", "user_id": "carol", "turns": 2, "result_words": 1500},
    {"thread_id": "plat-anon", "turns": 1, "result_words": 50},
]  # fmt: skip


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    capsys.readouterr()
    code = main([*args, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else None


def platform_values(platform: Platform, thread_id: str) -> tuple[str, dict[str, Any]]:
    """The platform's newest checkpoint of a thread, read with the saver alone (no code of ours)."""
    with Connection.connect(platform.owner_conninfo, autocommit=True, row_factory=dict_row) as conn:
        saver = PostgresSaver(conn)  # type: ignore[arg-type]
        found = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
    assert found is not None
    return found.config["configurable"]["checkpoint_id"], dict(found.checkpoint["channel_values"])


def test_scan_projects_the_platform_threads_then_only_what_moved(
    db_url: str, attached: Platform, capsys: pytest.CaptureFixture[str]
) -> None:
    first_run = attached.run(ROUND_ONE)
    written = sum(t["checkpoints"] for t in first_run.values())

    code, report = cli(capsys, "attach", "scan")
    assert code == 0, report
    assert report["threads_seen"] == 4 and report["projected"] == 4
    assert report["new_checkpoints"] == written  # every checkpoint, read once
    assert report["conflicts"] == 0 and report["failed"] == 0
    assert report["watermark"] == max(t["checkpoint_id"] for t in first_run.values())
    assert "hunter2" not in json.dumps(report) and attached.role not in report["source"]

    # the fleet: each thread with the pressure the platform's own state holds
    code, threads = cli(capsys, "threads")
    listed = {t["thread_id"]: t for t in threads}
    assert set(listed) == {"plat-hot", "plat-cool", "plat-big", "plat-anon"}
    for thread_id, ran in first_run.items():
        assert listed[thread_id]["summary_pressure_ratio"] == pytest.approx(
            ran["token_usage"]["summary_pressure_ratio"], abs=1e-4
        )
        assert listed[thread_id]["checkpoint_id"] == ran["checkpoint_id"]
        assert listed[thread_id]["attached"] is True and listed[thread_id]["capable"] is False
    assert (listed["plat-hot"]["user_id"], listed["plat-hot"]["agent"]) == ("alice", "research")
    assert (listed["plat-big"]["user_id"], listed["plat-big"]["agent"]) == ("carol", "attached")
    assert (listed["plat-anon"]["user_id"], listed["plat-anon"]["agent"]) == (
        "unknown",
        "attached",
    )
    code, hot = cli(capsys, "threads", "--min-pressure", "0.85")
    assert [t["thread_id"] for t in hot] == ["plat-hot"]

    # thread detail reads the platform's checkpointer: the same model-visible context
    checkpoint_id, values = platform_values(attached, "plat-big")
    code, context = cli(capsys, "context", "plat-big")
    assert code == 0, context
    assert context["checkpoint_id"] == checkpoint_id
    expected = context_view(context_state("plat-big", values))
    assert context["messages_total"] == len(values["messages"]) == expected.messages_total
    assert context["total_tokens"] == expected.total_tokens
    assert len(context["saved_results"]) == 2  # the platform offloaded two results

    # its offloaded results, indexed from its messages, resolve in the shared workdir
    code, verified = cli(capsys, "tool-results", "--verify")
    assert code == 0 and verified["checked"] == 2 and verified["ok"] == 2

    # more turns on one thread: the next scan reads only its new checkpoints
    second_run = attached.run(
        [{"thread_id": "plat-hot", "user_id": "alice", "agent": "research", "turns": 3,
          "result_words": 250, "round": 2}]
    )  # fmt: skip
    added = second_run["plat-hot"]["checkpoints"] - first_run["plat-hot"]["checkpoints"]
    assert added == 15
    code, report = cli(capsys, "attach", "scan")
    assert code == 0, report
    assert report["threads_changed"] == 1 and report["projected"] == 1
    assert report["new_checkpoints"] == added
    assert report["checkpoints_read"] == added + 1  # and the projected one, to compare with
    assert report["threads_seen"] == 4  # the overlap window lists them, unread
    assert report["watermark"] == second_run["plat-hot"]["checkpoint_id"]
    code, threads = cli(capsys, "threads")
    hot_row = next(t for t in threads if t["thread_id"] == "plat-hot")
    usage = second_run["plat-hot"]["token_usage"]
    assert hot_row["summary_pressure_ratio"] == pytest.approx(
        usage["summary_pressure_ratio"], abs=1e-4
    )
    assert hot_row["summary_active"] == usage["summary_active"]
    assert hot_row["checkpoint_id"] == second_run["plat-hot"]["checkpoint_id"]
    with session_scope() as session:
        sources = list(
            session.scalars(
                sa.select(UsageSnapshotRow.source).where(UsageSnapshotRow.thread_id == "plat-hot")
            )
        )
        chat = list(
            session.scalars(
                sa.select(ChatMessage.content)
                .where(ChatMessage.thread_id == "plat-hot")
                .order_by(ChatMessage.sequence)
            )
        )
    assert second_run["plat-hot"]["summarized"] and "auto_compaction" in sources
    questions = [c for c in chat if "question" in c]
    assert questions == [f"plat-hot-r{r}-question {t}" for r in (1, 2) for t in range(3)]

    # nothing new: nothing read
    code, report = cli(capsys, "attach", "scan")
    assert (report["threads_changed"], report["checkpoints_read"], report["projected"]) == (0, 0, 0)

    code, status = cli(capsys, "attach", "status")
    assert status["configured"] and status["attached_threads"] == 4
    assert status["watermark"] == second_run["plat-hot"]["checkpoint_id"]


def test_compress_of_an_attached_thread_is_refused_and_changes_nothing(
    db_url: str, attached: Platform, capsys: pytest.CaptureFixture[str]
) -> None:
    attached.run(ROUND_ONE[:1])
    assert cli(capsys, "attach", "scan")[0] == 0
    before_platform = attached.latest_id("plat-hot")
    with session_scope() as session:
        before = session.scalar(sa.select(Conversation).where(Conversation.thread_id == "plat-hot"))
        assert before is not None
        before_row = (before.checkpoint_id, before.summary_pressure_ratio, before.updated_at)

    code, refused = cli(capsys, "compress", "plat-hot", "--actor", "ops@example.com")
    assert code == 5
    assert refused["error"]["code"] == "thread_attached"
    assert "belongs to the attached platform" in refused["error"]["message"]

    assert attached.latest_id("plat-hot") == before_platform  # the platform's state untouched
    with session_scope() as session:
        after = session.scalar(sa.select(Conversation).where(Conversation.thread_id == "plat-hot"))
        assert after is not None
        assert (after.checkpoint_id, after.summary_pressure_ratio, after.updated_at) == before_row
        rows = list_audit(session, action="compress", target="thread:plat-hot")
    assert [(r.outcome, r.detail.get("code")) for r in rows] == [("refused", "thread_attached")]


def test_a_dashboard_thread_with_a_platform_thread_id_is_never_mixed(
    db_url: str, attached: Platform, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.service.builders import seed_thread

    ours = seed_thread("plat-cool", user_id="u-ours")
    attached.run(ROUND_ONE[:2])
    code, report = cli(capsys, "attach", "scan")
    assert code == 0
    assert report["conflicts"] == 1 and report["conflict_threads"] == ["plat-cool"]
    assert report["projected"] == 1
    with session_scope() as session:
        conv = session.scalar(sa.select(Conversation).where(Conversation.thread_id == "plat-cool"))
        assert conv is not None
        assert (conv.origin, conv.user_id, conv.checkpoint_id) == ("dashboard", "u-ours", ours)
        watermark = session.get(ScanWatermark, report["source"])
        assert watermark is not None and watermark.threads == 1
    # still a conflict on the next scan, and still nothing mixed
    code, again = cli(capsys, "attach", "scan")
    assert again["conflicts"] == 1 and again["projected"] == 0


def test_late_checkpoints_within_the_overlap_are_found(
    attached: Platform, capsys: pytest.CaptureFixture[str]
) -> None:
    """A replica whose clock runs behind writes ids below the watermark."""
    attached.run(ROUND_ONE[:1])
    code, report = cli(capsys, "attach", "scan")
    watermark = report["watermark"]
    late = attached.run(
        [{"thread_id": "plat-late", "user_id": "dave", "turns": 1, "result_words": 30}],
        clock_offset_seconds=-120,  # two minutes behind: inside the overlap
    )
    far = attached.run(
        [{"thread_id": "plat-far", "user_id": "erin", "turns": 1, "result_words": 30}],
        clock_offset_seconds=-3600,  # an hour behind: beyond it
    )
    assert late["plat-late"]["checkpoint_id"] < watermark  # committed after, named before
    assert far["plat-far"]["checkpoint_id"] < watermark
    code, report = cli(capsys, "attach", "scan")
    assert report["projected"] == 1
    assert report["watermark"] == watermark  # the late ids never move it back
    code, threads = cli(capsys, "threads")
    assert {t["thread_id"] for t in threads} == {"plat-hot", "plat-late"}
    # beyond the overlap, a full scan finds it (and reads nothing it already has)
    code, report = cli(capsys, "attach", "scan", "--full")
    assert (report["projected"], report["threads_seen"]) == (1, 3)
    code, threads = cli(capsys, "threads")
    assert {t["thread_id"] for t in threads} == {"plat-hot", "plat-late", "plat-far"}


def test_checkpoint_ids_of_the_platform_are_time_ordered_uuid6(attached: Platform) -> None:
    from yuxi_dash.attach.checkpoint_clock import checkpoint_time

    attached.run(ROUND_ONE[:2])
    rows = attached.rows(
        "SELECT checkpoint_id, checkpoint->>'ts' FROM checkpoints WHERE checkpoint_ns = ''"
    )
    assert len(rows) == 20
    by_id = [row[0] for row in sorted(rows, key=lambda r: r[0])]
    by_time = [row[0] for row in sorted(rows, key=lambda r: r[1])]
    assert by_id == by_time
    from datetime import datetime

    for checkpoint_id, ts in rows:
        ticks = checkpoint_time(checkpoint_id)
        assert ticks is not None
        unix = (ticks - 0x01B21DD213814000) / 10_000_000
        assert abs(unix - datetime.fromisoformat(ts).timestamp()) < 1.0
    assert get_settings().attach_configured


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)  # a row lock of another session
def test_a_thread_whose_row_is_locked_fails_alone_and_is_read_again(
    db_url: str,
    attached: Platform,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    one = {"thread_id": "plat-one", "user_id": "alice", "turns": 1, "result_words": 40}
    two = {"thread_id": "plat-two", "user_id": "bob", "turns": 1, "result_words": 40}
    attached.run([one, two])
    assert cli(capsys, "attach", "scan")[0] == 0
    moved = attached.run([{**one, "round": 2}, {**two, "round": 2}])
    monkeypatch.setenv("YUXI_DASH_LOCK_TIMEOUT_SECONDS", "0.5")
    get_settings.cache_clear()
    engine = sa.create_engine(db_url)
    try:
        with engine.begin() as holder:  # another writer holds plat-one's row
            holder.execute(
                sa.text("SELECT 1 FROM conversations WHERE thread_id = 'plat-one' FOR UPDATE")
            )
            code, report = cli(capsys, "attach", "scan")
        assert code == 1
        assert (report["projected"], report["failed"]) == (1, 1)
        assert report["failures"] == {"thread_busy": 1}
        # held back to the failed thread's checkpoint: the next window still holds it
        assert report["watermark"] == moved["plat-one"]["checkpoint_id"]
        code, report = cli(capsys, "attach", "scan")
        assert code == 0
        assert (report["threads_changed"], report["projected"]) == (1, 1)
        assert report["watermark"] == moved["plat-two"]["checkpoint_id"]
    finally:
        engine.dispose()
    code, threads = cli(capsys, "threads")
    assert {t["thread_id"]: t["checkpoint_id"] for t in threads} == {
        "plat-one": moved["plat-one"]["checkpoint_id"],
        "plat-two": moved["plat-two"]["checkpoint_id"],
    }


def _conversation(thread_id: str) -> Conversation:
    with session_scope() as session:
        conv = session.scalar(sa.select(Conversation).where(Conversation.thread_id == thread_id))
        assert conv is not None
        session.expunge(conv)
        return conv


def test_a_thread_the_platform_deleted_is_marked_deleted_by_a_full_scan(
    db_url: str, attached: Platform, capsys: pytest.CaptureFixture[str]
) -> None:
    attached.run(ROUND_ONE[:2])
    assert cli(capsys, "attach", "scan")[0] == 0
    with Connection.connect(attached.owner_conninfo, autocommit=True, row_factory=dict_row) as conn:
        saver = PostgresSaver(conn)  # type: ignore[arg-type]
        saver.delete_thread("plat-cool")  # the platform's own delete
    assert attached.rows("SELECT count(*) FROM checkpoints WHERE thread_id = 'plat-cool'") == [(0,)]

    code, report = cli(capsys, "attach", "scan")  # an incremental scan only reads what moved
    assert (code, report["deleted"]) == (0, 0)
    assert _conversation("plat-cool").status == "active"

    code, report = cli(capsys, "attach", "scan", "--full")
    assert code == 0, report
    assert (report["threads_seen"], report["deleted"], report["attached_threads"]) == (1, 1, 1)
    gone = _conversation("plat-cool")
    assert gone.status == "deleted" and gone.deleted_at is not None
    assert _conversation("plat-hot").status == "active"
    code, threads = cli(capsys, "threads")
    assert [t["thread_id"] for t in threads] == ["plat-hot"]
    code, refused = cli(capsys, "context", "plat-cool")
    assert (code, refused["error"]["code"]) == (3, "thread_deleted")
    code, report = cli(capsys, "attach", "scan", "--full")  # once is enough
    assert report["deleted"] == 0

    # the platform starts a thread with that id again: it is projected and active again
    again = attached.run([{**ROUND_ONE[1], "round": 2}])
    code, report = cli(capsys, "attach", "scan")
    assert (code, report["projected"], report["failed"]) == (0, 1, 0)
    back = _conversation("plat-cool")
    assert (back.status, back.deleted_at) == ("active", None)
    assert back.checkpoint_id == again["plat-cool"]["checkpoint_id"]
    code, threads = cli(capsys, "threads")
    assert {t["thread_id"] for t in threads} == {"plat-hot", "plat-cool"}


def test_a_thread_projected_again_after_the_platform_pruned_it_gets_no_duplicates(
    db_url: str, attached: Platform, capsys: pytest.CaptureFixture[str]
) -> None:
    """The checkpoint the scan projected last is pruned: the thread is projected from scratch."""
    first = attached.run(ROUND_ONE[:1])
    assert cli(capsys, "attach", "scan")[0] == 0
    snapshot = sa.select(
        UsageSnapshotRow.measured_at,
        UsageSnapshotRow.source,
        UsageSnapshotRow.next_llm_input_tokens,
        UsageSnapshotRow.summary_active,
    ).where(UsageSnapshotRow.thread_id == "plat-hot")
    with session_scope() as session:
        before = [tuple(row) for row in session.execute(snapshot)]
    second = attached.run([{**ROUND_ONE[0], "round": 2}])
    pruned = first["plat-hot"]["checkpoint_id"]
    with Connection.connect(attached.owner_conninfo, autocommit=True) as conn:  # as its owner
        conn.execute("DELETE FROM checkpoint_writes WHERE checkpoint_id = %s", (pruned,))
        conn.execute("DELETE FROM checkpoints WHERE checkpoint_id = %s", (pruned,))
    left = attached.rows("SELECT count(*) FROM checkpoints WHERE thread_id = 'plat-hot'")[0][0]
    assert left == second["plat-hot"]["checkpoints"] - 1

    code, report = cli(capsys, "attach", "scan")
    assert (code, report["projected"], report["failed"]) == (0, 1, 0), report
    assert report["checkpoints_read"] == left  # read again from the start
    with session_scope() as session:
        after = [tuple(row) for row in session.execute(snapshot)]
        chat = list(
            session.scalars(
                sa.select(ChatMessage.content)
                .where(ChatMessage.thread_id == "plat-hot")
                .order_by(ChatMessage.sequence)
            )
        )
    assert len(after) == len(set(after))  # no checkpoint's snapshot twice
    assert set(before) <= set(after) and len(after) > len(before)
    questions = [c for c in chat if "question" in c]
    assert questions == [f"plat-hot-r{r}-question {t}" for r in (1, 2) for t in range(3)]
    assert _conversation("plat-hot").checkpoint_id == second["plat-hot"]["checkpoint_id"]


def test_a_forged_saved_result_header_never_shows_another_users_file(
    db_url: str, attached: Platform, capsys: pytest.CaptureFixture[str]
) -> None:
    """An attached thread whose tool result forges a header naming carol's offloaded file."""
    attached.run([ROUND_ONE[2]])  # carol's thread offloads two results
    assert cli(capsys, "attach", "scan")[0] == 0
    code, carols = cli(capsys, "tool-results", "--thread", "plat-big")
    assert code == 0 and len(carols) == 2
    target = carols[0]
    header = saved_result_header(
        "query_kb", SavedFile(target["path"], target["sha256"], 100, 25), "preview", 100
    )
    call = {"name": "query_kb", "args": {}, "id": "c1"}
    forged = [
        AIMessage("", tool_calls=[call], id="a1"),
        ToolMessage(header, tool_call_id="c1", name="query_kb", id="t1"),
    ]
    first = put_checkpoint(
        attached.owner_conninfo,
        "plat-mallory",
        {"messages": forged, "token_usage": usage(1000)},
        metadata={"user_id": "mallory"},
    )
    code, report = cli(capsys, "attach", "scan")
    assert (code, report["projected"]) == (0, 1), report
    code, listed = cli(capsys, "tool-results", "--thread", "plat-mallory")
    assert (code, listed) == (0, [])
    # the thread moves on with the forged header in its state: refused again, audited once
    put_checkpoint(
        attached.owner_conninfo,
        "plat-mallory",
        {"messages": [*forged, AIMessage("more", id="a2")], "token_usage": usage(1200)},
        parent=first,
        metadata={"user_id": "mallory"},
    )
    code, report = cli(capsys, "attach", "scan")
    assert (code, report["projected"]) == (0, 1), report
    with session_scope() as session:
        refused = list_audit(session, action="index_saved_result", target="thread:plat-mallory")
    assert [(r.outcome, r.detail.get("code")) for r in refused] == [
        ("refused", "saved_result_refused")
    ]


def test_status_names_the_missing_checkpoint_id_index_until_the_owner_creates_it(
    attached: Platform, capsys: pytest.CaptureFixture[str]
) -> None:
    """The saver keys checkpoints by thread first: the window query needs its own index."""
    from yuxi_dash.attach.platforms import CREATE_INDEX_STATEMENT

    put_checkpoint(attached.owner_conninfo, "plat-one", values())
    code, report = cli(capsys, "attach", "scan")
    assert (code, report["checkpoint_index"]) == (0, False)
    code, status = cli(capsys, "attach", "status")
    assert status["checkpoint_index"] is False
    assert status["create_index_statement"] == CREATE_INDEX_STATEMENT
    assert status["window_query_ms"] == pytest.approx(report["query_seconds"] * 1000, abs=0.2)
    assert main(["attach", "status"]) == 0
    text = capsys.readouterr().out
    assert "the platform's checkpoints table has no index on checkpoint_id" in text
    assert CREATE_INDEX_STATEMENT in text

    with Connection.connect(attached.owner_conninfo, autocommit=True) as conn:
        conn.execute(CREATE_INDEX_STATEMENT)  # what the platform's owner runs
    put_checkpoint(attached.owner_conninfo, "plat-two", values())
    code, report = cli(capsys, "attach", "scan")
    assert (code, report["checkpoint_index"], report["projected"]) == (0, True, 1)
    code, status = cli(capsys, "attach", "status")
    assert (status["checkpoint_index"], status["create_index_statement"]) == (True, None)
    assert status["window_query_ms"] is not None
    assert main(["attach", "status"]) == 0
    assert "checkpoint_id" not in capsys.readouterr().out
