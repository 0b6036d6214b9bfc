"""`yuxi-dash workdir sweep`: admin only, --dry-run, --json, and the refusal's exit code."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from yuxi_dash.access.audit import wait_for_pending_audit
from yuxi_dash.cli import main
from yuxi_dash.files.workdir import Workdir
from yuxi_dash.service.sweep import SWEEP_ACTION
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.queries import list_audit


def _orphan() -> Path:
    saved = Workdir(get_settings().workdir).save_tool_result("run_command", "orphan " * 700)
    path = Path(get_settings().workdir) / saved.path
    old = time.time() - 7200
    os.utime(path, (old, old))
    return path


def test_an_admin_sweeps_after_a_dry_run(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("YUXI_DASH_CLI_ROLE", "admin")
    get_settings.cache_clear()
    orphan = _orphan()
    relative = orphan.relative_to(get_settings().workdir).as_posix()

    assert main(["workdir", "sweep", "--dry-run"]) == 0
    out, _err = capsys.readouterr()
    assert "would remove 1 orphaned files" in out and relative in out
    assert orphan.exists()

    assert main(["workdir", "sweep", "--json", "--actor", "oncall"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["files"] == [relative] and data["dry_run"] is False
    assert not orphan.exists()
    assert wait_for_pending_audit(30)
    with session_scope() as session:
        rows = list_audit(session, action=SWEEP_ACTION)
    assert [(row.actor, row.outcome) for row in rows] == [
        ("oncall", "completed"),
        ("cli", "completed"),
    ]


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_a_viewer_or_operator_is_refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, role: str
) -> None:
    monkeypatch.setenv("YUXI_DASH_CLI_ROLE", role)
    get_settings.cache_clear()
    orphan = _orphan()
    assert main(["workdir", "sweep", "--json"]) == 1
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["code"] == "forbidden"
    assert orphan.exists()
    assert wait_for_pending_audit(30)
    with session_scope() as session:
        (row,) = list_audit(session, action=SWEEP_ACTION)
    assert (row.outcome, row.detail["code"]) == ("refused", "forbidden")
