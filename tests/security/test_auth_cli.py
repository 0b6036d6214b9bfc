"""The CLI's actor and role: explicit (`--actor` / YUXI_DASH_CLI_ACTOR, YUXI_DASH_CLI_ROLE).

Run in-process through `yuxi_dash.cli.main` on the test's own database, with
threads made by the deterministic simulator; every check reads the audit log
and the thread's newest checkpoint id from the real store.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import sqlalchemy as sa

from yuxi_dash.access.roles import Role, cli_actor
from yuxi_dash.cli import UNNAMED_ACTOR, main
from yuxi_dash.errors import InvalidInput
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AuditEntry
from yuxi_dash.store.thread_store import load_state, state_store


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def _audit() -> list[tuple[str, str, str, str]]:
    with session_scope() as session:
        rows = session.execute(
            sa.select(
                AuditEntry.actor, AuditEntry.action, AuditEntry.target, AuditEntry.outcome
            ).order_by(AuditEntry.id)
        ).all()
    return [tuple(row) for row in rows]


def _checkpoint(thread_id: str) -> str | None:
    stored = load_state(thread_id)
    assert stored is not None, "the simulated thread has a checkpoint"
    return stored.checkpoint_id


@pytest.fixture
def thread_id() -> str:
    from yuxi_dash.sim.run import simulate

    return simulate(get_settings(), threads=1, turns=5, seed=3).threads[0].thread_id


def _env(monkeypatch: pytest.MonkeyPatch, **values: str) -> None:
    for name in ("YUXI_DASH_CLI_ROLE", "YUXI_DASH_CLI_ACTOR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()


@pytest.mark.parametrize("actor", ["", "   ", "\t", "ops\x00admin", "ops\nadmin", "x" * 257])
def test_an_unusable_actor_is_exit_2_audited_and_changes_nothing(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    thread_id: str,
    actor: str,
) -> None:
    _env(monkeypatch)
    before, audited = _checkpoint(thread_id), len(_audit())
    code, out, err = _run(capsys, "compress", thread_id, "--actor", actor)
    assert code == 2 and out["error"]["code"] == "invalid_input", (out, err)
    assert _checkpoint(thread_id) == before
    assert _audit()[audited:] == [(UNNAMED_ACTOR, "compress", f"thread:{thread_id}", "refused")]


def test_an_empty_actor_on_import_and_memory_is_refused_before_any_work(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from pathlib import Path

    _env(monkeypatch)
    sample = Path(__file__).resolve().parents[1] / "data" / "thread.json"
    code, out, _ = _run(capsys, "import-thread", str(sample), "--actor", " ")
    assert code == 2 and out["error"]["code"] == "invalid_input"
    assert list(state_store().saver.list(None)) == []  # no checkpoint of any thread
    code, out, _ = _run(capsys, "memory", "stats", "alice_chen", "--actor", "")
    assert code == 2 and out["error"]["code"] == "invalid_input"  # no graph was opened
    assert [row[1:] for row in _audit()] == [
        ("import_thread", "thread:sample-refund-001", "refused"),
        ("memory.view", "memory:alice_chen", "refused"),
    ]


def test_the_actor_comes_from_the_flag_else_the_environment_else_is_refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, thread_id: str
) -> None:
    _env(monkeypatch)
    code, out, _ = _run(capsys, "compress", thread_id)
    assert code == 2 and "YUXI_DASH_CLI_ACTOR" in out["error"]["message"]
    _env(monkeypatch, YUXI_DASH_CLI_ACTOR="  env-kim@example.com ")
    assert _run(capsys, "compress", thread_id)[0] == 0
    assert _run(capsys, "compress", thread_id, "--actor", "flag-lee@example.com")[0] == 0
    actors = [(actor, outcome) for actor, action, _, outcome in _audit() if action == "compress"]
    assert actors == [
        (UNNAMED_ACTOR, "refused"),
        ("env-kim@example.com", "completed"),
        ("flag-lee@example.com", "no_op"),
    ]
    _env(monkeypatch, YUXI_DASH_CLI_ACTOR="")
    assert _run(capsys, "compress", thread_id)[0] == 2  # an empty variable names nobody


def test_the_default_role_is_operator_and_never_admin(monkeypatch: pytest.MonkeyPatch) -> None:
    _env(monkeypatch)
    assert cli_actor("ops").role is Role.OPERATOR
    for name, role in (
        ("viewer", Role.VIEWER),
        ("ADMIN", Role.ADMIN),
        (" operator ", Role.OPERATOR),
    ):
        _env(monkeypatch, YUXI_DASH_CLI_ROLE=name)
        assert cli_actor("ops").role is role
    with pytest.raises(InvalidInput):
        cli_actor(None, settings=Settings())


def test_a_viewer_cli_cannot_compress_and_the_refusal_is_audited(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, thread_id: str
) -> None:
    _env(monkeypatch, YUXI_DASH_CLI_ROLE="viewer")
    before = _checkpoint(thread_id)
    code, out, _ = _run(capsys, "compress", thread_id, "--actor", "ops@example.com")
    assert code == 1 and out["error"]["code"] == "forbidden"
    assert _checkpoint(thread_id) == before
    assert _audit()[-1][0] == "ops@example.com" and _audit()[-1][3] != "completed"


def test_a_bad_role_is_exit_2_naming_the_variable_not_its_value(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, thread_id: str
) -> None:
    _env(monkeypatch, YUXI_DASH_CLI_ROLE="root-hunter2")
    code, out, err = _run(capsys, "compress", thread_id, "--actor", "ops")
    assert code == 2 and out["error"]["code"] == "invalid_input"
    assert "YUXI_DASH_CLI_ROLE" in out["error"]["message"]
    assert "hunter2" not in json.dumps(out) + err
