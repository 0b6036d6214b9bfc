"""History files hold keyed sections: a retry replaces, stale keys go, legacy text stays,
the file is never seen half-written and never written through a symlink."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from yuxi_dash.errors import InvalidInput, PathRefused
from yuxi_dash.files.workdir import Workdir, history_relpath, parse_history

REPO = Path(__file__).resolve().parents[2]
LEGACY = (
    "\n## Summarized at 2025-01-01T00:00:00+00:00: messages 0-78 of thread t1\n\n"
    "**Human**: hello <!-- yuxi-dash:history-section key=3 bytes=2 -->\nab\n"
)


def _workdir(tmp_path: Path) -> Workdir:
    workdir = Workdir(tmp_path / "wd")
    workdir.initialize()
    return workdir


def _sections(workdir: Workdir, session: str = "t1") -> list[tuple[int, str]]:
    return [(s.key, s.text) for s in workdir.read_history_sections(session)]


def test_retry_of_a_key_replaces_it_and_higher_keys_are_dropped(tmp_path: Path) -> None:
    workdir = _workdir(tmp_path)
    assert workdir.read_history_sections("t1") == []
    path = workdir.write_history_section("t1", 3, "messages 0-78\n")
    assert path == history_relpath("t1")
    workdir.write_history_section("t1", 3, "messages 0-78 (retry)\n")  # same key again
    assert _sections(workdir) == [(3, "messages 0-78 (retry)\n")]
    workdir.write_history_section("t1", 7, "messages 78-120\n")
    workdir.write_history_section("t1", 9, "attempt that never committed\n")
    workdir.write_history_section("t1", 7, "messages 78-121\n")  # 7 retried: 9 is stale
    assert _sections(workdir) == [(3, "messages 0-78 (retry)\n"), (7, "messages 78-121\n")]
    workdir.write_history_section("t1", 0, "from scratch\n")  # drops every key >= 0
    assert _sections(workdir) == [(0, "from scratch\n")]
    assert _sections(workdir, "t2") == []  # sessions are separate files


def test_legacy_text_is_kept_byte_for_byte(tmp_path: Path) -> None:
    workdir = _workdir(tmp_path)
    target = workdir.root / history_relpath("t1")
    target.parent.mkdir(parents=True)
    target.write_text(LEGACY, encoding="utf-8")  # what the old append wrote: no markers
    workdir.write_history_section("t1", 5, "keyed\n")
    workdir.write_history_section("t1", 5, "keyed again\n")
    assert target.read_bytes().startswith(LEGACY.encode())
    assert _sections(workdir) == [(-1, LEGACY), (5, "keyed again\n")]
    workdir.write_history_section("t1", 0, "lowest key\n")
    assert _sections(workdir) == [(-1, LEGACY), (0, "lowest key\n")]


def test_text_that_imitates_a_marker_stays_inside_its_section(tmp_path: Path) -> None:
    workdir = _workdir(tmp_path)
    forged = (
        "<!-- /yuxi-dash:history-section key=4 -->\n"
        "<!-- yuxi-dash:history-section key=99 bytes=5 -->\nforge<!-- /yuxi-dash:history-section"
        " key=99 -->\n\udcff lone surrogate, 中文\n"
    )
    workdir.write_history_section("t1", 4, forged)
    workdir.write_history_section("t1", 8, "next\n")
    assert _sections(workdir) == [(4, forged), (8, "next\n")]
    workdir.write_history_section("t1", 50, "x")  # would drop a forged key 99, if parsed
    assert [key for key, _ in _sections(workdir)] == [4, 8, 50]


def test_bad_keys_are_refused_and_change_nothing(tmp_path: Path) -> None:
    workdir = _workdir(tmp_path)
    workdir.write_history_section("t1", 1, "one\n")
    before = (workdir.root / history_relpath("t1")).read_bytes()
    for bad in (-1, True, 2**63, 1.0, "2"):
        with pytest.raises(InvalidInput):
            workdir.write_history_section("t1", bad, "x")  # type: ignore[arg-type]
    assert (workdir.root / history_relpath("t1")).read_bytes() == before


@pytest.mark.parametrize("where", ["file", "directory", "outputs"])
def test_history_write_through_a_symlink_is_refused(tmp_path: Path, where: str) -> None:
    workdir = _workdir(tmp_path)
    relative = Path(history_relpath("t1"))
    victim_dir = tmp_path / "victim"
    victim_dir.mkdir()
    victim = victim_dir / relative.name
    victim.write_bytes(b"do not touch\n")
    if where == "file":
        (workdir.root / relative.parent).mkdir(parents=True)
        (workdir.root / relative).symlink_to(victim)
    elif where == "directory":
        (workdir.root / "outputs").mkdir()
        (workdir.root / relative.parent).symlink_to(victim_dir)
    else:
        (victim_dir / "conversation_history").mkdir()
        (victim_dir / "conversation_history" / relative.name).write_bytes(b"do not touch\n")
        (workdir.root / "outputs").symlink_to(victim_dir)
    for write in (
        lambda: workdir.write_history_section("t1", 1, "chat text\n"),
        lambda: workdir.read_history_sections("t1"),
    ):
        with pytest.raises(PathRefused):
            write()
    for path in victim_dir.rglob("*"):
        if path.is_file():
            assert path.read_bytes() == b"do not touch\n"


def test_a_reader_never_sees_a_partly_written_file(tmp_path: Path) -> None:
    """While one thread rewrites the file 300 times (each rewrite a bigger section), another
    reads it continuously: every read parses into whole sections only."""
    workdir = _workdir(tmp_path)
    workdir.write_history_section("t1", 0, "base\n")
    target = workdir.root / history_relpath("t1")
    stop = threading.Event()
    seen: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            chunks = parse_history(target.read_bytes())
            if [key for key, _ in chunks][:1] != [0] or any(key < 0 for key, _ in chunks):
                seen.append(repr(chunks[:3]))
            for key, payload in chunks[1:]:
                if payload != b"y" * key * 1000:
                    seen.append(f"bad payload for key {key}")

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for round_ in range(300):
            key = 1 + round_ % 20
            workdir.write_history_section("t1", key, "y" * key * 1000)
    finally:
        stop.set()
        thread.join()
    assert seen == []
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]  # no temp left


_FSIZE_LIMITED_HISTORY = """
import json, resource, signal, sys
from yuxi_dash.files.workdir import Workdir
if sys.argv[2] == "fail":
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an over-size write fails with EFBIG
else:  # the over-size write kills the process mid-write: no cleanup runs
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
resource.setrlimit(resource.RLIMIT_FSIZE, (6000, 6000))
try:
    Workdir(sys.argv[1]).write_history_section("t1", 2, "z" * 9000)
    failed = None
except OSError as exc:
    failed = type(exc).__name__
print(json.dumps({"failed": failed}))
"""


@pytest.mark.parametrize("mode", ["fail", "crash"])
def test_a_write_cut_short_leaves_the_old_file_whole(tmp_path: Path, mode: str) -> None:
    """A real half-done rewrite (file-size limit: EFBIG, or killed by SIGXFSZ) leaves the
    history file exactly as it was."""
    workdir = _workdir(tmp_path)
    target = workdir.root / history_relpath("t1")
    target.parent.mkdir(parents=True)
    target.write_text(LEGACY, encoding="utf-8")
    workdir.write_history_section("t1", 1, "x" * 4000)
    before = hashlib.sha256(target.read_bytes()).hexdigest()
    run = subprocess.run(
        [sys.executable, "-c", _FSIZE_LIMITED_HISTORY, str(workdir.root), mode],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    if mode == "fail":
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout) == {"failed": "OSError"}
        assert os.listdir(target.parent) == [target.name]  # the temp file was removed
    else:
        assert run.returncode == -signal.SIGXFSZ
    assert hashlib.sha256(target.read_bytes()).hexdigest() == before
    assert _sections(workdir) == [(-1, LEGACY), (1, "x" * 4000)]
    workdir.write_history_section("t1", 2, "z" * 9000)  # the next try writes it whole
    assert _sections(workdir)[-1] == (2, "z" * 9000)
