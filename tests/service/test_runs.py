"""Intake and the run lifecycle (yuxi_dash.service.runs), on SQLite and real PostgreSQL."""

from __future__ import annotations

import pytest

from tests.service.builders import OPERATOR, seed_thread
from yuxi_dash import service
from yuxi_dash.errors import InvalidInput, ThreadBusy, ThreadNotFound


def test_request_fifo_and_run_lifecycle(db_url: str) -> None:
    seed_thread()
    first = service.enqueue_request("t1", content="first")
    second = service.enqueue_request("t1", content="second")
    run = service.dispatch_next_request("t1")
    assert run is not None and run.request_id == first.id and run.payload["content"] == "first"
    assert service.dispatch_next_request("t1") is None  # one run at a time
    with pytest.raises(ThreadBusy):
        service.compress_own_thread("t1", actor=OPERATOR)
    service.finish_run(run.id, status="completed")
    with pytest.raises(InvalidInput):
        service.finish_run(run.id, status="completed")
    with pytest.raises(InvalidInput):
        service.finish_run(run.id, status="running")
    run2 = service.dispatch_next_request("t1")
    assert run2 is not None and run2.request_id == second.id
    service.finish_run(run2.id, status="interrupted")
    with pytest.raises(ThreadBusy) as caught:
        service.compress_own_thread("t1", actor=OPERATOR)
    assert caught.value.detail["reason"] == "interrupted"
    resume = service.start_run("t1", run_type="resume")
    service.finish_run(resume.id, status="completed")
    assert service.compress_own_thread("t1", actor=OPERATOR).status == "completed"
    with pytest.raises(ThreadNotFound):
        service.enqueue_request("missing", content="x")


def test_cancelled_request_frees_the_thread(db_url: str) -> None:
    seed_thread()
    request = service.enqueue_request("t1", content="never mind")
    with pytest.raises(ThreadBusy):
        service.compress_own_thread("t1", actor=OPERATOR)
    assert service.cancel_request(request.id).status == "cancelled"
    with pytest.raises(InvalidInput):
        service.cancel_request(request.id)
    assert service.dispatch_next_request("t1") is None
    assert service.compress_own_thread("t1", actor=OPERATOR).status == "completed"
