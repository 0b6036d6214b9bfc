"""The locked service core (yuxi_dash.service), each test on SQLite and on real PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from yuxi_dash import service
from yuxi_dash.audit import wait_for_pending_audit
from yuxi_dash.auth import Actor, Role
from yuxi_dash.compression import ExtractiveSummarizer, ThreadContextState
from yuxi_dash.errors import (
    AgentNotFound,
    CompressionUnsupported,
    Forbidden,
    InvalidInput,
    StaleState,
    SummarizerFailed,
    ThreadBusy,
    ThreadNotFound,
    WorkdirUnavailable,
)
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import is_sqlite, session_scope
from yuxi_dash.store.models import (
    AgentRun,
    ChatMessage,
    Conversation,
    RunRequest,
    ThreadState,
    ToolResult,
    UsageSnapshotRow,
)
from yuxi_dash.store.queries import list_audit
from yuxi_dash.store.state_repository import load_state, write_state

OPERATOR = Actor(id="ops@example.com", role=Role.OPERATOR)
VIEWER = Actor(id="viewer@example.com", role=Role.VIEWER)
CAPABLE = ["context_compression"]


def conversation(turns: int = 8, *, tool_chars: int = 4000) -> list[BaseMessage]:
    """A thread with user questions, tool calls with large results and answers."""
    messages: list[BaseMessage] = []
    for i in range(turns):
        messages.append(HumanMessage(f"Question {i}: please check the deployment logs."))
        messages.append(
            AIMessage(
                "",
                tool_calls=[{"name": "run_command", "args": {"cmd": f"logs {i}"}, "id": f"c{i}"}],
            )
        )
        messages.append(
            ToolMessage(
                f"log line {i}\n" * (tool_chars // 12), tool_call_id=f"c{i}", name="run_command"
            )
        )
        messages.append(AIMessage(f"Answer {i}: the deployment finished."))
    return messages


def seed_thread(
    thread_id: str = "t1",
    *,
    user_id: str = "u1",
    agent_slug: str = "agent-a",
    capabilities: Sequence[str] = CAPABLE,
    create_agent: bool = True,
    messages: Sequence[BaseMessage] | None = None,
    status: str = "active",
    keep_messages: int = 6,
) -> None:
    with session_scope() as session:
        if create_agent:
            service.upsert_agent(
                session,
                agent_slug,
                capabilities=list(capabilities),
                summary_keep_messages=keep_messages,
                summary_threshold=8,
            )
        service.create_thread(
            session, thread_id, user_id=user_id, agent_slug=agent_slug, status=status
        )
        write_state(
            session,
            ThreadContextState(thread_id, list(conversation() if messages is None else messages)),
            expected_version=0,
            token_usage={"llm_input_tokens": 9000, "context_usage_ratio": 0.07, "keep": "me"},
        )


def snapshot_of_store(thread_id: str = "t1") -> dict[str, Any]:
    """Everything a compress may change, to compare before and after a refusal."""
    with session_scope() as session:
        state = session.get(ThreadState, thread_id)
        conv = session.scalar(sa.select(Conversation).where(Conversation.thread_id == thread_id))
        return {
            "version": state.version if state else None,
            "messages": state.messages if state else None,
            "summary": state.summary if state else None,
            "token_usage": state.token_usage if state else None,
            "pressure": conv.summary_pressure_ratio if conv else None,
            "snapshots": session.scalar(sa.select(sa.func.count()).select_from(UsageSnapshotRow)),
            "tool_results": session.scalar(sa.select(sa.func.count()).select_from(ToolResult)),
        }


def history_files(root: Path | None = None) -> list[Path]:
    base = Path(root or get_settings().workdir) / "outputs" / "conversation_history"
    return sorted(base.glob("*.md")) if base.exists() else []


def audit_rows(thread_id: str = "t1") -> list[Any]:
    with session_scope() as session:
        return list_audit(session, target=service.thread_target(thread_id))


class SlowSummarizer:
    """The offline summarizer, but it calls `on_start` first (tests use it to hold the lock)."""

    name = "slow-test"
    extractive = True

    def __init__(self, on_start: Callable[[], None]) -> None:
        self.on_start = on_start
        self.inner = ExtractiveSummarizer()

    def summarize(
        self, messages: Sequence[BaseMessage], *, previous_summary: str | None = None
    ) -> str:
        self.on_start()
        return self.inner.summarize(messages, previous_summary=previous_summary)


class BrokenSummarizer:
    name = "broken-test"
    extractive = False

    def summarize(
        self, messages: Sequence[BaseMessage], *, previous_summary: str | None = None
    ) -> str:
        raise RuntimeError("provider exploded")


# --- the happy path ------------------------------------------------------------------


def test_compress_completes_and_writes_everything_of_record(db_url: str) -> None:
    seed_thread()
    result = service.compress_thread_context("t1", actor=OPERATOR, expected_version=1)

    assert result.status == "completed"
    assert result.version == 2
    assert result.compressed_messages > 0
    assert result.after_tokens < result.before_tokens
    assert result.file_path == "outputs/conversation_history/session_t1.md"
    assert (Path(get_settings().workdir) / result.file_path).is_file()
    with session_scope() as session:
        stored = load_state(session, "t1")
        conv = session.scalar(sa.select(Conversation).where(Conversation.thread_id == "t1"))
        snaps = session.scalars(sa.select(UsageSnapshotRow)).all()
        indexed = session.scalars(sa.select(ToolResult)).all()
    assert stored is not None and stored.version == 2
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
    assert audit.detail["version"] == 2


def test_compress_right_after_a_summary_is_no_op(db_url: str) -> None:
    seed_thread()
    service.compress_thread_context("t1", actor=OPERATOR)
    before = snapshot_of_store()
    again = service.compress_thread_context("t1", actor=OPERATOR)
    assert (again.status, again.reason, again.version) == ("no_op", "insufficient_history", 2)
    assert snapshot_of_store() == before
    assert [a.outcome for a in audit_rows()] == ["no_op", "completed"]


def test_too_little_history_is_no_op_and_writes_nothing(db_url: str) -> None:
    seed_thread(messages=[HumanMessage("hi"), AIMessage("hello")])
    before = snapshot_of_store()
    result = service.compress_thread_context("t1", actor=OPERATOR)
    assert (result.status, result.reason, result.version) == ("no_op", "insufficient_history", 1)
    assert snapshot_of_store() == before
    assert history_files() == []


# --- refusals ------------------------------------------------------------------------


def _active_run(session: Any) -> None:
    session.add(AgentRun(thread_id="t1", run_type="chat", status="running"))


def _interrupted_latest(session: Any) -> None:
    session.add(AgentRun(thread_id="t1", run_type="chat", status="interrupted"))


def _queued_request(session: Any) -> None:
    session.add(RunRequest(thread_id="t1", run_type="chat", status="queued", payload={}))


@pytest.mark.parametrize(
    ("make_busy", "reason"),
    [(_active_run, "running"), (_interrupted_latest, "interrupted"), (_queued_request, "queued")],
)
def test_busy_thread_is_refused_and_unchanged(
    db_url: str, make_busy: Callable[[Any], None], reason: str
) -> None:
    seed_thread()
    with session_scope() as session:
        make_busy(session)
    before = snapshot_of_store()
    with pytest.raises(ThreadBusy) as caught:
        service.compress_thread_context("t1", actor=OPERATOR)
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
    assert service.compress_thread_context("t1", actor=OPERATOR).status == "completed"


@pytest.mark.parametrize("case", ["unknown", "deleted", "other_user"])
def test_not_found_threads(db_url: str, case: str) -> None:
    seed_thread(status="deleted" if case == "deleted" else "active")
    thread_id = "nope" if case == "unknown" else "t1"
    before = snapshot_of_store()
    with pytest.raises(ThreadNotFound) as caught:
        service.compress_thread_context(
            thread_id, actor=OPERATOR, user_id="u2" if case == "other_user" else None
        )
    assert caught.value.status_code == 404
    assert snapshot_of_store() == before
    (audit,) = audit_rows(thread_id)
    assert (audit.outcome, audit.detail["code"]) == ("refused", "thread_not_found")


def test_unknown_agent_is_404(db_url: str) -> None:
    seed_thread(create_agent=False, agent_slug="ghost")
    with pytest.raises(AgentNotFound) as caught:
        service.compress_thread_context("t1", actor=OPERATOR)
    assert caught.value.status_code == 404
    assert audit_rows()[0].detail["code"] == "agent_not_found"


def test_agent_without_capability_is_422(db_url: str) -> None:
    seed_thread(capabilities=["web_search"])
    before = snapshot_of_store()
    with pytest.raises(CompressionUnsupported) as caught:
        service.compress_thread_context("t1", actor=OPERATOR)
    assert caught.value.status_code == 422
    assert snapshot_of_store() == before
    assert audit_rows()[0].detail["code"] == "compression_unsupported"


def test_stale_expected_version_is_409_and_summarizes_nothing(db_url: str) -> None:
    seed_thread()
    before = snapshot_of_store()
    with pytest.raises(StaleState) as caught:
        service.compress_thread_context("t1", actor=OPERATOR, expected_version=7)
    assert caught.value.status_code == 409
    assert snapshot_of_store() == before
    assert history_files() == []


def test_viewer_is_refused_with_an_audit_row(db_url: str) -> None:
    seed_thread()
    before = snapshot_of_store()
    with pytest.raises(Forbidden) as caught:
        service.compress_thread_context("t1", actor=VIEWER)
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
        service.compress_thread_context(
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
        service.compress_thread_context("t1", actor=OPERATOR, summarizer=BrokenSummarizer())
    assert snapshot_of_store() == before
    assert history_files() == []
    offloaded = Path(get_settings().workdir) / "outputs" / "large_tool_results"
    assert not offloaded.exists() or list(offloaded.iterdir()) == []
    (audit,) = audit_rows()
    assert (audit.outcome, audit.detail["code"]) == ("failed", "summarizer_failed")
    # and the thread can still be compressed afterwards
    assert service.compress_thread_context("t1", actor=OPERATOR).version == 2


# --- the lock ------------------------------------------------------------------------


def _wait_for_lock_waiter(timeout: float = 10.0) -> None:
    """PostgreSQL: until some backend waits for a row lock. SQLite: a short pause."""
    settings = get_settings()
    if is_sqlite(settings.database_url):
        time.sleep(0.4)
        return
    engine = sa.create_engine(settings.database_url)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                waiting = conn.execute(
                    sa.text("SELECT count(*) FROM pg_locks WHERE NOT granted")
                ).scalar()
            if waiting:
                return
            time.sleep(0.02)
        raise AssertionError("the intake never started waiting for the row lock")
    finally:
        engine.dispose()


def test_intake_during_a_compress_blocks_then_lands_after_it(db_url: str) -> None:
    seed_thread()
    intake_started = threading.Event()
    intake_done = threading.Event()
    observed: dict[str, Any] = {}
    errors: list[BaseException] = []

    def intake() -> None:
        try:
            intake_started.set()
            observed["request"] = service.enqueue_request("t1", content="one more question")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            intake_done.set()

    worker = threading.Thread(target=intake)

    def while_summarizing() -> None:
        worker.start()
        intake_started.wait(5)
        _wait_for_lock_waiter()
        observed["intake_done_during_summary"] = intake_done.is_set()

    result = service.compress_thread_context(
        "t1", actor=OPERATOR, summarizer=SlowSummarizer(while_summarizing)
    )
    worker.join(15)
    assert not errors, errors
    assert observed["intake_done_during_summary"] is False  # it blocked on the lock
    assert result.status == "completed" and result.version == 2
    with session_scope() as session:
        request = session.scalars(sa.select(RunRequest)).one()
        snap = session.scalars(sa.select(UsageSnapshotRow)).one()
        chat = session.scalars(sa.select(ChatMessage)).all()
        stored = load_state(session, "t1")
    assert request.status == "queued" and request.payload["content"] == "one more question"
    assert request.created_at >= snap.measured_at  # it landed after the compress committed
    assert [c.content for c in chat] == ["one more question"]  # nothing lost
    assert stored is not None and stored.version == 2 and stored.state.summary is not None


def test_two_compresses_at_once_write_exactly_one_summary(db_url: str) -> None:
    seed_thread()
    barrier = threading.Barrier(2)
    outcomes: list[Any] = []

    def compress() -> None:
        barrier.wait(5)
        try:
            outcomes.append(
                service.compress_thread_context(
                    "t1",
                    actor=OPERATOR,
                    expected_version=1,
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
    with session_scope() as session:
        assert session.scalar(sa.select(ThreadState.version)) == 2
        assert session.scalar(sa.select(sa.func.count()).select_from(UsageSnapshotRow)) == 1
    assert sorted(a.outcome for a in audit_rows()) == ["completed", "refused"]


def test_lock_timeout_is_thread_busy_not_a_hang(db_url: str) -> None:
    seed_thread()
    settings = Settings(lock_timeout_seconds=0.3)
    with service.thread_lock("t1") as (_session, conv):
        assert conv is not None
        with pytest.raises(ThreadBusy) as caught:
            service.compress_thread_context("t1", actor=OPERATOR, settings=settings)
        with pytest.raises(ThreadBusy):
            service.enqueue_request("t1", content="x", settings=settings)
    assert caught.value.detail["reason"] == "locked"
    assert wait_for_pending_audit(30)  # SQLite: written once the holder let go
    assert audit_rows()[0].detail["code"] == "thread_busy"
    assert snapshot_of_store()["version"] == 1


# --- preview ---------------------------------------------------------------------------


def test_preview_is_read_only_and_close_to_the_real_thing(db_url: str) -> None:
    seed_thread()
    before = snapshot_of_store()
    preview = service.preview_compression("t1")
    assert snapshot_of_store() == before
    assert history_files() == []
    assert (preview.version, preview.capable, preview.busy_reason, preview.reason) == (
        1,
        True,
        None,
        None,
    )
    result = service.compress_thread_context("t1", actor=OPERATOR)
    assert preview.messages_to_summarize == result.compressed_messages
    assert preview.estimated_before_tokens == result.before_tokens
    assert preview.estimated_after_tokens < preview.estimated_before_tokens
    after_preview = service.preview_compression("t1")
    assert (after_preview.messages_to_summarize, after_preview.reason) == (
        0,
        "insufficient_history",
    )


def test_preview_reports_busy_and_incapable(db_url: str) -> None:
    seed_thread(capabilities=[])
    with session_scope() as session:
        _queued_request(session)
    preview = service.preview_compression("t1")
    assert (preview.capable, preview.busy_reason, preview.reason) == (
        False,
        "queued",
        "compression_unsupported",
    )
    with pytest.raises(ThreadNotFound):
        service.preview_compression("t1", user_id="someone-else")


# --- intake and runs ----------------------------------------------------------------------


def test_request_fifo_and_run_lifecycle(db_url: str) -> None:
    seed_thread()
    first = service.enqueue_request("t1", content="first")
    second = service.enqueue_request("t1", content="second")
    run = service.dispatch_next_request("t1")
    assert run is not None and run.request_id == first.id and run.payload["content"] == "first"
    assert service.dispatch_next_request("t1") is None  # one run at a time
    with pytest.raises(ThreadBusy):
        service.compress_thread_context("t1", actor=OPERATOR)
    service.finish_run(run.id, status="completed")
    with pytest.raises(InvalidInput):
        service.finish_run(run.id, status="completed")
    with pytest.raises(InvalidInput):
        service.finish_run(run.id, status="running")
    run2 = service.dispatch_next_request("t1")
    assert run2 is not None and run2.request_id == second.id
    service.finish_run(run2.id, status="interrupted")
    with pytest.raises(ThreadBusy) as caught:
        service.compress_thread_context("t1", actor=OPERATOR)
    assert caught.value.detail["reason"] == "interrupted"
    resume = service.start_run("t1", run_type="resume")
    service.finish_run(resume.id, status="completed")
    assert service.compress_thread_context("t1", actor=OPERATOR).status == "completed"
    with pytest.raises(ThreadNotFound):
        service.enqueue_request("missing", content="x")


def test_cancelled_request_frees_the_thread(db_url: str) -> None:
    seed_thread()
    request = service.enqueue_request("t1", content="never mind")
    with pytest.raises(ThreadBusy):
        service.compress_thread_context("t1", actor=OPERATOR)
    assert service.cancel_request(request.id).status == "cancelled"
    with pytest.raises(InvalidInput):
        service.cancel_request(request.id)
    assert service.dispatch_next_request("t1") is None
    assert service.compress_thread_context("t1", actor=OPERATOR).status == "completed"


def test_record_model_call_is_atomic_and_version_checked(db_url: str) -> None:
    seed_thread()
    with session_scope() as session:
        stored = load_state(session, "t1")
    assert stored is not None
    grown = ThreadContextState("t1", [*stored.state.messages, HumanMessage("q"), AIMessage("a")])
    usage = {
        "llm_input_tokens": 7000,
        "next_llm_input_tokens": 7100,
        "context_window": 10000,
        "summary_trigger_tokens": 8192,
        "summary_active": False,
    }
    version = service.record_model_call(
        "t1",
        state=grown,
        expected_version=1,
        usage=usage,
        chat_messages=[("user", "q"), ("assistant", "a")],
    )
    assert version == 2
    before = snapshot_of_store()
    with pytest.raises(StaleState):
        service.record_model_call(
            "t1", state=grown, expected_version=1, usage=usage, chat_messages=[("user", "lost?")]
        )
    assert snapshot_of_store() == before
    with session_scope() as session:
        conv = session.scalar(sa.select(Conversation))
        chat = session.scalars(sa.select(ChatMessage.content).order_by(ChatMessage.sequence)).all()
    assert conv.summary_pressure_ratio == round(7100 / 8192, 4)
    assert conv.context_usage_ratio == 0.7
    assert chat == ["q", "a"]
    assert before["snapshots"] == 1


# --- import ------------------------------------------------------------------------------


def _payload(messages: list[BaseMessage] | None = None) -> dict[str, Any]:
    from langchain_core.messages import messages_to_dict

    return {
        "thread_id": "imp-1",
        "user_id": "alice_chen",
        "title": "Imported",
        "agent": {
            "slug": "research",
            "name": "Research",
            "capabilities": CAPABLE,
            "context_window": 64000,
            "summary_threshold": 20,
            "summary_keep_messages": 6,
            "summary_tool_result_token_limit": 300,
        },
        "messages": messages_to_dict(messages if messages is not None else conversation(3)),
    }


def test_import_twice_replaces_never_duplicates(db_url: str) -> None:
    first = service.import_thread(_payload(), actor=OPERATOR)
    assert (first.created, first.version, first.messages) == (True, 1, 12)
    second = service.import_thread(_payload(conversation(4)), actor=OPERATOR)
    assert (second.created, second.version, second.messages) == (False, 2, 16)
    with session_scope() as session:
        assert session.scalar(sa.select(sa.func.count()).select_from(Conversation)) == 1
        assert session.scalar(sa.select(sa.func.count()).select_from(ChatMessage)) == 16
        conv = session.scalar(sa.select(Conversation))
        stored = load_state(session, "imp-1")
    assert stored is not None and len(stored.state.messages) == 16
    assert conv.summary_trigger_tokens == 20 * 1024 and conv.next_llm_input_tokens > 0
    assert [a.action for a in audit_rows("imp-1")] == ["import_thread", "import_thread"]


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda p: p.pop("thread_id"), "thread_id"),
        (lambda p: p.update(agent="x"), "agent"),
        (lambda p: p["agent"].update(summary_threshold=-1), "summary_threshold"),
        (lambda p: p.update(messages=[{"type": "nonsense"}]), "messages[0]"),
        (lambda p: p.update(messages="no"), "messages"),
    ],
)
def test_import_rejects_bad_input_with_one_line(
    db_url: str, mutate: Callable[[dict[str, Any]], Any], needle: str
) -> None:
    payload = _payload()
    mutate(payload)
    with pytest.raises(InvalidInput) as caught:
        service.import_thread(payload, actor=OPERATOR)
    assert needle in caught.value.message and "\n" not in caught.value.message
    with session_scope() as session:
        assert session.scalar(sa.select(sa.func.count()).select_from(Conversation)) == 0
    refused = audit_rows("imp-1") if "thread_id" in payload else []
    assert [(a.outcome, a.detail) for a in refused] == (
        [("refused", {"code": "invalid_input"})] if "thread_id" in payload else []
    )


def test_import_refuses_a_viewer(db_url: str) -> None:
    with pytest.raises(Forbidden):
        service.import_thread(_payload(), actor=VIEWER)
    assert [(a.actor, a.outcome, a.detail) for a in audit_rows("imp-1")] == [
        (VIEWER.id, "refused", {"code": "forbidden"})
    ]
