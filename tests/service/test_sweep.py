"""The workdir sweep (yuxi_dash.service.sweep): orphaned offloaded files, removed safely.

A compress killed with SIGKILL after writing its files and before its commit
(the way tests/service/test_compress_phase3.py kills one) leaves files no index
row names; the sweep removes them once they are older than the grace period,
audits it, and leaves indexed files, young files, files a not-yet-projected
checkpoint names, symlinks and other names alone. Real SQLite and PostgreSQL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.service.builders import OPERATOR, VIEWER, seed_thread
from yuxi_dash import service
from yuxi_dash.access.audit import wait_for_pending_audit
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.errors import Forbidden, PathRefused
from yuxi_dash.files.workdir import TOOL_RESULTS_DIR, Workdir
from yuxi_dash.service.compress import STEP_CHECKPOINT_WRITTEN, STEP_FILES_WRITTEN
from yuxi_dash.service.sweep import SWEEP_ACTION, SWEEP_TARGET, SweepReport, sweep_workdir
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import is_sqlite, session_scope
from yuxi_dash.store.models import Conversation, ToolResult, utcnow
from yuxi_dash.store.queries import list_audit

REPO = Path(__file__).resolve().parents[2]
ADMIN = Actor(id="admin@example.com", role=Role.ADMIN)
TWO_HOURS = 2 * 3600

_CHILD = """
import os, signal, sys
from tests.service.builders import OPERATOR
from yuxi_dash import service

def at_step(step):
    if step == sys.argv[1]:
        os.kill(os.getpid(), signal.SIGKILL)

service.compress_own_thread("t1", actor=OPERATOR, on_step=at_step)
"""


def _area() -> Path:
    return Path(get_settings().workdir) / TOOL_RESULTS_DIR


def _files() -> set[str]:
    base = _area()
    return {f"{TOOL_RESULTS_DIR}/{p.name}" for p in base.iterdir()} if base.exists() else set()


def _age(*paths: str, seconds: float = TWO_HOURS) -> None:
    when = time.time() - seconds
    for path in paths:
        os.utime(Path(get_settings().workdir) / path, (when, when), follow_symlinks=False)


def _kill_compress_at(step: str) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, step], env=env, capture_output=True, timeout=120
    )
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()[-2000:]


def _indexed_file(content: str) -> str:
    """A file a committed index row names (the thread's earlier offload)."""
    saved = Workdir(get_settings().workdir).save_tool_result("run_command", content)
    with session_scope() as session:
        session.add(
            ToolResult(
                thread_id="t1",
                tool_name="run_command",
                sha256=saved.sha256,
                path=saved.path,
                chars=saved.chars,
                approx_tokens=saved.approx_tokens,
            )
        )
    return saved.path


def _sweep_rows() -> list[Any]:
    assert wait_for_pending_audit(30)
    with session_scope() as session:
        return list_audit(session, action=SWEEP_ACTION, target=SWEEP_TARGET)


def _sqlite() -> bool:
    with session_scope() as session:
        return is_sqlite(session)


@pytest.mark.parametrize("step", [STEP_FILES_WRITTEN, STEP_CHECKPOINT_WRITTEN])
def test_files_of_a_killed_compress_are_swept_and_audited(db_url: str, step: str) -> None:
    seed_thread()
    indexed = _indexed_file("an earlier offload " * 400)
    _kill_compress_at(step)
    killed = _files() - {indexed}
    assert killed, "the killed compress wrote its offloaded files"
    young = Workdir(get_settings().workdir).save_tool_result("web_search", "young " * 900).path
    _age(indexed, *killed)
    # SQLite, killed after the checkpoint's own commit: that checkpoint names the files,
    # the row never caught up; they are the thread's, not leftovers (PostgreSQL: one
    # transaction, nothing of the attempt committed)
    named = step == STEP_CHECKPOINT_WRITTEN and _sqlite()

    dry = sweep_workdir(actor=ADMIN, settings=get_settings(), dry_run=True)
    assert _files() == {indexed, young, *killed}  # a dry run removes nothing
    report = sweep_workdir(actor=ADMIN, settings=get_settings())

    expected = [] if named else sorted(killed)
    assert dry.files == report.files == expected
    assert report.named_by_checkpoint == (len(killed) if named else 0)
    assert (report.indexed, report.young, report.links, report.held) == (1, 1, 0, None)
    assert _files() == ({indexed, young} | (killed if named else set()))
    rows = _sweep_rows()
    assert [row.outcome for row in rows] == ["completed", "completed"]
    detail = rows[0].detail  # newest first: the real run
    assert detail["dry_run"] is False and rows[1].detail["dry_run"] is True
    assert sorted(rows[1].detail["would_remove_files"]) == expected
    assert detail["removed"] == len(expected) and sorted(detail["removed_files"]) == expected
    assert rows[0].actor == ADMIN.id
    if named:  # the next compress (once the killed one's lease ran out) indexes them
        with session_scope() as session:
            conv = session.scalar(sa.select(Conversation).where(Conversation.thread_id == "t1"))
            assert conv is not None and conv.compress_lease_id is not None
            conv.compress_lease_until = utcnow() - timedelta(seconds=1)
        service.compress_own_thread("t1", actor=OPERATOR)
        assert sweep_workdir(actor=ADMIN, settings=get_settings()).files == []


def test_a_symlink_in_the_area_is_never_followed_nor_removed(db_url: str, tmp_path: Path) -> None:
    seed_thread()
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "precious.txt"
    target.write_text("not the workdir's")
    area = _area()
    area.mkdir(parents=True, exist_ok=True)
    link = area / f"run_command-{'a' * 16}.txt"  # a name our writers would give a file
    link.symlink_to(target)
    (area / f"web_search-{'b' * 16}.txt").symlink_to(outside)  # to a directory
    _age(f"{TOOL_RESULTS_DIR}/{link.name}", f"{TOOL_RESULTS_DIR}/web_search-{'b' * 16}.txt")
    old = time.time() - TWO_HOURS
    os.utime(target, (old, old))

    report = sweep_workdir(actor=ADMIN, settings=get_settings())
    assert (report.files, report.links) == ([], 2)
    assert link.is_symlink() and target.read_text() == "not the workdir's"


def test_a_symlinked_results_directory_is_refused_and_audited(db_url: str, tmp_path: Path) -> None:
    seed_thread()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    victim = outside / f"run_command-{'c' * 16}.txt"
    victim.write_text("someone else's")
    old = time.time() - TWO_HOURS
    os.utime(victim, (old, old))
    area = _area()
    area.parent.mkdir(parents=True, exist_ok=True)
    if area.exists():
        area.rmdir()
    area.symlink_to(outside, target_is_directory=True)

    with pytest.raises(PathRefused):
        sweep_workdir(actor=ADMIN, settings=get_settings())
    assert victim.read_text() == "someone else's"
    (row,) = _sweep_rows()
    assert (row.outcome, row.detail["code"]) == ("refused", "path_refused")


@pytest.mark.parametrize("actor", [VIEWER, OPERATOR], ids=["viewer", "operator"])
def test_only_an_admin_may_sweep_and_a_refusal_is_audited(db_url: str, actor: Actor) -> None:
    seed_thread()
    orphan = Workdir(get_settings().workdir).save_tool_result("run_command", "orphan " * 700)
    _age(orphan.path)
    with pytest.raises(Forbidden):
        sweep_workdir(actor=actor, settings=get_settings())
    assert orphan.path in _files()
    (row,) = _sweep_rows()
    assert (row.actor, row.outcome, row.detail["code"]) == (actor.id, "refused", "forbidden")


def test_a_compress_between_its_files_and_its_commit_holds_the_sweep(db_url: str) -> None:
    """The sweep waits for the files lock (a short wait), then says it was held."""
    seed_thread()
    seen: dict[str, SweepReport] = {}

    def at_step(step: str) -> None:
        if step == STEP_FILES_WRITTEN:
            files = sorted(_files())
            _age(*files)  # as old as an orphan: only the lock keeps them
            seen["report"] = sweep_workdir(actor=ADMIN, settings=get_settings())

    result = service.compress_own_thread("t1", actor=OPERATOR, on_step=at_step)
    assert result.status == "completed"
    assert seen["report"].held == "files_busy" and seen["report"].files == []
    after = sweep_workdir(actor=ADMIN, settings=get_settings())
    assert after.files == [] and after.indexed == len(_files())
    held, _after = reversed(_sweep_rows())
    assert (held.outcome, held.detail["held"], held.detail["removed"]) == (
        "completed",
        "files_busy",
        0,
    )


def test_an_attached_platform_holds_the_sweep(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seed_thread()
    orphan = Workdir(get_settings().workdir).save_tool_result("run_command", "theirs " * 700)
    _age(orphan.path)
    settings = Settings(attach_checkpointer="postgresql://reader@platform.invalid/agents")
    report = sweep_workdir(actor=ADMIN, settings=settings)
    assert (report.held, report.files) == ("attached_platform", [])
    assert orphan.path in _files()


def test_writing_a_kept_copy_again_restarts_its_grace_period(db_url: str) -> None:
    workdir = Workdir(get_settings().workdir)
    saved = workdir.save_tool_result("run_command", "reused " * 700)
    _age(saved.path)
    workdir.save_tool_result("run_command", "reused " * 700)  # an agent offloads it again
    assert time.time() - (Path(workdir.root) / saved.path).stat().st_mtime < 60
    report = sweep_workdir(actor=ADMIN, settings=get_settings())
    assert (report.files, report.young) == ([], 1)


def test_serve_sweeps_on_a_timer_as_its_own_admin_actor(db_url: str) -> None:
    from yuxi_dash.service.sweep import SWEEP_ACTOR, SweepLoop

    assert SweepLoop.wanted(get_settings())
    assert not SweepLoop.wanted(Settings(workdir_sweep_seconds=0))
    assert not SweepLoop.wanted(Settings(attach_checkpointer="postgresql://r@platform.invalid/a"))
    seed_thread()
    orphan = Workdir(get_settings().workdir).save_tool_result("run_command", "timer " * 700)
    _age(orphan.path)
    said: list[str] = []
    loop = SweepLoop(get_settings(), interval=0.2, report=said.append).start()
    try:
        deadline = time.monotonic() + 30
        while orphan.path in _files() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        loop.stop()
    assert orphan.path not in _files()
    assert said == ["workdir sweep removed 1 orphaned offloaded files"]
    rows = _sweep_rows()
    assert rows and {row.actor for row in rows} == {SWEEP_ACTOR.id}
    assert rows[-1].detail["removed_files"] == [orphan.path]
