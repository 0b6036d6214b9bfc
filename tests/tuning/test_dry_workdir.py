"""yuxi_dash.tuning.dry_workdir: the engine's writes land in memory and nowhere else.

Every public `Workdir` method is either overridden (in memory) or raises
`WorkdirUnavailable`: none works on a directory, whatever the process's working
directory holds.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from yuxi_dash.compression import ExtractiveSummarizer, ThreadContextState, force_summarize
from yuxi_dash.errors import WorkdirUnavailable
from yuxi_dash.files.workdir import Workdir
from yuxi_dash.tuning.dry_workdir import DryWorkdir

SAVED = "outputs/large_tool_results/query_kb-" + "0" * 64 + ".txt"
# Every public Workdir method, called with arguments that would touch the disk.
CALLS: dict[str, Callable[[Workdir], Any]] = {
    "initialize": lambda w: w.initialize(),
    "is_initialized": lambda w: w.is_initialized(),
    "ensure_writable": lambda w: w.ensure_writable(),
    "save_tool_result": lambda w: w.save_tool_result("query_kb", "text"),
    "prepare_tool_result": lambda w: w.prepare_tool_result("query_kb", "text"),
    "writing_pass": lambda w: w.writing_pass().__enter__(),
    "write_prepared": lambda w: w.write_prepared(*w.prepare_tool_result("t", "x")),
    "write_history_section": lambda w: w.write_history_section("s", 0, "text"),
    "write_file": lambda w: w.write_file("notes.txt", "text"),
    "read_history_sections": lambda w: w.read_history_sections("s"),
    "resolve": lambda w: w.resolve("notes.txt"),
    "read_text": lambda w: w.read_text("notes.txt"),
    "read_verified": lambda w: w.read_verified(SAVED, "0" * 64),
    "verify": lambda w: w.verify(SAVED, "0" * 64),
    "has_file": lambda w: w.has_file(SAVED),
    "tool_result_entries": lambda w: w.tool_result_entries(),
    "remove_stale_tool_results": lambda w: w.remove_stale_tool_results(["a.txt"], 1e12),
    "remove_file": lambda w: w.remove_file("notes.txt"),
}
# The ones inherited but made only of overridden methods (or of no I/O at all).
THROUGH_MEMORY = {
    "save_tool_result",
    "prepare_tool_result",
    "resolve",
    "read_text",
    "read_verified",
}


def _thread() -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    for turn in range(8):
        messages.append(HumanMessage(f"question {turn} about docs/plan-{turn}.md"))
        call = {"name": "query_kb", "args": {"q": f"q{turn}"}, "id": f"c{turn}"}
        messages.append(AIMessage("", tool_calls=[call]))
        messages.append(ToolMessage("record " * 600, tool_call_id=f"c{turn}", name="query_kb"))
        messages.append(AIMessage(f"answer {turn}: see docs/plan-{turn}.md"))
    return messages


def _disk(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _a_real_workdir_here(root: Path) -> None:
    """A marked workdir with files, as the process's working directory."""
    real = Workdir(root)
    real.initialize()
    real.ensure_writable()
    real.write_file("notes.txt", "kept")
    real.write_history_section("s", 0, "kept")
    (root / "outputs/large_tool_results/a.txt").write_text("old")
    os.utime(root / "outputs/large_tool_results/a.txt", (1, 1))


def test_every_public_method_is_in_memory_or_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    public = {
        name
        for name, member in inspect.getmembers(Workdir, inspect.isfunction)
        if not name.startswith("_")
    }
    assert public == set(CALLS)  # a new Workdir method must be added here
    here = tmp_path / "workdir"
    _a_real_workdir_here(here)
    monkeypatch.chdir(here)
    before = _disk(here)
    for name, call in CALLS.items():
        dry = DryWorkdir()
        overridden = name in vars(DryWorkdir) or name in THROUGH_MEMORY
        try:
            call(dry)
        except WorkdirUnavailable:
            pass  # refused: it would have needed a directory
        except FileNotFoundError:
            assert overridden, name  # a read of what the replay did not write
        else:
            assert overridden, name
        assert _disk(here) == before, name
    assert DryWorkdir().is_initialized() is False
    assert DryWorkdir().read_history_sections("s") == []  # not the directory's section


def test_a_summary_writes_its_files_in_memory_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = tmp_path / "empty"
    here.mkdir()
    monkeypatch.chdir(here)
    workdir = DryWorkdir()
    state = ThreadContextState(thread_id="t1", messages=_thread())
    outcome = force_summarize(
        state, workdir=workdir, summarizer=ExtractiveSummarizer(), keep_messages=4
    )
    assert outcome.summarized and outcome.saved_files
    assert outcome.file_path in workdir.files  # the history section
    assert all(saved.path in workdir.files for _id, _tool, saved in outcome.saved_files)
    assert [s.key for s in workdir.read_history_sections("t1")] == [0]
    [(_id, _tool, saved)] = outcome.saved_files[:1]
    assert workdir.verify(saved.path, saved.sha256) == "ok"
    assert workdir.read_verified(saved.path, saved.sha256)[0] == "record " * 600
    assert workdir.verify("outputs/none.txt", "0" * 64) == "missing"
    assert list(here.rglob("*")) == []  # nothing on disk


def test_a_second_section_with_the_same_key_replaces_the_first() -> None:
    workdir = DryWorkdir()
    workdir.write_history_section("s", 0, "first")
    workdir.write_history_section("s", 5, "second")
    workdir.write_history_section("s", 5, "again")
    assert [(s.key, s.text) for s in workdir.read_history_sections("s")] == [
        (0, "first"),
        (5, "again"),
    ]
    assert workdir.read_history_sections("other") == []
