"""Symlinks in the workdir are never followed: not by reads, not by compress writes.

Each test runs on SQLite and on the real PostgreSQL server (the `db_url` fixture),
through the real service functions and real index rows.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections import Counter
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from yuxi_dash import service, sources
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.compression import ThreadContextState
from yuxi_dash.compression.engine import history_session_id
from yuxi_dash.errors import PathRefused, YuxiDashError
from yuxi_dash.files.workdir import TOOL_RESULTS_DIR, Workdir, history_relpath
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import ToolResult
from yuxi_dash.store.thread_store import load_state, write_state
from yuxi_dash.tool_results.index import read_tool_result

VIEWER = Actor(id="support@example.com", role=Role.VIEWER)
OPERATOR = Actor(id="ops@example.com", role=Role.OPERATOR)
READS = 3000
INSIDE = "inside content: the real tool result\n" * 40
OUTSIDE = "OUTSIDE THE WORKDIR: must never be served\n" * 40


def _conversation(turns: int = 8) -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    for i in range(turns):
        messages.append(HumanMessage(f"Question {i}: check the deployment logs."))
        messages.append(
            AIMessage("", tool_calls=[{"name": "run_command", "args": {"n": i}, "id": f"c{i}"}])
        )
        messages.append(ToolMessage(f"log {i}\n" * 40, tool_call_id=f"c{i}", name="run_command"))
        messages.append(AIMessage(f"Answer {i}: the deployment finished."))
    return messages


def _seed_thread(thread_id: str = "t1") -> None:
    with session_scope() as session:
        service.upsert_agent(
            session,
            "agent-a",
            capabilities=["context_compression"],
            summary_keep_messages=6,
            summary_threshold=8,
        )
        service.create_thread(session, thread_id, user_id="u1", agent_slug="agent-a")
    write_state(thread_id, {"messages": _conversation()}, expected_checkpoint_id=None)


def _seed_result(workdir: Workdir) -> tuple[int, str]:
    """One indexed tool result; returns (index id, workdir-relative path)."""
    _seed_thread()
    saved = workdir.save_tool_result("run_command", INSIDE)
    with session_scope() as session:
        service.index_saved_files(session, "t1", [("call-1", "run_command", saved)])
        result_id = session.query(ToolResult.id).filter(ToolResult.path == saved.path).scalar()
    return result_id, saved.path


def test_directory_swapped_for_a_symlink_never_serves_outside_content(
    db_url: str, tmp_path: Path
) -> None:
    """A thread keeps swapping outputs/large_tool_results for a symlink to a directory
    holding a file of the same name; 3,000 real reads run meanwhile. Each read returns
    the inside content or raises a typed error; none returns the outside file."""
    workdir = Workdir(get_settings().workdir)
    result_id, path = _seed_result(workdir)
    name = Path(path).name
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / name).write_text(OUTSIDE, encoding="utf-8")
    real = workdir.root / TOOL_RESULTS_DIR
    parked = real.with_name("large_tool_results.parked")
    link = real.with_name("large_tool_results.link")
    link.symlink_to(outside)
    stop = threading.Event()
    swaps = 0

    def swapper() -> None:  # two renames each way: the name is missing only in between
        nonlocal swaps
        while not stop.is_set():
            os.rename(real, parked)
            os.rename(link, real)
            os.sched_yield()
            os.rename(real, link)
            os.rename(parked, real)
            os.sched_yield()
            swaps += 1

    outcomes: Counter[str] = Counter()
    thread = threading.Thread(target=swapper, daemon=True)
    thread.start()
    try:
        for _ in range(READS):
            try:
                text = read_tool_result(result_id, actor=VIEWER, limit=100_000).text
            except YuxiDashError as exc:
                outcomes[exc.code] += 1
                continue
            except Exception as exc:  # counted, not raised: the tally shows every kind
                outcomes[f"untyped {type(exc).__name__}"] += 1
                continue
            outcomes[
                "outside" if "OUTSIDE" in text else "inside" if text == INSIDE else "other"
            ] += 1
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()
    assert real.is_dir() and not real.is_symlink()
    assert outcomes["outside"] == 0, dict(outcomes)
    assert outcomes["other"] == 0, dict(outcomes)
    assert set(outcomes) <= {"inside", "path_refused", "tool_result_not_found"}, dict(outcomes)
    # the race really ran: some reads met the symlink, some the real directory
    assert swaps > 100 and outcomes["inside"] > 0 and outcomes["path_refused"] > 0, dict(outcomes)


def test_reads_refuse_a_symlinked_file_and_a_symlinked_directory(
    db_url: str, tmp_path: Path
) -> None:
    workdir = Workdir(get_settings().workdir)
    result_id, path = _seed_result(workdir)
    target = workdir.root / path
    secret = tmp_path / "secret.txt"
    secret.write_text(OUTSIDE, encoding="utf-8")
    target.unlink()
    target.symlink_to(secret)
    with pytest.raises(PathRefused):
        read_tool_result(result_id, actor=VIEWER)
    target.unlink()
    real = workdir.root / TOOL_RESULTS_DIR
    shutil.rmtree(real)
    (tmp_path / "outdir").mkdir()
    (tmp_path / "outdir" / target.name).write_text(OUTSIDE, encoding="utf-8")
    real.symlink_to(tmp_path / "outdir")
    with pytest.raises(PathRefused):
        read_tool_result(result_id, actor=VIEWER)
    real.unlink()
    real.mkdir()
    os.mkfifo(target)  # a FIFO is refused at once, not waited on
    with pytest.raises(PathRefused):
        read_tool_result(result_id, actor=VIEWER)


@pytest.mark.parametrize("where", ["file", "directory"])
def test_compress_refuses_a_symlinked_history_and_leaves_the_outside_file_alone(
    db_url: str, tmp_path: Path, where: str
) -> None:
    """The history file (or its directory) is a symlink to a file outside: the compress
    fails with a typed error, the outside file keeps every byte, the state is unchanged."""
    _seed_thread()
    workdir = Workdir(get_settings().workdir)
    relative = history_relpath(history_session_id(ThreadContextState("t1", [])))
    victim_dir = tmp_path / "victim"
    victim_dir.mkdir()
    victim = victim_dir / Path(relative).name
    original = b"operator notes\n\x00binary tail\xff"
    victim.write_bytes(original)
    history_dir = workdir.root / Path(relative).parent
    if where == "file":
        history_dir.mkdir(parents=True, exist_ok=True)
        (workdir.root / relative).symlink_to(victim)
    else:
        history_dir.parent.mkdir(parents=True, exist_ok=True)
        history_dir.symlink_to(victim_dir)
    before = load_state("t1")
    assert before is not None

    with pytest.raises(YuxiDashError) as caught:
        sources.compress_thread_context("t1", actor=OPERATOR)

    assert caught.value.code in ("path_refused", "workdir_unavailable")
    assert victim.read_bytes() == original
    assert sorted(p.name for p in victim_dir.iterdir()) == [victim.name]
    after = load_state("t1")
    assert after is not None and after.checkpoint_id == before.checkpoint_id  # no new checkpoint
    assert after.state.summary is None
