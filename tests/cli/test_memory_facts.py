"""`yuxi-dash memory fact|retract|supersede|restore|reject|undo`: JSON, exit codes, audit."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.fixtures.desk import DESK_USER, THREAD, DeskGraph
from tests.fixtures.graph import memory_audit
from yuxi_dash.cli import main
from yuxi_dash.settings import get_settings

REASON = "user disputes this fact on the phone"


@pytest.fixture
def cli_env(desk_graph: DeskGraph, memory_settings, demo_flags_file, demo_graphs, monkeypatch):
    monkeypatch.setenv("YUXI_DASH_LD_FLAGS_FILE", str(demo_flags_file))
    monkeypatch.setenv("YUXI_DASH_CLI_ACTOR", "ops@example.com")
    get_settings.cache_clear()
    return desk_graph


def run(capsys, *argv: str) -> tuple[int, Any]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_fact_prints_provenance(cli_env: DeskGraph, capsys) -> None:
    code, data = run(capsys, "memory", "fact", cli_env.facts["dark"], "--user", DESK_USER)
    assert code == 0
    message = data["episodes"][0]["message"]
    assert (message["thread_id"], message["sequence"]) == (THREAD, 1)
    assert main(["memory", "fact", cli_env.facts["dark"], "--user", DESK_USER]) == 0
    text = capsys.readouterr().out
    assert "I switched my editor to dark mode last week and I like it." in text
    assert "said by user" in text
    views = [r.detail.get("view") for r in memory_audit(get_settings(), DESK_USER)]
    assert views == ["provenance", "provenance"]


def test_retract_prints_its_audit_id_and_undo_takes_it(cli_env: DeskGraph, capsys) -> None:
    fact = cli_env.facts["dark"]
    code, data = run(
        capsys,
        "memory",
        "retract",
        fact,
        "--user",
        DESK_USER,
        "--reason",
        REASON,
        "--ticket",
        "SUP-77",
    )
    assert code == 0 and isinstance(data["audit_id"], int)
    assert data["after"][fact]["attributes"]["status"] == "retracted"
    code, again = run(capsys, "memory", "retract", fact, "--user", DESK_USER, "--reason", REASON)
    assert code == 4 and again["error"]["code"] == "already_invalidated"
    code, undone = run(capsys, "memory", "undo", str(data["audit_id"]))
    assert code == 0 and undone["undoes_audit_id"] == data["audit_id"]
    assert undone["after"][fact] == data["before"][fact]
    code, twice = run(capsys, "memory", "undo", str(data["audit_id"]))
    assert code == 4 and twice["error"]["code"] == "already_undone"
    rows = [(r.action, r.outcome) for r in memory_audit(get_settings(), DESK_USER)]
    assert rows.count(("memory.retract", "ok")) == 1 and ("memory.undo", "ok") in rows


def test_undo_of_another_operators_correction_needs_admin_and_a_reason(
    cli_env: DeskGraph, capsys, monkeypatch
) -> None:
    fact = cli_env.facts["dark"]
    code, data = run(capsys, "memory", "retract", fact, "--user", DESK_USER, "--reason", REASON)
    assert code == 0
    audit_id = str(data["audit_id"])
    monkeypatch.setenv("YUXI_DASH_CLI_ACTOR", "other-ops@example.com")
    get_settings.cache_clear()
    code, refused = run(capsys, "memory", "undo", audit_id, "--reason", REASON)
    assert code == 1 and refused["error"]["code"] == "not_your_correction"
    monkeypatch.setenv("YUXI_DASH_CLI_ROLE", "admin")
    get_settings.cache_clear()
    code, refused = run(capsys, "memory", "undo", audit_id)
    assert code == 2 and refused["error"]["code"] == "reason_required"
    code, undone = run(capsys, "memory", "undo", audit_id, "--reason", REASON)
    assert code == 0 and undone["undoes_audit_id"] == data["audit_id"]
    assert undone["after"][fact] == data["before"][fact]
    rows = [
        (r.actor, r.outcome, r.detail.get("code"), r.detail.get("undoes_actor"))
        for r in memory_audit(get_settings(), DESK_USER)
        if r.action == "memory.undo"
    ]
    assert sorted(rows, key=str) == sorted(
        [
            ("other-ops@example.com", "refused", "not_your_correction", "ops@example.com"),
            ("other-ops@example.com", "refused", "reason_required", "ops@example.com"),
            ("other-ops@example.com", "ok", None, "ops@example.com"),
        ],
        key=str,
    )


def test_supersede_needs_text_and_returns_the_new_fact(cli_env: DeskGraph, capsys) -> None:
    fact = cli_env.facts["caching"]
    code, data = run(
        capsys,
        "memory",
        "supersede",
        fact,
        "--user",
        DESK_USER,
        "--reason",
        REASON,
        "--text",
        "Desk User avoids caching",
    )
    assert code == 0 and data["new_fact_uuid"]
    assert data["after"][data["new_fact_uuid"]]["fact"] == "Desk User avoids caching"


@pytest.mark.parametrize(
    ("argv", "env", "code", "error"),
    [
        (["--reason", "too short"], {}, 2, "reason_required"),
        (["--reason", REASON], {"YUXI_DASH_CLI_ROLE": "viewer"}, 1, "forbidden"),
        (["--reason", REASON, "--ticket", "bad ticket!"], {}, 2, "invalid_ticket"),
    ],
)
def test_refusals_exit_codes(
    cli_env: DeskGraph, capsys, monkeypatch, argv: list[str], env: dict, code: int, error: str
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    get_settings.cache_clear()
    got, data = run(
        capsys, "memory", "reject", cli_env.facts["tentative"], "--user", DESK_USER, *argv
    )
    assert (got, data["error"]["code"]) == (code, error)
    rows = [(r.action, r.outcome) for r in memory_audit(get_settings(), DESK_USER)]
    assert rows == [("memory.reject", "refused")]


def test_gated_off_user_exits_6(cli_env: DeskGraph, capsys) -> None:
    code, data = run(
        capsys,
        "memory",
        "retract",
        cli_env.facts["dark"],
        "--user",
        "dmitri_ivanov",
        "--reason",
        REASON,
    )
    assert code == 6 and data["error"]["code"] == "memory_gated_off"


def test_other_users_fact_is_not_found(cli_env: DeskGraph, capsys) -> None:
    code, data = run(
        capsys, "memory", "retract", cli_env.other_fact, "--user", DESK_USER, "--reason", REASON
    )
    assert code == 3 and data["error"]["code"] == "fact_not_found"
