"""Offloaded files of an attempt that never committed (yuxi_dash.service.unindexed_files)."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from tests.service.builders import seed_thread
from yuxi_dash.compression.compaction import plan_offload
from yuxi_dash.files.workdir import Workdir
from yuxi_dash.service.unindexed_files import created_files, sweep_created, unindexed
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AgentRun, ToolResult
from yuxi_dash.store.thread_store import load_state


def _workdir() -> Workdir:
    return Workdir(get_settings().workdir)


def test_created_files_tells_new_from_present(db_url: str) -> None:
    seed_thread()
    stored = load_state("t1")
    assert stored is not None
    workdir = _workdir()
    _planned, pending = plan_offload(stored.state.messages, workdir, tool_result_token_limit=100)
    assert len(pending) >= 2
    workdir.save_tool_result(pending[0].tool_name, pending[0].text)
    missing, present = created_files(workdir, pending)
    assert present == [pending[0].saved.path]
    assert missing == [p.saved.path for p in pending[1:]]


def test_sweep_removes_only_unindexed_files_and_waits_for_a_running_run(db_url: str) -> None:
    seed_thread()
    seed_thread("t2", create_agent=False)
    workdir = _workdir()
    mine = workdir.save_tool_result("run_command", "mine " * 500).path
    named = workdir.save_tool_result("run_command", "named elsewhere " * 500).path
    with session_scope() as session:  # another thread's committed row names the second file
        seed = ToolResult(
            thread_id="t2",
            tool_name="run_command",
            sha256="0" * 64,
            path=named,
            chars=1,
            approx_tokens=1,
        )
        session.add(seed)
        assert unindexed(session, [mine, named]) == [mine]
        run = AgentRun(thread_id="t1", run_type="chat", status="running")
        session.add(run)
    # a run is running: its agent may be offloading the same result, so nothing goes
    assert sweep_created("t1", [mine, named], workdir=workdir, settings=get_settings()) == {
        "left_files": [mine]
    }
    assert (Path(workdir.root) / mine).is_file()
    with session_scope() as session:
        session.execute(sa.update(AgentRun).values(status="completed"))
    assert sweep_created("t1", [mine, named], workdir=workdir, settings=get_settings()) == {
        "swept_files": [mine]
    }
    assert not (Path(workdir.root) / mine).exists()
    assert (Path(workdir.root) / named).is_file()  # indexed: never a leftover
