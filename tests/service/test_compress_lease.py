"""The compress lease (yuxi_dash.service.compress): one summary per thread at a time.

Phase 1 takes a lease on the thread under the row lock; another compress of
that thread is 409 thread_busy at once and calls no model; phase 3 writes only
while the lease is its own and clears it; every other ending clears it too. A
lease past its time (a killed process) is void and taken over. Intake never
looks at the lease. SQLite and real PostgreSQL.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage

from tests.service.builders import (
    OPERATOR,
    BrokenSummarizer,
    SlowSummarizer,
    audit_rows,
    history_files,
    seed_thread,
    snapshot_of_store,
)
from yuxi_dash import service
from yuxi_dash.access.audit import wait_for_pending_audit
from yuxi_dash.compression.summarizers import SUMMARIZER_MAX_RETRIES
from yuxi_dash.errors import StaleState, SummarizerFailed, ThreadBusy
from yuxi_dash.service.locking import COMPRESS_LEASE_MARGIN_SECONDS
from yuxi_dash.settings import Settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Conversation, RunRequest, utcnow
from yuxi_dash.store.thread_store import load_state, write_state

KILLED_LEASE = "0123456789abcdef0123456789abcdef"  # what a killed compress leaves behind


def _lease() -> tuple[str | None, datetime | None]:
    with session_scope() as session:
        conv = session.scalar(sa.select(Conversation).where(Conversation.thread_id == "t1"))
        assert conv is not None
        return conv.compress_lease_id, conv.compress_lease_until


def _set_lease(lease_id: str, until: datetime) -> None:
    with session_scope() as session:
        conv = session.scalar(sa.select(Conversation).where(Conversation.thread_id == "t1"))
        assert conv is not None
        conv.compress_lease_id, conv.compress_lease_until = lease_id, until


class CountingSummarizer(SlowSummarizer):
    """The offline summarizer, counting its calls."""

    def __init__(self) -> None:
        self.calls: list[int] = []
        super().__init__(lambda: self.calls.append(1))


def test_a_compress_in_progress_refuses_another_at_once_and_intake_is_not_blocked(
    db_url: str,
) -> None:
    seed_thread()
    second = CountingSummarizer()
    observed: dict[str, Any] = {}
    settings = Settings(summarizer_timeout_seconds=7)

    def while_summarizing() -> None:  # inside the first compress's summarizer call
        observed["lease"] = _lease()
        observed["asked_at"] = utcnow()
        observed["preview"] = service.preview_own_thread("t1")
        try:
            service.compress_own_thread("t1", actor=OPERATOR, summarizer=second)
        except ThreadBusy as exc:
            observed["refused"] = exc

    first = service.compress_own_thread(
        "t1", actor=OPERATOR, settings=settings, summarizer=SlowSummarizer(while_summarizing)
    )
    assert first.status == "completed"
    refused = observed["refused"]
    assert (refused.code, refused.status_code, refused.detail["reason"]) == (
        "thread_busy",
        409,
        "compressing",
    )
    assert "already in progress" in refused.message
    assert second.calls == []  # refused before any model call
    lease_id, until = observed["lease"]
    assert lease_id is not None and len(lease_id) == 32
    # every attempt the model client may make (a timeout each), plus a margin
    left = (until - observed["asked_at"]).total_seconds()
    attempts = 1 + SUMMARIZER_MAX_RETRIES
    assert 7 * attempts < left <= 7 * attempts + COMPRESS_LEASE_MARGIN_SECONDS
    assert (observed["preview"].busy_reason, observed["preview"].reason) == (
        "compressing",
        "thread_busy",
    )
    assert _lease() == (None, None)  # cleared with the summary
    assert wait_for_pending_audit(30)
    rows = sorted((a.outcome, a.detail.get("code")) for a in audit_rows())
    assert rows == [("completed", None), ("refused", "thread_busy")]
    # intake does not look at the lease: it lands while one is live
    _set_lease(KILLED_LEASE, utcnow() + timedelta(minutes=5))
    assert service.enqueue_request("t1", content="a question") is not None
    with session_scope() as session:
        assert session.scalar(sa.select(sa.func.count()).select_from(RunRequest)) == 1


def test_a_killed_compress_blocks_until_its_lease_runs_out_then_is_taken_over(
    db_url: str,
) -> None:
    seeded = seed_thread()
    _set_lease(KILLED_LEASE, utcnow() + timedelta(minutes=2))
    counting = CountingSummarizer()
    before = snapshot_of_store()
    with pytest.raises(ThreadBusy):
        service.compress_own_thread("t1", actor=OPERATOR, summarizer=counting)
    assert counting.calls == [] and snapshot_of_store() == before
    assert _lease()[0] == KILLED_LEASE  # a refusal leaves the other's lease alone

    _set_lease(KILLED_LEASE, utcnow() - timedelta(seconds=1))  # its time has passed
    result = service.compress_own_thread("t1", actor=OPERATOR, summarizer=counting)
    assert result.status == "completed" and result.checkpoint_id != seeded
    assert counting.calls == [1]
    assert _lease() == (None, None)
    assert wait_for_pending_audit(30)
    completed = [a for a in audit_rows() if a.outcome == "completed"]
    assert completed[0].detail["void_lease_taken_over"] is True


def test_a_summarizer_failure_clears_the_lease_and_the_next_compress_runs_at_once(
    db_url: str,
) -> None:
    seed_thread()
    before = snapshot_of_store()
    with pytest.raises(SummarizerFailed):
        service.compress_own_thread("t1", actor=OPERATOR, summarizer=BrokenSummarizer())
    assert _lease() == (None, None)
    assert snapshot_of_store() == before and history_files() == []
    assert service.compress_own_thread("t1", actor=OPERATOR).status == "completed"
    assert wait_for_pending_audit(30)
    assert sorted(a.outcome for a in audit_rows()) == ["completed", "failed"]
    assert all("lease_left" not in a.detail for a in audit_rows())


def test_a_no_op_and_a_stale_compress_clear_their_lease(db_url: str) -> None:
    seed_thread()
    assert service.compress_own_thread("t1", actor=OPERATOR).status == "completed"
    assert service.compress_own_thread("t1", actor=OPERATOR).status == "no_op"
    assert _lease() == (None, None)

    def a_model_call_lands() -> None:
        stored = load_state("t1")
        assert stored is not None
        write_state(
            "t1", {"messages": [AIMessage("new")]}, expected_checkpoint_id=stored.checkpoint_id
        )

    for _ in range(3):  # enough new messages to summarize again
        a_model_call_lands()
    with pytest.raises(StaleState):
        service.compress_own_thread(
            "t1", actor=OPERATOR, summarizer=SlowSummarizer(a_model_call_lands)
        )
    assert _lease() == (None, None)


def test_phase_3_writes_only_under_its_own_lease_and_leaves_another_alone(
    db_url: str,
) -> None:
    """The lease ran out during the summary and another compress took it: nothing written."""
    seeded = seed_thread()
    other_until = utcnow() + timedelta(minutes=5)

    def taken_over() -> None:
        _set_lease("f" * 32, other_until)

    before = snapshot_of_store()
    with pytest.raises(ThreadBusy) as caught:
        service.compress_own_thread("t1", actor=OPERATOR, summarizer=SlowSummarizer(taken_over))
    assert caught.value.detail["reason"] == "compressing"
    assert snapshot_of_store() == before and history_files() == []
    stored = load_state("t1")
    assert stored is not None and stored.checkpoint_id == seeded
    lease_id, until = _lease()
    assert lease_id == "f" * 32 and until == other_until  # not ours to clear
    assert wait_for_pending_audit(30)
    (audit,) = audit_rows()
    assert (audit.outcome, audit.detail["code"]) == ("refused", "thread_busy")
