"""A workdir that is not there is 503 workdir_unavailable and is never silently recreated;
only first set-up (`yuxi-dash db upgrade`, the demo, a start on an empty database) creates it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.security.test_workdir_symlinks import OPERATOR, VIEWER, _seed_result, _seed_thread
from yuxi_dash import service, sources
from yuxi_dash.cli import main
from yuxi_dash.cli.serve import prepare
from yuxi_dash.errors import WorkdirUnavailable
from yuxi_dash.files.workdir import MARKER_NAME, Workdir
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.queries import list_audit
from yuxi_dash.store.thread_store import load_state
from yuxi_dash.tool_results.index import read_tool_result


def _checkpoint(thread_id: str = "t1") -> str | None:
    stored = load_state(thread_id)
    assert stored is not None
    return stored.checkpoint_id


@pytest.mark.parametrize("how", ["removed", "unmounted"])
def test_compress_on_a_missing_workdir_is_503_and_does_not_recreate_it(
    db_url: str, how: str
) -> None:
    """`removed`: the root is gone. `unmounted`: an empty directory is left where the
    volume should be (no marker). Both: 503, nothing written, nothing created."""
    _seed_thread()
    root = Path(get_settings().workdir)
    assert (root / MARKER_NAME).is_file()  # initialized, as first set-up leaves it
    shutil.rmtree(root)
    if how == "unmounted":
        root.mkdir()
    checkpoint = _checkpoint()

    with pytest.raises(WorkdirUnavailable) as caught:
        sources.compress_thread_context("t1", actor=OPERATOR)

    error = caught.value
    assert (error.code, error.status_code) == ("workdir_unavailable", 503)
    assert error.message == (
        f"workdir {root} is missing or not initialized; run `yuxi-dash db upgrade` to create it"
    )
    if how == "removed":
        assert not root.exists()
    else:
        assert list(root.iterdir()) == []
    assert _checkpoint() == checkpoint  # no new checkpoint
    with session_scope() as session:
        audits = list_audit(session, target=service.thread_target("t1"))
    assert audits and audits[0].detail.get("code") == "workdir_unavailable"


def test_reading_a_tool_result_from_a_removed_workdir_is_503(db_url: str) -> None:
    workdir = Workdir(get_settings().workdir)
    result_id, _path = _seed_result(workdir)
    shutil.rmtree(workdir.root)
    with pytest.raises(WorkdirUnavailable):
        read_tool_result(result_id, actor=VIEWER)
    assert not workdir.root.exists()
    with session_scope() as session:
        (audit,) = list_audit(session, action="read_tool_result")
    assert (audit.outcome, audit.detail["code"]) == ("refused", "workdir_unavailable")


def test_db_upgrade_creates_and_marks_the_workdir(tmp_path: Path, capsys) -> None:
    root = Path(get_settings().workdir)
    shutil.rmtree(root)
    assert main(["db", "upgrade"]) == 0
    assert f"workdir {root}: created" in capsys.readouterr().out
    assert (root / MARKER_NAME).is_file()
    Workdir(root).ensure_writable()
    assert main(["db", "upgrade"]) == 0
    assert f"workdir {root}: ready" in capsys.readouterr().out


def test_serve_start_creates_the_workdir_only_for_an_empty_database(db_url: str) -> None:
    settings = get_settings()
    root = Path(settings.workdir)
    shutil.rmtree(root)
    prepare(settings, demo=False)  # no threads yet: first set-up
    assert (root / MARKER_NAME).is_file()
    _seed_thread()
    shutil.rmtree(root)
    prepare(settings, demo=False)  # threads exist: a missing workdir stays missing
    assert not root.exists()
    with pytest.raises(WorkdirUnavailable):
        sources.compress_thread_context("t1", actor=OPERATOR)
    assert not root.exists()
