"""Workdir: content-addressed tool results, appended history, confinement, verification."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from yuxi_dash.errors import PathRefused, WorkdirUnavailable
from yuxi_dash.workdir import SavedFile, Workdir


def test_save_tool_result_is_content_addressed_and_byte_exact(tmp_path: Path) -> None:
    workdir = Workdir(tmp_path / "wd")
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
    workdir = Workdir(tmp_path / "wd")
    saved: SavedFile = workdir.save_tool_result("run", "abc" * 1000)
    assert workdir.verify(saved.path, saved.sha256) == "ok"
    (workdir.root / saved.path).write_text("tampered")
    assert workdir.verify(saved.path, saved.sha256) == "mismatch"
    # A tampered file is rewritten when the same content is saved again.
    workdir.save_tool_result("run", "abc" * 1000)
    assert workdir.verify(saved.path, saved.sha256) == "ok"
    (workdir.root / saved.path).unlink()
    assert workdir.verify(saved.path, saved.sha256) == "missing"


def test_append_history_appends_never_overwrites(tmp_path: Path) -> None:
    workdir = Workdir(tmp_path / "wd")
    first = workdir.append_history("thread-1", "first\n")
    second = workdir.append_history("thread-1", "second\n")
    assert first == second == "outputs/conversation_history/session_thread-1.md"
    assert workdir.read_text(first) == "first\nsecond\n"
    assert workdir.read_text(first, offset=6, limit=3) == "sec"


def test_history_session_id_cannot_escape(tmp_path: Path) -> None:
    workdir = Workdir(tmp_path / "wd")
    path = workdir.append_history("../../etc/passwd", "x")
    assert path.startswith("outputs/conversation_history/session_")
    assert workdir.resolve(path).is_file()
    assert not (tmp_path / "etc").exists()


@pytest.mark.parametrize(
    "bad", ["../outside.txt", "/etc/passwd", "outputs/../../x", "", "a\x00b", "..\\x"]
)
def test_resolve_refuses_paths_leaving_root(tmp_path: Path, bad: str) -> None:
    workdir = Workdir(tmp_path / "wd")
    with pytest.raises(PathRefused):
        workdir.resolve(bad)


def test_resolve_refuses_symlink_escape(tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    workdir = Workdir(tmp_path / "wd")
    (workdir.root / "outputs").mkdir(parents=True)
    os.symlink(outside, workdir.root / "outputs" / "link.txt")
    with pytest.raises(PathRefused):
        workdir.read_text("outputs/link.txt")
    inside = workdir.resolve("outputs/large_tool_results/a.txt")
    assert inside.is_relative_to(workdir.root.resolve())


def test_ensure_writable_raises_typed_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a dir")
    with pytest.raises(WorkdirUnavailable):
        Workdir(blocker / "wd").ensure_writable()
    good = Workdir(tmp_path / "good")
    good.ensure_writable()
    assert (good.root / "outputs/large_tool_results").is_dir()
    assert list(good.root.glob(".probe-*")) == []


def test_save_failure_raises_oserror(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a dir")
    with pytest.raises(OSError):
        Workdir(blocker).save_tool_result("run", "x" * 5000)


def test_read_missing_file_raises_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        Workdir(tmp_path).read_text("outputs/nothing.txt")
