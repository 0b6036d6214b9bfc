"""Compress phase 3 under the lock (yuxi_dash.service.compress): all of it lands or none does.

A lock holder whose backend is ended writes nothing and intake lands; a compress
killed right after its checkpoint write leaves its lease, and once that has run out
the next compress catches the thread up; files of an attempt that never committed
are swept or adopted, and the audit says so.
Real PostgreSQL and SQLite, LangGraph's real savers, a real `kill -9`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from langchain_core.messages import HumanMessage

from tests.service.builders import OPERATOR, audit_rows, seed_thread, snapshot_of_store
from yuxi_dash import service
from yuxi_dash.access.audit import wait_for_pending_audit
from yuxi_dash.errors import StaleState, StoreUnavailable
from yuxi_dash.files.workdir import TOOL_RESULTS_DIR
from yuxi_dash.service.compress import (
    STEP_CHECKPOINT_WRITTEN,
    STEP_FILES_WRITTEN,
    STEP_PROJECTED,
)
from yuxi_dash.service.locking import compress_in_progress
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import is_sqlite, session_scope
from yuxi_dash.store.models import Conversation, RunRequest, ToolResult, utcnow
from yuxi_dash.store.thread_store import load_state, write_state

REPO = Path(__file__).resolve().parents[2]


def _result_files() -> list[str]:
    base = Path(get_settings().workdir) / TOOL_RESULTS_DIR
    if not base.exists():
        return []
    return sorted(f"{TOOL_RESULTS_DIR}/{path.name}" for path in base.iterdir())


def _indexed_paths() -> set[str]:
    with session_scope() as session:
        return set(session.scalars(sa.select(ToolResult.path)))


def _row() -> Conversation:
    with session_scope() as session:
        conv = session.scalar(sa.select(Conversation).where(Conversation.thread_id == "t1"))
        assert conv is not None
        session.expunge(conv)
        return conv


def _expire_left_lease() -> None:
    """The killed attempt's lease is there and live; then its time passes (moved to the past)."""
    with session_scope() as session:
        conv = session.scalar(sa.select(Conversation).where(Conversation.thread_id == "t1"))
        assert conv is not None and compress_in_progress(conv)
        conv.compress_lease_until = utcnow() - timedelta(seconds=1)


def _terminate_lock_holder(url: str) -> int:
    """pg_terminate_backend on every other backend holding a row lock on `conversations`."""
    conninfo = sa.engine.make_url(url).set(drivername="postgresql").render_as_string(False)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(l.pid) FROM pg_locks l "
            "JOIN pg_class c ON c.oid = l.relation "
            "WHERE c.relname = 'conversations' AND l.mode = 'RowShareLock' "
            "AND l.pid <> pg_backend_pid()"
        ).fetchall()
    return sum(1 for (ended,) in rows if ended)


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_lock_holder_ended_in_phase_3_writes_nothing_and_intake_lands(db_url: str) -> None:
    seeded = seed_thread()
    before = snapshot_of_store()
    observed: dict[str, Any] = {}

    def at_step(step: str) -> None:
        if step != STEP_CHECKPOINT_WRITTEN:
            return
        observed["files"] = _result_files()
        observed["ended"] = _terminate_lock_holder(db_url)
        observed["request"] = service.enqueue_request(
            "t1", content="one more question", settings=Settings(lock_timeout_seconds=5)
        )

    with pytest.raises(StoreUnavailable):
        service.compress_own_thread("t1", actor=OPERATOR, on_step=at_step)

    assert observed["ended"] == 1 and observed["request"] is not None  # intake took the lock
    assert observed["files"], "the attempt had written its offloaded files"
    stored = load_state("t1")
    assert stored is not None and stored.checkpoint_id == seeded  # no summary checkpoint landed
    assert stored.state.summary is None
    assert snapshot_of_store() == before  # no snapshot, no index row, the row unchanged
    with session_scope() as session:
        request = session.scalars(sa.select(RunRequest)).one()
    assert request.status == "queued"
    assert _result_files() == []  # what the attempt created is swept
    assert wait_for_pending_audit(30)
    (audit,) = audit_rows()
    assert (audit.outcome, audit.detail["code"]) == ("failed", "store_unavailable")
    assert sorted(audit.detail["swept_files"]) == observed["files"]


def test_write_refused_after_the_files_sweeps_them_and_says_so(db_url: str) -> None:
    """A checkpoint written outside the lock (an agent's own saver) after the files: 409, swept."""
    seed_thread()

    def at_step(step: str) -> None:
        if step != STEP_FILES_WRITTEN:
            return
        stored = load_state("t1")
        assert stored is not None
        write_state(
            "t1",
            {"messages": [HumanMessage("a model call lands")]},
            expected_checkpoint_id=stored.checkpoint_id,
        )

    with pytest.raises(StaleState):
        service.compress_own_thread("t1", actor=OPERATOR, on_step=at_step)
    assert _result_files() == []
    assert wait_for_pending_audit(30)
    (audit,) = audit_rows()
    assert (audit.outcome, audit.detail["code"]) == ("refused", "stale_state")
    assert audit.detail["swept_files"]
    assert all(path.startswith(TOOL_RESULTS_DIR) for path in audit.detail["swept_files"])


def test_next_compress_catches_the_row_up_and_says_so(db_url: str) -> None:
    seeded = seed_thread()
    stored = load_state("t1")
    assert stored is not None
    outside = write_state(  # a checkpoint the row never saw (a crash before its projection)
        "t1", {"messages": [HumanMessage("one more")]}, expected_checkpoint_id=seeded
    )
    assert _row().checkpoint_id == seeded
    result = service.compress_own_thread("t1", actor=OPERATOR)
    assert result.status == "completed"
    assert _row().checkpoint_id == result.checkpoint_id
    assert wait_for_pending_audit(30)
    (audit,) = audit_rows()
    assert audit.detail["caught_up"]["from"] == seeded
    assert audit.detail["caught_up"]["to"] == outside.checkpoint_id


_CHILD = """
import os, signal, sys
from tests.service.builders import OPERATOR
from yuxi_dash import service

def at_step(step):
    if step == sys.argv[1]:
        os.kill(os.getpid(), signal.SIGKILL)

service.compress_own_thread("t1", actor=OPERATOR, on_step=at_step)
"""


@pytest.mark.parametrize("step", [STEP_CHECKPOINT_WRITTEN, STEP_PROJECTED])
def test_kill_9_after_the_checkpoint_write_is_repaired_by_the_next_compress(
    db_url: str, step: str
) -> None:
    """Killed after the checkpoint write, or after the projection and audit row too."""
    seeded = seed_thread()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, step],
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()[-2000:]
    leftovers = _result_files()
    assert leftovers and not _indexed_paths()  # the killed attempt's files, not indexed
    with session_scope() as session:
        sqlite = is_sqlite(session)
    killed_state = load_state("t1")
    assert killed_state is not None
    if sqlite:  # the checkpoints' own file committed; the row's transaction never did
        assert killed_state.checkpoint_id != seeded and _row().checkpoint_id == seeded
    else:  # one transaction: the checkpoint went with the lock
        assert killed_state.checkpoint_id == seeded and killed_state.state.summary is None

    _expire_left_lease()
    again = service.compress_own_thread("t1", actor=OPERATOR)

    stored = load_state("t1")
    assert stored is not None and stored.state.summary is not None
    row = _row()
    assert row.checkpoint_id == stored.checkpoint_id == again.checkpoint_id
    assert row.next_llm_input_tokens == stored.token_usage["next_llm_input_tokens"]
    assert row.summary_active is True
    assert set(_result_files()) == _indexed_paths()  # no file without its row, nor the reverse
    assert wait_for_pending_audit(30)
    (audit,) = audit_rows()  # the killed attempt left none
    if sqlite:
        assert (audit.outcome, audit.detail["reason"]) == ("no_op", "insufficient_history")
        assert audit.detail["caught_up"] == {
            "from": seeded,
            "to": stored.checkpoint_id,
            "source": "manual_compression",
        }
    else:
        assert audit.outcome == "completed"
        assert sorted(audit.detail["adopted_files"]) == leftovers
    assert audit.detail["void_lease_taken_over"] is True
    assert not compress_in_progress(_row())  # the lease went with the summary (or no-op)


def test_a_failure_after_the_checkpoint_write_never_leaves_a_row_without_its_file(
    db_url: str,
) -> None:
    """PostgreSQL: the checkpoint goes with the transaction and the files are swept.
    SQLite: the checkpoint's own file committed and names the files: they stay, and
    the next compress indexes them. Either way no index row names a missing file."""
    seeded = seed_thread()

    def at_step(step: str) -> None:
        if step == STEP_CHECKPOINT_WRITTEN:
            raise RuntimeError("the process fails here")

    with pytest.raises(RuntimeError):
        service.compress_own_thread("t1", actor=OPERATOR, on_step=at_step)
    with session_scope() as session:
        sqlite = is_sqlite(session)
    stored = load_state("t1")
    assert stored is not None
    assert (stored.checkpoint_id != seeded) == sqlite
    assert bool(_result_files()) == sqlite
    service.compress_own_thread("t1", actor=OPERATOR)
    stored = load_state("t1")
    assert stored is not None and _row().checkpoint_id == stored.checkpoint_id
    indexed = _indexed_paths()
    assert indexed and set(_result_files()) == indexed
