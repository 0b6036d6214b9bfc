"""Workdir: content-addressed tool results, history files, confinement, verification, set-up."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fixtures.profiles import examples
from yuxi_dash.errors import PathRefused, WorkdirUnavailable
from yuxi_dash.files.workdir import MARKER_NAME, SavedFile, Workdir, history_relpath


def _initialized(root: Path) -> Workdir:
    workdir = Workdir(root)
    workdir.initialize()
    return workdir


def test_save_tool_result_is_content_addressed_and_byte_exact(tmp_path: Path) -> None:
    workdir = _initialized(tmp_path / "wd")
    content = "línea 1\r\n中文内容 🙂\n" * 50
    saved = workdir.save_tool_result("query kb/../x", content)
    again = workdir.save_tool_result("query kb/../x", content)
    assert saved == again
    assert saved.path.startswith("outputs/large_tool_results/")
    assert "/" not in saved.path.removeprefix("outputs/large_tool_results/")
    assert saved.path.endswith(f"-{saved.sha256[:16]}.txt")
    raw = (workdir.root / saved.path).read_bytes()
    assert raw == content.encode("utf-8")
    assert hashlib.sha256(raw).hexdigest() == saved.sha256
    assert saved.chars == len(content)
    assert saved.approx_tokens == -(-len(content) // 4)
    files = list((workdir.root / "outputs/large_tool_results").iterdir())
    assert len(files) == 1


def test_verify_reports_ok_mismatch_missing(tmp_path: Path) -> None:
    workdir = _initialized(tmp_path / "wd")
    saved: SavedFile = workdir.save_tool_result("run", "abc" * 1000)
    assert workdir.verify(saved.path, saved.sha256) == "ok"
    (workdir.root / saved.path).write_text("tampered")
    assert workdir.verify(saved.path, saved.sha256) == "mismatch"
    # A tampered file is rewritten when the same content is saved again.
    workdir.save_tool_result("run", "abc" * 1000)
    assert workdir.verify(saved.path, saved.sha256) == "ok"
    (workdir.root / saved.path).unlink()
    assert workdir.verify(saved.path, saved.sha256) == "missing"


def test_legacy_history_text_is_kept_as_key_minus_one(tmp_path: Path) -> None:
    """A history file from before keyed sections (plain appended text) reads as one section."""
    workdir = _initialized(tmp_path / "wd")
    relative = history_relpath("thread-1")
    (workdir.root / relative).parent.mkdir(parents=True)
    (workdir.root / relative).write_text("first\nsecond\n")
    assert workdir.read_text(relative, offset=6, limit=3) == "sec"
    assert [(s.key, s.text) for s in workdir.read_history_sections("thread-1")] == [
        (-1, "first\nsecond\n")
    ]
    workdir.write_history_section("thread-1", 0, "third\n")
    assert [(s.key, s.text) for s in workdir.read_history_sections("thread-1")] == [
        (-1, "first\nsecond\n"),
        (0, "third\n"),
    ]


def test_history_session_id_cannot_escape(tmp_path: Path) -> None:
    workdir = _initialized(tmp_path / "wd")
    path = workdir.write_history_section("../../etc/passwd", 0, "x")
    assert path.startswith("outputs/conversation_history/session_")
    assert "/" not in path.removeprefix("outputs/conversation_history/")
    assert (workdir.root / path).is_file()
    assert not (tmp_path / "etc").exists()


@pytest.mark.parametrize(
    "bad", ["../outside.txt", "/etc/passwd", "outputs/../../x", "", "a\x00b", "..\\x"]
)
def test_resolve_refuses_paths_leaving_root(tmp_path: Path, bad: str) -> None:
    workdir = _initialized(tmp_path / "wd")
    with pytest.raises(PathRefused):
        workdir.resolve(bad)


def test_reads_refuse_a_symlink_and_resolve_is_lexical(tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    workdir = _initialized(tmp_path / "wd")
    (workdir.root / "outputs").mkdir()
    os.symlink(outside, workdir.root / "outputs" / "link.txt")
    with pytest.raises(PathRefused):
        workdir.read_text("outputs/link.txt")
    with pytest.raises(PathRefused):
        workdir.verify("outputs/link.txt", "0" * 64)
    # resolve() only names the place (it never opens or follows anything)
    assert workdir.resolve("outputs/./large_tool_results//a.txt") == (
        workdir.root / "outputs/large_tool_results/a.txt"
    )


def test_missing_root_is_unavailable_and_never_created(tmp_path: Path) -> None:
    workdir = Workdir(tmp_path / "wd")
    for action in (
        workdir.ensure_writable,
        lambda: workdir.save_tool_result("run", "x" * 5000),
        lambda: workdir.write_history_section("t1", 0, "x"),
        lambda: workdir.read_text("outputs/x.txt"),
    ):
        with pytest.raises(WorkdirUnavailable) as caught:
            action()
        assert caught.value.status_code == 503
        assert "run `yuxi-dash db upgrade` to create it" in caught.value.message
        assert "\n" not in caught.value.message
    assert not workdir.root.exists()


def test_initialize_marks_the_root_and_ensure_writable_requires_the_mark(tmp_path: Path) -> None:
    workdir = Workdir(tmp_path / "wd")
    assert workdir.initialize() is True
    assert workdir.initialize() is False  # idempotent
    assert (workdir.root / MARKER_NAME).is_file()
    workdir.ensure_writable()
    assert (workdir.root / "outputs/large_tool_results").is_dir()
    assert (workdir.root / "outputs/conversation_history").is_dir()
    assert sorted(p.name for p in workdir.root.iterdir()) == [MARKER_NAME, "outputs"]  # no probe
    (workdir.root / MARKER_NAME).unlink()  # an empty mount point looks like this
    with pytest.raises(WorkdirUnavailable):
        workdir.ensure_writable()
    os.symlink(tmp_path / "elsewhere", workdir.root / MARKER_NAME)
    with pytest.raises(WorkdirUnavailable):
        workdir.ensure_writable()


def test_ensure_writable_raises_typed_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a dir")
    with pytest.raises(WorkdirUnavailable):
        Workdir(blocker / "wd").ensure_writable()
    with pytest.raises(WorkdirUnavailable):
        Workdir(blocker / "wd").initialize()
    with pytest.raises(WorkdirUnavailable):
        Workdir(blocker).ensure_writable()


def test_save_failure_raises_oserror(tmp_path: Path) -> None:
    workdir = _initialized(tmp_path / "wd")
    (workdir.root / "outputs").mkdir()
    (workdir.root / "outputs/large_tool_results").write_text("a file where the dir should be")
    with pytest.raises(OSError):
        workdir.save_tool_result("run", "x" * 5000)


def test_read_missing_file_raises_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        Workdir(tmp_path).read_text("outputs/nothing.txt")
    with pytest.raises(FileNotFoundError):
        Workdir(tmp_path).read_text("nothing/at/all.txt")


_FSIZE_LIMITED_SAVE = """
import json, os, resource, signal, sys
from pathlib import Path
from yuxi_dash.files.workdir import Workdir
if sys.argv[2] == "fail":
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an over-size write fails with EFBIG
else:  # the over-size write kills the process mid-write (a crash: no cleanup runs)
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
resource.setrlimit(resource.RLIMIT_FSIZE, (3000, 3000))
workdir = Workdir(sys.argv[1])
workdir.initialize()
small = workdir.save_tool_result("run", "s" * 2000)
try:
    workdir.save_tool_result("run", "b" * 5000)
    failed = None
except OSError as exc:
    failed = type(exc).__name__
print(json.dumps({"small": small.path, "failed": failed}))
"""


def test_write_cut_short_leaves_no_partial_file_under_any_name(tmp_path: Path) -> None:
    """A real half-done write (file-size limit: EFBIG after 3,000 bytes) raises OSError and
    leaves nothing behind: no partial file under the final name, no temp file."""
    import json
    import subprocess
    import sys

    root = tmp_path / "wd"
    run = subprocess.run(
        [sys.executable, "-c", _FSIZE_LIMITED_SAVE, str(root), "fail"],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    outcome = json.loads(run.stdout)
    assert outcome["failed"] == "OSError"
    files = sorted(p.name for p in (root / "outputs/large_tool_results").iterdir())
    assert files == [Path(outcome["small"]).name]  # the one whole file, nothing else
    assert (root / outcome["small"]).read_bytes() == b"s" * 2000
    big = hashlib.sha256(b"b" * 5000).hexdigest()
    assert not (root / f"outputs/large_tool_results/run-{big[:16]}.txt").exists()


def test_existing_whole_copy_is_kept_not_rewritten(tmp_path: Path) -> None:
    workdir = _initialized(tmp_path / "wd")
    saved = workdir.save_tool_result("run", "abc" * 1000)
    target = workdir.root / saved.path
    inode = target.stat().st_ino
    assert workdir.save_tool_result("run", "abc" * 1000) == saved
    assert target.stat().st_ino == inode  # skipped: same file, not replaced
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]


def test_crash_mid_write_leaves_no_partial_file_under_the_final_name(tmp_path: Path) -> None:
    """The process is killed half-way through writing (SIGXFSZ at the file-size limit):
    the content-addressed name never holds the partial bytes, and a later save of the
    same content writes the whole file there."""
    import signal
    import subprocess
    import sys

    root = tmp_path / "wd"
    run = subprocess.run(
        [sys.executable, "-c", _FSIZE_LIMITED_SAVE, str(root), "crash"],
        capture_output=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert run.returncode == -signal.SIGXFSZ
    big = hashlib.sha256(b"b" * 5000).hexdigest()
    final = root / f"outputs/large_tool_results/run-{big[:16]}.txt"
    assert not final.exists()
    saved = Workdir(root).save_tool_result("run", "b" * 5000)
    assert root / saved.path == final
    assert final.read_bytes() == b"b" * 5000


@pytest.mark.parametrize("anonymous", [True, False], ids=["unnamed-file-then-link", "temp+rename"])
def test_both_write_paths_create_skip_and_repair(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, anonymous: bool
) -> None:
    """The Linux path (unnamed file, then link) and the portable one (temp name, then
    rename) both write whole files, skip an intact copy and replace a tampered one."""
    from yuxi_dash.files import safe_fs

    if anonymous:
        assert safe_fs.ANONYMOUS_FILES  # this test machine is Linux with /proc
    monkeypatch.setattr(safe_fs, "ANONYMOUS_FILES", anonymous)
    workdir = _initialized(tmp_path / "wd")
    saved = workdir.save_tool_result("run", "é" * 3000)
    target = workdir.root / saved.path
    assert target.read_bytes() == ("é" * 3000).encode()
    # the owner's only: a tool result holds a user's data
    assert target.stat().st_mode & 0o077 == 0 and target.parent.stat().st_mode & 0o077 == 0
    inode = target.stat().st_ino
    workdir.save_tool_result("run", "é" * 3000)
    assert target.stat().st_ino == inode
    target.write_bytes(b"partial")
    workdir.save_tool_result("run", "é" * 3000)
    assert workdir.verify(saved.path, saved.sha256) == "ok"
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]
    assert safe_fs.ANONYMOUS_FILES is anonymous


@pytest.mark.parametrize("anonymous", [True, False], ids=["unnamed-file-then-link", "temp+rename"])
def test_a_short_write_is_finished_not_left_partial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, anonymous: bool
) -> None:
    """A write the kernel takes only part of (a signal, a nearly full disk) is carried on
    until every byte is written, on both write paths."""
    from yuxi_dash.files import safe_fs

    real_write = os.write
    calls: list[int] = []

    def at_most_1000_bytes(fd: int, data: bytes | memoryview) -> int:
        calls.append(len(data))
        return real_write(fd, bytes(data[:1000]))

    workdir = _initialized(tmp_path / "wd")
    monkeypatch.setattr(safe_fs, "ANONYMOUS_FILES", anonymous)
    monkeypatch.setattr(safe_fs.os, "write", at_most_1000_bytes)
    content = "文档" * 2000  # 12,000 bytes
    saved = workdir.save_tool_result("run", content)
    monkeypatch.setattr(safe_fs.os, "write", real_write)
    assert (workdir.root / saved.path).read_bytes() == content.encode()
    assert len(calls) == 12 and workdir.verify(saved.path, saved.sha256) == "ok"


def test_a_marker_that_is_a_symlink_is_refused_by_initialize(tmp_path: Path) -> None:
    root = tmp_path / "wd"
    root.mkdir()
    (tmp_path / "elsewhere").write_text("x")
    os.symlink(tmp_path / "elsewhere", root / MARKER_NAME)
    with pytest.raises(PathRefused):
        Workdir(root).initialize()
    with pytest.raises(WorkdirUnavailable):
        Workdir(root).ensure_writable()


def test_ensure_writable_from_many_threads_at_once(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    workdir = _initialized(tmp_path / "wd")
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: workdir.ensure_writable(), range(400)))
    assert sorted(p.name for p in workdir.root.iterdir()) == [MARKER_NAME, "outputs"]


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_a_writing_pass_walks_each_directory_once_and_closes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from yuxi_dash.files import safe_fs

    workdir = _initialized(tmp_path / "wd")
    walks: list[tuple[str, ...]] = []
    real_open_dirs = safe_fs.open_dirs

    def counting(root_fd: int, parts: tuple[str, ...], *, create: bool = False) -> int:
        walks.append(parts)
        return real_open_dirs(root_fd, parts, create=create)

    monkeypatch.setattr(safe_fs, "open_dirs", counting)
    before = _open_fds()
    prepared = [workdir.prepare_tool_result("run", f"result {n} " * 500) for n in range(6)]
    with workdir.writing_pass():
        for saved, data in prepared:
            workdir.write_prepared(saved, data)
        with workdir.writing_pass():  # nested: the outer pass's descriptor
            workdir.write_prepared(*prepared[0])
    assert walks == [("outputs", "large_tool_results")]
    assert _open_fds() == before  # every descriptor of the pass is closed
    for saved, data in prepared:
        assert (workdir.root / saved.path).read_bytes() == data
    walks.clear()
    for saved, data in prepared:  # outside a pass: one walk per file, as before
        workdir.write_prepared(saved, data)
    assert len(walks) == len(prepared)


def test_a_pass_never_writes_through_a_symlink_swapped_in(tmp_path: Path) -> None:
    """The results directory is swapped for a symlink to an outside directory before a
    pass (refused, nothing written) and during one (the files go to the directory the
    walk found, never to the link's target)."""
    workdir = _initialized(tmp_path / "wd")
    workdir.ensure_writable()
    results = workdir.root / "outputs/large_tool_results"
    outside = tmp_path / "outside"
    outside.mkdir()
    first, second = (workdir.prepare_tool_result("run", f"{n}" * 5000) for n in (1, 2))
    parked = results.with_name("parked")
    results.rename(parked)
    results.symlink_to(outside)
    with workdir.writing_pass(), pytest.raises(PathRefused):
        workdir.write_prepared(*first)
    results.unlink()
    parked.rename(results)
    with workdir.writing_pass():
        workdir.write_prepared(*first)
        results.rename(parked)  # swapped mid-pass
        results.symlink_to(outside)
        workdir.write_prepared(*second)
    assert list(outside.iterdir()) == []
    assert sorted(p.name for p in parked.iterdir()) == sorted(
        Path(saved.path).name for saved, _ in (first, second)
    )


def test_a_failed_write_in_a_pass_walks_again_for_the_next(tmp_path: Path) -> None:
    """The results directory is removed mid-pass: the write into the removed directory
    fails (OSError, nothing written), the next one walks again and makes it anew."""
    import shutil

    workdir = _initialized(tmp_path / "wd")
    prepared = [workdir.prepare_tool_result("run", f"{n}" * 5000) for n in range(3)]
    results = workdir.root / "outputs/large_tool_results"
    before = _open_fds()
    with workdir.writing_pass():
        workdir.write_prepared(*prepared[0])
        shutil.rmtree(results)
        with pytest.raises(OSError):
            workdir.write_prepared(*prepared[1])
        workdir.write_prepared(*prepared[2])
    assert _open_fds() == before
    assert sorted(p.name for p in results.iterdir()) == [Path(prepared[2][0].path).name]


def test_passes_in_threads_side_by_side_share_nothing(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    workdir = _initialized(tmp_path / "wd")
    before = _open_fds()

    def one_pass(worker: int) -> list[SavedFile]:
        saved_files = []
        with workdir.writing_pass():
            for n in range(20):
                saved, data = workdir.prepare_tool_result("run", f"{worker}:{n} " * 400)
                workdir.write_prepared(saved, data)
                saved_files.append(saved)
        return saved_files

    with ThreadPoolExecutor(4) as pool:
        written = [saved for batch in pool.map(one_pass, range(8)) for saved in batch]
    assert _open_fds() == before
    assert all(workdir.verify(saved.path, saved.sha256) == "ok" for saved in written)
    assert len(list((workdir.root / "outputs/large_tool_results").iterdir())) == 160


@given(st.text(max_size=40) | st.sampled_from(["..", ".", "a/../..", "x.txt", "a\\b", "-x.txt"]))
@settings(max_examples=examples(300))
def test_the_saved_path_fast_split_agrees_with_the_general_one(name: str) -> None:
    from yuxi_dash.files import safe_fs
    from yuxi_dash.files.workdir import _split_saved_path

    path = f"outputs/large_tool_results/{name}"
    try:
        *dirs, last = safe_fs.split_relative(path)
    except PathRefused:
        with pytest.raises(PathRefused):
            _split_saved_path(path)
        return
    assert _split_saved_path(path) == (tuple(dirs), last)
