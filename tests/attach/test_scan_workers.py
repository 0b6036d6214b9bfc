"""A scan on worker processes projects what a scan on threads projects; progress; a stop resumes.

A real platform (a `create_agent` graph on LangGraph's PostgresSaver) is attached
by two dashboards, each with its own PostgreSQL database: one projects on
worker processes (`scan_workers.PROCESS_MIN` lowered so four threads qualify),
the other on threads. Every projected row is the same. A scan stopped after its
first stretch leaves the rest for the next one, which projects only those.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest
import sqlalchemy as sa

from tests.attach.test_projector import counts, dump
from tests.attach.test_scan import ROUND_ONE
from tests.fixtures.database import ADMIN_URL, _create_database, _drop_database
from tests.fixtures.platform import Platform
from yuxi_dash.attach import scan_progress, scan_workers, scanner
from yuxi_dash.attach.projector import ChangedThread
from yuxi_dash.attach.scan_progress import (
    FAILED,
    FINISHED,
    RUNNING,
    STOPPED,
    ProgressKeeper,
    ScanProgress,
)
from yuxi_dash.attach.scanner import read_watermark, scan
from yuxi_dash.attach.status import attach_status, stored_progress
from yuxi_dash.cli.attach import progress_printer
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store import db
from yuxi_dash.store.models import Conversation

pytestmark = pytest.mark.services


@pytest.fixture
def two_dashboards(attached: Platform) -> Iterator[tuple[Settings, Settings]]:
    """Two empty PostgreSQL dashboards attached to the same platform."""
    urls = [_create_database(ADMIN_URL), _create_database(ADMIN_URL)]
    base = get_settings()
    try:
        pair = tuple(base.model_copy(update={"database_url": url}) for url in urls)
        for settings in pair:
            db.get_engine(settings)  # migrated before the scan
        yield pair  # type: ignore[misc]
    finally:
        db.forget_engines()
        for url in urls:
            _drop_database(ADMIN_URL, url)


def _projected(settings: Settings) -> int:
    with db.session_scope(settings) as session:
        return int(session.scalar(sa.select(sa.func.count()).select_from(Conversation)) or 0)


def test_worker_processes_project_the_rows_threads_project(
    two_dashboards: tuple[Settings, Settings],
    attached: Platform,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    on_processes, on_threads = two_dashboards
    pools: list[int] = []

    class CountedPool(ProcessPoolExecutor):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pools.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(scan_workers, "ProcessPoolExecutor", CountedPool)
    monkeypatch.setattr(
        scan_workers, "process_count", lambda _settings: 2
    )  # even on a 1-core runner
    monkeypatch.setattr(scan_workers, "PROCESS_MIN", 2)
    monkeypatch.setattr(scan_workers, "CHUNK", 2)
    attached.run(ROUND_ONE)
    seen: list[ScanProgress] = []
    by_processes = scan(on_processes, progress=seen.append)
    assert pools == [1]  # the four threads went to worker processes
    monkeypatch.setattr(scan_workers, "PROCESS_MIN", 10_000)
    by_threads = scan(on_threads)
    assert len(pools) == 1
    assert by_processes.projected == 4 and by_processes.failed == 0
    assert counts(by_processes) == counts(by_threads)
    rows = dump(on_processes)
    assert rows == dump(on_threads)
    assert all(rows[table] for table in rows if table != "compressions")
    # progress after each stretch of two, in order, ending at the whole
    done = [p.threads_done for p in seen]
    assert done == sorted(done)  # heartbeats (0 done) while the processes start, then 2, 4
    assert sorted(set(done) - {0}) == [2, 4]  # each stretch of two, then heartbeats maybe
    assert (
        seen[-1].checkpoints_done
        == seen[-1].checkpoints_total
        == by_processes.checkpoints_in_window
    )
    stored = read_watermark(on_processes, by_processes.source)
    assert stored is not None and stored.progress is not None
    assert stored.progress["state"] == FINISHED
    assert (stored.progress["threads_done"], stored.progress["threads_total"]) == (4, 4)
    assert not attach_status(on_processes).scan_running


def test_a_stopped_first_scan_resumes_with_the_threads_it_left(
    two_dashboards: tuple[Settings, Settings],
    attached: Platform,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings, _ = two_dashboards
    monkeypatch.setattr(scan_workers, "BATCH", 1)  # four stretches of one thread, one at a time
    monkeypatch.setattr(scan_workers, "WORKERS", 1)
    attached.run(ROUND_ONE)
    asked: list[int] = []

    def stop_after_two() -> bool:
        asked.append(1)
        return _projected(settings) >= 2

    first = scan(settings, should_stop=stop_after_two)
    assert first.stopped and 2 <= first.projected < 4
    stored = read_watermark(settings, first.source)
    assert stored is not None and stored.progress is not None
    assert stored.progress["state"] == STOPPED
    assert not attach_status(settings).scan_running  # a stopped scan is not shown as running
    second = scan(settings)
    assert not second.stopped
    assert second.projected == 4 - first.projected  # only the ones left are read
    assert _projected(settings) == 4


def test_progress_says_the_rate_and_the_time_left() -> None:
    start = ScanProgress(0, 1_000, 0, 20_000, 0.0)
    assert start.seconds_left is None and start.rate == 0.0
    assert "time left unknown" in start.line()
    half = ScanProgress(500, 1_000, 10_000, 20_000, 5.0)
    assert half.rate == 100.0 and half.seconds_left == 5.0 and half.fraction == 0.5
    assert half.line() == (
        "projected 500 of 1,000 threads (10,000 of 20,000 checkpoints) · "
        "100 threads/s · about 5 s left"
    )


def test_the_cli_prints_a_progress_line_at_most_every_interval_and_the_last(
    capsys: pytest.CaptureFixture[str],
) -> None:
    show = progress_printer(every=3600.0)
    for done in (10, 20, 30):
        show(ScanProgress(done, 30, done, 30, 1.0))
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2  # the first, then the last (the middle one came too soon)
    assert "10 of 30 threads" in err[0] and "30 of 30 threads" in err[1]


def test_a_long_stretch_reports_progress_while_it_runs(
    two_dashboards: tuple[Settings, Settings],
    attached: Platform,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings, _ = two_dashboards
    monkeypatch.setattr(scan_workers, "HEARTBEAT_SECONDS", 0.01)
    real = scan_workers.run_batch
    three_heartbeats = threading.Event()

    def held(*args: Any, **kwargs: Any) -> Any:
        three_heartbeats.wait(timeout=30)  # runs on once the scan has said it is alive
        return real(*args, **kwargs)

    monkeypatch.setattr(scan_workers, "run_batch", held)
    attached.run(ROUND_ONE)
    seen: list[ScanProgress] = []

    def on_progress(progress: ScanProgress) -> None:
        seen.append(progress)
        if len([p for p in seen if p.threads_done == 0]) >= 3:
            three_heartbeats.set()

    report = scan(settings, progress=on_progress)
    assert report.projected == 4
    assert three_heartbeats.is_set()  # heartbeats came while the stretch was held
    assert seen[-1].threads_done == 4


def test_a_failed_scan_says_so_and_a_running_row_of_another_scan_is_left_alone(
    two_dashboards: tuple[Settings, Settings],
    attached: Platform,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings, _ = two_dashboards

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the batch broke")

    monkeypatch.setattr(scan_workers, "run_batch", broken)
    attached.run(ROUND_ONE[:1])
    with pytest.raises(RuntimeError):
        scan(settings)
    source = attach_status(settings).source
    assert source is not None
    stored = read_watermark(settings, source)
    assert stored is not None and stored.progress is not None
    assert stored.progress["state"] == FAILED
    assert not attach_status(settings).scan_running

    other, mine = ProgressKeeper(settings, source), ProgressKeeper(settings, source)
    other.update(ScanProgress(10, 100, 200, 2000, 1.0))  # another scanner, running
    mine.update(ScanProgress(0, 5, 0, 50, 0.0))
    mine.end(FINISHED)
    stored = read_watermark(settings, source)
    assert stored is not None and stored.progress is not None
    assert (stored.progress["state"], stored.progress["threads_total"]) == (RUNNING, 100)
    assert attach_status(settings).scan_running
    other.end(FINISHED)
    mine.end(FINISHED)  # the other one has ended: the row is free again
    stored = read_watermark(settings, source)
    assert stored is not None and stored.progress is not None
    assert stored.progress["threads_total"] == 5


@pytest.mark.parametrize(
    ("quota", "setting", "expected"),
    [
        (None, None, 2),  # no cgroup file: the usable cores (2 given)
        ("max 100000\n", None, 2),  # no quota
        ("150000 100000\n", None, 2),  # 1.5 cores: 2 processes
        ("100000 100000\n", None, 1),  # one core: no worker processes
        ("50000 100000\n", None, 1),
        ("800000 100000\n", None, 2),  # more quota than cores
        ("garbage\n", None, 2),  # unreadable: the cores
        ("100000 100000\n", 3, 3),  # the setting wins
    ],
)
def test_process_count_follows_the_setting_then_the_cores_and_the_cpu_quota(
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
    quota: str | None,
    setting: int | None,
    expected: int,
) -> None:
    monkeypatch.setattr(scan_workers.os, "sched_getaffinity", lambda _pid: {0, 1})
    path = tmp_path / "cpu.max"
    if quota is not None:
        path.write_text(quota)
    settings = get_settings().model_copy(update={"attach_scan_processes": setting})
    assert scan_workers.process_count(settings, path) == expected


@pytest.mark.parametrize(
    ("quota", "period", "expected"),
    [("-1", "100000", None), ("150000", "100000", 2), ("50000", "100000", 1), ("x", "1", None)],
)
def test_a_cgroup_v1_quota_is_read_with_its_period(
    tmp_path: Any, quota: str, period: str, expected: int | None
) -> None:
    (tmp_path / "cpu.cfs_quota_us").write_text(f"{quota}\n")
    (tmp_path / "cpu.cfs_period_us").write_text(f"{period}\n")
    assert scan_workers.cpu_quota(tmp_path / "cpu.cfs_quota_us") == expected


def test_process_count_is_capped_without_a_setting(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scan_workers.os, "sched_getaffinity", lambda _pid: set(range(64)))
    settings = get_settings().model_copy(update={"attach_scan_processes": None})
    assert scan_workers.process_count(settings, tmp_path / "absent") == scan_workers.MAX_PROCESSES


def test_the_quota_is_read_from_the_process_own_cgroup_else_the_root(tmp_path: Any) -> None:
    root = tmp_path / "cgroup"
    own = root / "system.slice" / "dash.service"
    own.mkdir(parents=True)
    (root / "cpu.max").write_text("max 100000\n")
    membership = tmp_path / "membership"
    membership.write_text("0::/system.slice/dash.service\n")
    assert scan_workers.cgroup_quota_file(root, membership) == root / "cpu.max"  # none of its own
    (own / "cpu.max").write_text("100000 100000\n")
    assert scan_workers.cgroup_quota_file(root, membership) == own / "cpu.max"
    assert scan_workers.cpu_quota(own / "cpu.max") == 1
    assert scan_workers.cgroup_quota_file(root, tmp_path / "absent") == root / "cpu.max"


def test_a_cgroup_v1_quota_is_found_in_the_cpu_controllers_mount(tmp_path: Any) -> None:
    """Hybrid and v1 hosts: "N:cpu,cpuacct:/path" names the group under the controllers' mount
    (or its "cpu" link); a v2 group of its own still wins."""
    root = tmp_path / "cgroup"
    mount = root / "cpu,cpuacct"
    group = mount / "docker" / "abc"
    group.mkdir(parents=True)
    for folder, quota in ((mount, "-1"), (group, "200000")):
        (folder / "cpu.cfs_quota_us").write_text(f"{quota}\n")
        (folder / "cpu.cfs_period_us").write_text("100000\n")
    membership = tmp_path / "membership"
    membership.write_text("4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n")
    found = scan_workers.cgroup_quota_file(root, membership)
    assert found == group / "cpu.cfs_quota_us" and scan_workers.cpu_quota(found) == 2
    membership.write_text("3:cpu,cpuacct:/elsewhere\n")  # its group not mounted here: the root
    assert scan_workers.cgroup_quota_file(root, membership) == mount / "cpu.cfs_quota_us"
    (root / "docker" / "abc").mkdir(parents=True)
    (root / "docker" / "abc" / "cpu.max").write_text("100000 100000\n")
    membership.write_text("3:cpu,cpuacct:/docker/abc\n0::/docker/abc\n")
    assert scan_workers.cgroup_quota_file(root, membership) == root / "docker" / "abc" / "cpu.max"


def test_the_process_setting_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YUXI_DASH_ATTACH_SCAN_PROCESSES", "3")
    assert Settings().attach_scan_processes == 3
    monkeypatch.setenv("YUXI_DASH_ATTACH_SCAN_PROCESSES", "0")
    with pytest.raises(ValueError, match="attach_scan_processes|YUXI_DASH_ATTACH_SCAN_PROCESSES"):
        Settings()


def test_stretches_keep_the_order_and_shrink_towards_the_end() -> None:
    changed = [ChangedThread(f"t{i:05}", f"c{i:05}", 1) for i in range(10_000)]
    stretches = scan_workers.split_stretches(changed, 250, 2)
    assert [t for stretch in stretches for t in stretch] == changed
    sizes = [len(stretch) for stretch in stretches]
    assert sizes[0] == 250 and sizes == sorted(sizes, reverse=True)
    assert sizes[-2] == scan_workers.BATCH  # the last ones are a batch (or what is left)
    small = scan_workers.split_stretches(changed[:120], scan_workers.BATCH, 4)
    assert [len(stretch) for stretch in small] == [50, 50, 20]


def _worker_state() -> tuple[bool, int]:
    return signal.getsignal(signal.SIGINT) == signal.SIG_IGN, gc.get_freeze_count()


def test_a_worker_process_leaves_ctrl_c_to_its_parent_and_never_collects_its_imports() -> None:
    context = scan_workers.worker_context()
    with ProcessPoolExecutor(1, mp_context=context, initializer=scan_workers._start_worker) as pool:
        ignored, frozen = pool.submit(_worker_state).result()
        parent = pool.submit(os.getppid).result()
    assert ignored
    assert frozen > 10_000  # the modules imported to run a scan's chunk
    assert parent != os.getpid()  # forked from the fork server, not from this process


def test_the_fork_server_imports_what_a_worker_runs_before_forking_it() -> None:
    """A worker that runs nothing of ours finds the scan's modules already imported."""
    check = "import sys; sys.exit(0 if 'yuxi_dash.attach.scan_workers' in sys.modules else 3)"
    worker = scan_workers.worker_context().Process(target=exec, args=(check,))
    worker.start()
    worker.join(60)
    assert worker.exitcode == 0


def _slow_ready() -> None:
    time.sleep(0.5)  # busy while the next worker starts


def test_the_new_threads_are_shown_while_the_worker_processes_start(
    two_dashboards: tuple[Settings, Settings],
    attached: Platform,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings, _ = two_dashboards
    monkeypatch.setattr(scan_workers, "process_count", lambda _settings: 2)
    monkeypatch.setattr(scan_workers, "PROCESS_MIN", 2)
    attached.run(ROUND_ONE)
    monkeypatch.setattr(scan_workers, "_ready", _slow_ready)  # both workers start, not one
    at_show: list[tuple[int, int]] = []
    show = scanner.show_newest_usage
    before = len(multiprocessing.active_children())
    showing = threading.Event()
    started_after_show_began: list[bool] = []
    start = scan_workers._start_workers

    def gated_start(*args: Any) -> None:
        # the workers may start only once the show step runs: started before it, in the
        # caller's thread, this waits in vain; started after it, the show step waits in vain
        started_after_show_began.append(showing.wait(timeout=30))
        start(*args)

    def spy(*args: Any, **kwargs: Any) -> set[str]:
        showing.set()
        deadline = time.monotonic() + 30
        while len(multiprocessing.active_children()) - before < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        at_show.append((len(multiprocessing.active_children()), _projected(settings)))
        return show(*args, **kwargs)

    monkeypatch.setattr(scan_workers, "_start_workers", gated_start)
    monkeypatch.setattr(scanner, "show_newest_usage", spy)
    report = scan(settings, show_first=True)
    assert started_after_show_began == [True]
    assert [(children - before, rows) for children, rows in at_show] == [(2, 0)]
    assert (report.shown, report.projected, report.failed) == (4, 4, 0)
    stored = read_watermark(settings, report.source)
    assert stored is not None and stored.progress is not None
    assert stored.progress["shown"] == 4


def test_the_shown_count_is_stored_before_the_first_stretch_runs(
    two_dashboards: tuple[Settings, Settings],
    attached: Platform,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The page reads the stored progress: it says how many threads were shown as soon as
    they are, not at the first stretch's end."""
    settings, _ = two_dashboards
    monkeypatch.setattr(scan_progress, "SAVE_SECONDS", 3600.0)  # no update by the clock
    attached.run(ROUND_ONE)
    at_first: list[tuple[bool, int]] = []
    run = scan_workers.run_batch

    def spy(*args: Any, **kwargs: Any) -> Any:
        if not at_first:
            stored = stored_progress(settings)
            assert stored is not None
            at_first.append((stored.running, stored.progress.shown))
        return run(*args, **kwargs)

    monkeypatch.setattr(scan_workers, "run_batch", spy)
    report = scan(settings, show_first=True)
    assert report.shown == 4
    assert at_first == [(True, 4)]
