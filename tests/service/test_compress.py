"""Manual compression and its preview (yuxi_dash.service.compress), on SQLite and real PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, HumanMessage

from tests.service.builders import (
    OPERATOR,
    VIEWER,
    BrokenSummarizer,
    SlowSummarizer,
    audit_rows,
    history_files,
    queued_request,
    seed_thread,
    snapshot_of_store,
)
from yuxi_dash import service
from yuxi_dash.access.audit import wait_for_pending_audit
from yuxi_dash.errors import (
    AgentNotFound,
    CompressionUnsupported,
    Forbidden,
    StaleState,
    SummarizerFailed,
    ThreadBusy,
    ThreadNotFound,
    WorkdirUnavailable,
)
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import (
    AgentRun,
    ChatMessage,
    Conversation,
    RunRequest,
    ToolResult,
    UsageSnapshotRow,
)
from yuxi_dash.store.thread_store import load_state, write_state

# --- the happy path ------------------------------------------------------------------


def test_compress_completes_and_writes_everything_of_record(db_url: str) -> None:
    seeded = seed_thread()
    result = service.compress_own_thread("t1", actor=OPERATOR, expected_checkpoint_id=seeded)

    assert result.status == "completed"
    assert result.checkpoint_id not in (None, seeded)
    assert result.compressed_messages > 0
    assert result.after_tokens < result.before_tokens
    assert result.file_path == "outputs/conversation_history/session_t1.md"
    assert (Path(get_settings().workdir) / result.file_path).is_file()
    stored = load_state("t1")
    with session_scope() as session:
        conv = session.scalar(sa.select(Conversation).where(Conversation.thread_id == "t1"))
        snaps = session.scalars(sa.select(UsageSnapshotRow)).all()
        indexed = session.scalars(sa.select(ToolResult)).all()
    assert stored is not None and stored.checkpoint_id == result.checkpoint_id
    assert conv.checkpoint_id == result.checkpoint_id  # the projection is at the new checkpoint
    assert stored.state.summary is not None and stored.state.summary_active()
    usage = stored.token_usage
    assert usage["summary_active"] is True
    assert usage["summary_trigger_tokens"] == 8 * 1024
    assert usage["compression"]["after_tokens"] == result.after_tokens
    assert "llm_input_tokens" not in usage and "context_usage_ratio" not in usage  # stale, dropped
    assert usage["keep"] == "me"
    assert [s.source for s in snaps] == ["manual_compression"]
    assert snaps[0].summary_pressure_ratio == round(result.after_tokens / 8192, 4)
    assert conv.summary_active is True
    assert conv.summary_pressure_ratio == snaps[0].summary_pressure_ratio
    assert conv.last_compression_at is not None
    # the kept tail's large tool results were offloaded and indexed, and the files hold them
    assert indexed, "offloaded tool results must be indexed"
    for row in indexed:
        assert (Path(get_settings().workdir) / row.path).is_file()
    (audit,) = audit_rows()
    assert (audit.outcome, audit.actor, audit.action) == ("completed", OPERATOR.id, "compress")
    assert audit.detail["checkpoint_id"] == result.checkpoint_id


def test_compress_right_after_a_summary_is_no_op(db_url: str) -> None:
    seed_thread()
    first = service.compress_own_thread("t1", actor=OPERATOR)
    before = snapshot_of_store()
    again = service.compress_own_thread("t1", actor=OPERATOR)
    assert (again.status, again.reason, again.checkpoint_id) == (
        "no_op",
        "insufficient_history",
        first.checkpoint_id,
    )
    assert snapshot_of_store() == before
    assert [a.outcome for a in audit_rows()] == ["no_op", "completed"]


def test_too_little_history_is_no_op_and_writes_nothing(db_url: str) -> None:
    seeded = seed_thread(messages=[HumanMessage("hi"), AIMessage("hello")])
    before = snapshot_of_store()
    result = service.compress_own_thread("t1", actor=OPERATOR)
    assert (result.status, result.reason, result.checkpoint_id) == (
        "no_op",
        "insufficient_history",
        seeded,
    )
    assert snapshot_of_store() == before
    assert history_files() == []


# --- refusals ------------------------------------------------------------------------


def _active_run(session: Any) -> None:
    session.add(AgentRun(thread_id="t1", run_type="chat", status="running"))


def _interrupted_latest(session: Any) -> None:
    session.add(AgentRun(thread_id="t1", run_type="chat", status="interrupted"))


@pytest.mark.parametrize(
    ("make_busy", "reason"),
    [(_active_run, "running"), (_interrupted_latest, "interrupted"), (queued_request, "queued")],
)
def test_busy_thread_is_refused_and_unchanged(
    db_url: str, make_busy: Callable[[Any], None], reason: str
) -> None:
    seed_thread()
    with session_scope() as session:
        make_busy(session)
    before = snapshot_of_store()
    with pytest.raises(ThreadBusy) as caught:
        service.compress_own_thread("t1", actor=OPERATOR)
    assert caught.value.status_code == 409 and caught.value.detail["reason"] == reason
    assert snapshot_of_store() == before
    assert history_files() == []
    with session_scope() as session:  # never queued
        assert session.scalar(
            sa.select(sa.func.count()).select_from(RunRequest).where(RunRequest.status == "queued")
        ) == (1 if reason == "queued" else 0)
    (audit,) = audit_rows()
    assert (audit.outcome, audit.detail["code"]) == ("refused", "thread_busy")


def test_interrupted_run_followed_by_a_completed_one_is_idle(db_url: str) -> None:
    seed_thread()
    with session_scope() as session:
        session.add(AgentRun(thread_id="t1", run_type="chat", status="interrupted"))
        session.flush()
        session.add(AgentRun(thread_id="t1", run_type="resume", status="completed"))
        session.add(AgentRun(thread_id="t1", run_type="subagent", status="interrupted"))
    assert service.compress_own_thread("t1", actor=OPERATOR).status == "completed"


@pytest.mark.parametrize("case", ["unknown", "deleted", "other_user"])
def test_not_found_threads(db_url: str, case: str) -> None:
    seed_thread(status="deleted" if case == "deleted" else "active")
    thread_id = "nope" if case == "unknown" else "t1"
    before = snapshot_of_store()
    with pytest.raises(ThreadNotFound) as caught:
        service.compress_own_thread(
            thread_id, actor=OPERATOR, user_id="u2" if case == "other_user" else None
        )
    assert caught.value.status_code == 404
    assert snapshot_of_store() == before
    code = "thread_deleted" if case == "deleted" else "thread_not_found"  # deleted: its own code
    assert caught.value.code == code
    (audit,) = audit_rows(thread_id)
    assert (audit.outcome, audit.detail["code"]) == ("refused", code)


def test_unknown_agent_is_404(db_url: str) -> None:
    seed_thread(create_agent=False, agent_slug="ghost")
    with pytest.raises(AgentNotFound) as caught:
        service.compress_own_thread("t1", actor=OPERATOR)
    assert caught.value.status_code == 404
    assert audit_rows()[0].detail["code"] == "agent_not_found"


def test_agent_without_capability_is_422(db_url: str) -> None:
    seed_thread(capabilities=["web_search"])
    before = snapshot_of_store()
    with pytest.raises(CompressionUnsupported) as caught:
        service.compress_own_thread("t1", actor=OPERATOR)
    assert caught.value.status_code == 422
    assert snapshot_of_store() == before
    assert audit_rows()[0].detail["code"] == "compression_unsupported"


def test_stale_expected_checkpoint_is_409_and_summarizes_nothing(db_url: str) -> None:
    seed_thread()
    before = snapshot_of_store()
    with pytest.raises(StaleState) as caught:
        service.compress_own_thread(
            "t1", actor=OPERATOR, expected_checkpoint_id="1f000000-0000-6000-8000-000000000000"
        )
    assert caught.value.status_code == 409
    assert snapshot_of_store() == before
    assert history_files() == []


def test_viewer_is_refused_with_an_audit_row(db_url: str) -> None:
    seed_thread()
    before = snapshot_of_store()
    with pytest.raises(Forbidden) as caught:
        service.compress_own_thread("t1", actor=VIEWER)
    assert caught.value.status_code == 403
    assert snapshot_of_store() == before
    (audit,) = audit_rows()
    assert (audit.actor, audit.outcome, audit.detail["code"]) == (VIEWER.id, "refused", "forbidden")


def test_unwritable_workdir_is_503_before_anything_runs(db_url: str, tmp_path: Path) -> None:
    seed_thread()
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the workdir should be")
    settings = Settings(workdir=blocker)
    called: list[int] = []
    before = snapshot_of_store()
    with pytest.raises(WorkdirUnavailable) as caught:
        service.compress_own_thread(
            "t1",
            actor=OPERATOR,
            settings=settings,
            summarizer=SlowSummarizer(lambda: called.append(1)),
        )
    assert caught.value.status_code == 503
    assert called == []
    assert snapshot_of_store() == before
    assert audit_rows()[0].detail["code"] == "workdir_unavailable"


def test_summarizer_failure_changes_nothing_and_audits_failed(db_url: str) -> None:
    seed_thread()
    before = snapshot_of_store()
    with pytest.raises(SummarizerFailed):
        service.compress_own_thread("t1", actor=OPERATOR, summarizer=BrokenSummarizer())
    assert snapshot_of_store() == before
    assert history_files() == []
    offloaded = Path(get_settings().workdir) / "outputs" / "large_tool_results"
    assert not offloaded.exists() or list(offloaded.iterdir()) == []
    (audit,) = audit_rows()
    assert (audit.outcome, audit.detail["code"]) == ("failed", "summarizer_failed")
    # and the thread can still be compressed afterwards
    assert service.compress_own_thread("t1", actor=OPERATOR).status == "completed"


# --- racing a summary -----------------------------------------------------------------


def test_intake_during_a_summary_lands_at_once_and_the_compress_writes_nothing(
    db_url: str,
) -> None:
    """The lock is not held across the summarizer: intake lands while the model works."""
    seed_thread()
    before = snapshot_of_store()
    observed: dict[str, Any] = {}

    def while_summarizing() -> None:
        # runs inside the summarizer call: had compress kept the row lock across it, this intake
        # could only time out on that lock (1 s), never land
        try:
            observed["request"] = service.enqueue_request(
                "t1", content="one more question", settings=Settings(lock_timeout_seconds=1)
            )
        except Exception as exc:  # noqa: BLE001 - the failure is what the test asserts on
            observed["intake_error"] = exc

    with pytest.raises(ThreadBusy) as caught:
        service.compress_own_thread(
            "t1", actor=OPERATOR, summarizer=SlowSummarizer(while_summarizing)
        )
    assert "intake_error" not in observed and observed["request"] is not None  # it landed at once
    assert caught.value.detail["reason"] == "queued"  # the thread was no longer idle
    with session_scope() as session:
        request = session.scalars(sa.select(RunRequest)).one()
        chat = session.scalars(sa.select(ChatMessage)).all()
    assert request.status == "queued" and request.payload["content"] == "one more question"
    assert [c.content for c in chat] == ["one more question"]  # nothing lost
    assert snapshot_of_store() == before  # no summary, no snapshot, no offload index
    assert history_files() == []
    assert wait_for_pending_audit(30)
    (audit,) = audit_rows()
    assert (audit.outcome, audit.detail["code"]) == ("refused", "thread_busy")


def test_state_moved_during_the_summary_is_stale_and_writes_nothing(db_url: str) -> None:
    seeded = seed_thread()

    def a_model_call_lands() -> None:
        stored = load_state("t1")
        assert stored is not None
        write_state(
            "t1",
            {"messages": [AIMessage("a new answer")]},
            expected_checkpoint_id=stored.checkpoint_id,
        )

    with pytest.raises(StaleState):
        service.compress_own_thread(
            "t1", actor=OPERATOR, summarizer=SlowSummarizer(a_model_call_lands)
        )
    snapshot = snapshot_of_store()
    assert snapshot["checkpoint_id"] != seeded and snapshot["summary"] is None
    assert snapshot["snapshots"] == 0 and snapshot["tool_results"] == 0
    assert history_files() == []
    assert wait_for_pending_audit(30)
    assert [(a.outcome, a.detail["code"]) for a in audit_rows()] == [("refused", "stale_state")]


def test_two_compresses_at_once_write_exactly_one_summary(db_url: str) -> None:
    seeded = seed_thread()
    barrier = threading.Barrier(2)
    outcomes: list[Any] = []

    def compress() -> None:
        barrier.wait(5)
        try:
            outcomes.append(
                service.compress_own_thread(
                    "t1",
                    actor=OPERATOR,
                    expected_checkpoint_id=seeded,
                    summarizer=SlowSummarizer(lambda: time.sleep(0.3)),
                )
            )
        except (ThreadBusy, StaleState) as exc:
            outcomes.append(exc)

    workers = [threading.Thread(target=compress) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
    completed = [o for o in outcomes if isinstance(o, service.CompressResult)]
    refused = [o for o in outcomes if not isinstance(o, service.CompressResult)]
    assert len(completed) == 1 and completed[0].status == "completed"
    assert len(refused) == 1 and refused[0].status_code == 409
    (history,) = history_files()
    assert history.read_text().count("## Summarized at") == 1
    stored = load_state("t1")
    assert stored is not None and stored.checkpoint_id == completed[0].checkpoint_id
    with session_scope() as session:
        assert session.scalar(sa.select(sa.func.count()).select_from(UsageSnapshotRow)) == 1
    assert sorted(a.outcome for a in audit_rows()) == ["completed", "refused"]


# --- preview ---------------------------------------------------------------------------


def test_preview_is_read_only_and_close_to_the_real_thing(db_url: str) -> None:
    seeded = seed_thread()
    before = snapshot_of_store()
    preview = service.preview_own_thread("t1")
    assert snapshot_of_store() == before
    assert history_files() == []
    assert (preview.checkpoint_id, preview.capable, preview.busy_reason, preview.reason) == (
        seeded,
        True,
        None,
        None,
    )
    result = service.compress_own_thread("t1", actor=OPERATOR)
    assert preview.messages_to_summarize == result.compressed_messages
    assert preview.estimated_before_tokens == result.before_tokens
    assert preview.estimated_after_tokens < preview.estimated_before_tokens
    # the engine's own path with the extractive (deterministic) summarizer: the result itself
    assert abs(preview.estimated_after_tokens - result.after_tokens) <= 0.05 * result.after_tokens
    after_preview = service.preview_own_thread("t1")
    assert (after_preview.messages_to_summarize, after_preview.reason) == (
        0,
        "insufficient_history",
    )


def test_the_preview_is_within_5_percent_of_the_result_on_the_demo_threads(
    demo_env: Settings,
) -> None:
    """Issue 29 item 7: "before" is the detail page's count, "after" within 5% of the result."""
    from yuxi_dash.compression import context_view
    from yuxi_dash.store.queries import get_thread, list_threads

    with session_scope(demo_env) as session:
        hot = list_threads(session, min_pressure=0.85, limit=1000)
    targets = [t.thread_id for t in hot if t.capable and not t.busy_reason][:15]
    checked = 0
    for thread_id in targets:
        preview = service.preview_own_thread(thread_id)
        with session_scope(demo_env) as session:
            state = get_thread(session, thread_id).state
        assert preview.estimated_before_tokens == context_view(state).total_tokens
        if preview.reason:
            assert preview.reason == "insufficient_history" and preview.note
            continue
        result = service.compress_own_thread(
            thread_id, actor=OPERATOR, expected_checkpoint_id=preview.checkpoint_id
        )
        assert result.status == "completed"
        assert result.before_tokens == preview.estimated_before_tokens
        assert result.compressed_messages == preview.messages_to_summarize
        error = abs(preview.estimated_after_tokens - result.after_tokens)
        assert error <= 0.05 * result.after_tokens, (thread_id, preview, result)
        checked += 1
    assert checked >= 10


def test_preview_reports_busy_and_incapable(db_url: str) -> None:
    seed_thread(capabilities=[])
    with session_scope() as session:
        queued_request(session)
    preview = service.preview_own_thread("t1")
    assert (preview.capable, preview.busy_reason, preview.reason) == (
        False,
        "queued",
        "compression_unsupported",
    )
    with pytest.raises(ThreadNotFound):
        service.preview_own_thread("t1", user_id="someone-else")
