"""Compress against intake on real PostgreSQL: nothing lost, one summary each, no orphan section.

The soak runs many short trials in which a compress, a second compress and the
platform's intake start in a random order on one thread; afterwards every intake
is there, each completed compress wrote exactly one summary (one checkpoint,
history section, snapshot), every attempt left one audit row and no lock is
left behind. Eight compresses of one thread at once pay for one summary: one
completes, seven are thread_busy (the lease), all eight are audited. The crash
tests stop a compress after its history section is on disk and before its commit
(a backend terminated, a process killed with SIGKILL): the section is not counted
as history, and the retry (once a killed process's lease ran out) replaces it.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import BaseMessage

from tests.service.builders import OPERATOR, conversation, history_files, seed_thread
from yuxi_dash import service, sources
from yuxi_dash.access.audit import wait_for_pending_audit
from yuxi_dash.compression import ExtractiveSummarizer, committed_history
from yuxi_dash.errors import StaleState, ThreadBusy
from yuxi_dash.files.workdir import Workdir
from yuxi_dash.service.locking import compress_in_progress
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import (
    ChatMessage,
    Conversation,
    RunRequest,
    UsageSnapshotRow,
    utcnow,
)
from yuxi_dash.store.queries import list_audit
from yuxi_dash.store.thread_store import load_state, state_store

POSTGRES = pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
TRIALS = 60


class JitterSummarizer:
    """The offline summarizer after a random pause of up to 60 ms."""

    name = "jitter-test"
    extractive = True

    def __init__(self, rng: random.Random) -> None:
        self.pause = rng.uniform(0, 0.06)
        self.inner = ExtractiveSummarizer()

    def summarize(
        self, messages: Sequence[BaseMessage], *, previous_summary: str | None = None
    ) -> str:
        time.sleep(self.pause)
        return self.inner.summarize(messages, previous_summary=previous_summary)


def _run_trial(thread_id: str, rng: random.Random) -> dict[str, Any]:
    seed_thread(thread_id, messages=conversation(8, tool_chars=2000))
    outcomes: list[Any] = []
    intake: list[Any] = []
    lock = threading.Lock()

    def compress() -> None:
        time.sleep(rng.uniform(0, 0.05))
        try:
            result: Any = sources.compress_thread_context(
                thread_id, actor=OPERATOR, summarizer=JitterSummarizer(rng)
            )
        except (ThreadBusy, StaleState) as exc:
            result = exc
        with lock:
            outcomes.append(result)

    def enqueue() -> None:
        time.sleep(rng.uniform(0, 0.08))
        started = time.monotonic()
        request = service.enqueue_request(thread_id, content=f"question for {thread_id}")
        with lock:
            intake.append((request, time.monotonic() - started))

    workers = [threading.Thread(target=compress), threading.Thread(target=compress)]
    workers.append(threading.Thread(target=enqueue))
    rng.shuffle(workers)
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert not any(worker.is_alive() for worker in workers), "a trial hung"
    return {"outcomes": outcomes, "intake": intake}


def _section_count(thread_id: str) -> int:
    path = Path(get_settings().workdir) / "outputs/conversation_history" / f"session_{thread_id}.md"
    return path.read_text().count("## Summarized at") if path.exists() else 0


@POSTGRES
@pytest.mark.serial  # measures intake latency (< 2 s): needs the machine to itself
def test_compress_and_intake_soak_loses_nothing_and_summarizes_once(db_url: str) -> None:
    rng = random.Random(8)
    trials = {f"soak{i}": _run_trial(f"soak{i}", rng) for i in range(TRIALS)}
    assert wait_for_pending_audit(30)
    completed_total = 0
    with session_scope() as session:
        store = state_store()
        for thread_id, trial in trials.items():
            completed = [o for o in trial["outcomes"] if isinstance(o, service.CompressResult)]
            completed = [o for o in completed if o.status == "completed"]
            completed_total += len(completed)
            checkpoints = list(store.history(thread_id))
            # one checkpoint, one history section and one snapshot per completed compress
            assert len(checkpoints) == 1 + len(completed), thread_id
            assert _section_count(thread_id) == len(completed), thread_id
            snapshots = session.scalar(
                sa.select(sa.func.count())
                .select_from(UsageSnapshotRow)
                .where(UsageSnapshotRow.thread_id == thread_id)
            )
            assert snapshots == len(completed), thread_id
            # the intake is never lost: its request and its chat row are there
            requests = session.scalars(
                sa.select(RunRequest).where(RunRequest.thread_id == thread_id)
            ).all()
            chat = session.scalars(
                sa.select(ChatMessage.content).where(ChatMessage.thread_id == thread_id)
            ).all()
            assert [r.status for r in requests] == ["queued"], thread_id
            assert chat == [f"question for {thread_id}"], thread_id
            # one audit row per attempt, with the attempt's outcome
            audit = list_audit(session, target=service.thread_target(thread_id))
            assert len(audit) == 2, thread_id
            assert sorted(a.outcome for a in audit) == sorted(
                o.status if isinstance(o, service.CompressResult) else "refused"
                for o in trial["outcomes"]
            )
        # no lock is left behind: every row can be locked at once without waiting
        session.execute(sa.text("SET LOCAL lock_timeout = '100ms'"))
        session.execute(sa.text("SELECT thread_id FROM conversations FOR UPDATE NOWAIT")).all()
    # intake waited at most for a state write, never for a summary
    waits = [wait for trial in trials.values() for _request, wait in trial["intake"]]
    assert max(waits) < 2.0
    assert completed_total > 0  # the trials did race real compresses


class GateSummarizer:
    """The offline summarizer that counts its calls and holds each until `release` is set,
    so every other compress of the thread starts while one is summarizing."""

    name = "gate-test"
    extractive = True

    def __init__(self) -> None:
        self.calls = 0
        self.count_lock = threading.Lock()
        self.release = threading.Event()
        self.inner = ExtractiveSummarizer()

    def summarize(
        self, messages: Sequence[BaseMessage], *, previous_summary: str | None = None
    ) -> str:
        with self.count_lock:
            self.calls += 1
        self.release.wait(30)  # a wait, not an assertion: the test counts the calls
        return self.inner.summarize(messages, previous_summary=previous_summary)


@POSTGRES
def test_eight_compresses_of_one_thread_pay_for_one_summary(db_url: str) -> None:
    seed_thread("eight", messages=conversation(8, tool_chars=2000))
    summarizer = GateSummarizer()
    start = threading.Barrier(8)
    outcomes: list[Any] = []
    lock = threading.Lock()

    def compress() -> None:
        start.wait(10)
        try:
            result: Any = sources.compress_thread_context(
                "eight", actor=OPERATOR, summarizer=summarizer
            )
        except ThreadBusy as exc:
            result = exc
        with lock:
            outcomes.append(result)
            if sum(isinstance(o, ThreadBusy) for o in outcomes) == 7:
                summarizer.release.set()  # every other one was refused meanwhile

    workers = [threading.Thread(target=compress) for _ in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert not any(worker.is_alive() for worker in workers), "a compress hung"
    summarizer.release.set()
    assert summarizer.calls == 1  # one summary paid for
    completed = [o for o in outcomes if isinstance(o, service.CompressResult)]
    busy = [o for o in outcomes if isinstance(o, ThreadBusy)]
    assert [c.status for c in completed] == ["completed"]
    assert len(busy) == 7
    assert {(b.code, b.detail["reason"]) for b in busy} == {("thread_busy", "compressing")}
    assert _section_count("eight") == 1
    assert wait_for_pending_audit(30)
    with session_scope() as session:
        audit = list_audit(session, target=service.thread_target("eight"))
        conv = session.scalar(sa.select(Conversation).where(Conversation.thread_id == "eight"))
        assert conv is not None and conv.compress_lease_id is None  # cleared with the summary
    assert len(audit) == 8
    assert sorted((a.outcome, a.detail.get("code")) for a in audit) == [
        ("completed", None),
        *[("refused", "thread_busy")] * 7,
    ]


def _expire_left_lease(thread_id: str) -> None:
    """A killed compress's lease is there and live; then its time passes (moved to the past)."""
    with session_scope() as session:
        conv = session.scalar(sa.select(Conversation).where(Conversation.thread_id == thread_id))
        assert conv is not None and compress_in_progress(conv)
        conv.compress_lease_until = utcnow() - timedelta(seconds=1)


def _block_state_writes(seconds: int) -> None:
    """A real trigger that stalls every new checkpoint row (the state write of phase 3)."""
    with session_scope() as session:
        session.execute(
            sa.text(
                "CREATE OR REPLACE FUNCTION yuxi_test_stall() RETURNS trigger AS $$ "
                f"BEGIN PERFORM pg_sleep({int(seconds)}); RETURN NEW; END $$ LANGUAGE plpgsql"
            )
        )
        session.execute(
            sa.text(
                "CREATE TRIGGER yuxi_test_stall BEFORE INSERT ON checkpoints "
                "FOR EACH ROW EXECUTE FUNCTION yuxi_test_stall()"
            )
        )


def _unblock_state_writes() -> None:
    with session_scope() as session:
        session.execute(sa.text("DROP TRIGGER IF EXISTS yuxi_test_stall ON checkpoints"))


def _stalled_backends() -> list[int]:
    with session_scope() as session:
        return list(
            session.scalars(
                sa.text(
                    "SELECT pid FROM pg_stat_activity "
                    "WHERE wait_event = 'PgSleep' AND datname = current_database() AND pid <> pg_backend_pid()"
                )
            )
        )


def _wait_for(predicate: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


@pytest.fixture
def stalled_state_writes(db_url: str) -> Iterator[None]:
    """Cleans up after a test that stalls state writes (after seeding: `_block_state_writes`)."""
    try:
        yield
    finally:
        with session_scope() as session:
            session.execute(
                sa.text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE wait_event = 'PgSleep' AND datname = current_database() AND pid <> pg_backend_pid()"
                )
            )
        _unblock_state_writes()


def _assert_one_committed_section_after_retry(thread_id: str, seeded: str) -> None:
    """The orphan is not history; a retry replaces it; exactly one section remains."""
    workdir = Workdir(get_settings().workdir)
    stored = load_state(thread_id)
    assert stored is not None and stored.checkpoint_id == seeded and stored.state.summary is None
    assert _section_count(thread_id) == 1  # the orphan is on disk ...
    assert committed_history(stored.state, workdir) == []  # ... and is not history
    result = sources.compress_thread_context(thread_id, actor=OPERATOR)
    assert result.status == "completed" and result.checkpoint_id != seeded
    assert _section_count(thread_id) == 1  # replaced, not appended a second time
    stored = load_state(thread_id)
    assert stored is not None
    (section,) = committed_history(stored.state, workdir)
    assert f"messages 0-{stored.state.visible_start - 1} " in section.text


@POSTGRES
def test_backend_terminated_after_the_history_write_leaves_no_real_section(
    db_url: str, stalled_state_writes: None
) -> None:
    seeded = seed_thread()
    _block_state_writes(120)
    errors: list[BaseException] = []

    def compress() -> None:
        try:
            sources.compress_thread_context("t1", actor=OPERATOR)
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=compress)
    worker.start()
    _wait_for(lambda: bool(_stalled_backends()))
    assert _section_count("t1") == 1  # the history section is written before the commit
    with session_scope() as session:
        for pid in _stalled_backends():
            session.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    worker.join(30)
    assert len(errors) == 1 and not isinstance(errors[0], service.CompressResult)
    _unblock_state_writes()
    _assert_one_committed_section_after_retry("t1", seeded)
    assert wait_for_pending_audit(30)
    with session_scope() as session:
        outcomes = [a.outcome for a in list_audit(session, target=service.thread_target("t1"))]
    assert sorted(outcomes) == ["completed", "failed"]


@POSTGRES
def test_process_killed_after_the_history_write_leaves_no_real_section(
    db_url: str, stalled_state_writes: None, tmp_path: Path
) -> None:
    seeded = seed_thread()
    _block_state_writes(120)
    script = textwrap.dedent(
        """
        from yuxi_dash import sources
        from yuxi_dash.access.roles import Actor, Role
        sources.compress_thread_context("t1", actor=Actor(id="ops@example.com", role=Role.OPERATOR))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    child = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=tmp_path)
    try:
        _wait_for(lambda: bool(_stalled_backends()), timeout=60)
        assert _section_count("t1") == 1
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    with session_scope() as session:  # the server notices the dead client only later
        for pid in _stalled_backends():
            session.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    _unblock_state_writes()
    with pytest.raises(ThreadBusy):  # the killed compress's lease: live until its time
        sources.compress_thread_context("t1", actor=OPERATOR)
    _expire_left_lease("t1")
    _assert_one_committed_section_after_retry("t1", seeded)
    assert len(history_files()) == 1
