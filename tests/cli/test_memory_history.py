"""`yuxi-dash memory facts|entities|stats USER --as-of ISO` and `memory diff USER --from --to`:
JSON, text, exit codes and audit, on the desk graph (graphiti-core's classes, real FalkorDB)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.fixtures.desk import DESK_USER, DeskGraph
from tests.fixtures.graph import memory_audit
from tests.memory.history.conftest import AFTER, BEFORE, BETWEEN
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


def test_facts_as_of_json_and_text(cli_env: DeskGraph, capsys) -> None:
    f = cli_env.facts
    code, data = run(capsys, "memory", "facts", DESK_USER, "--as-of", BETWEEN.isoformat())
    assert code == 0 and data["total"] == 6 and data["valid_then"] == 4
    assert {x["uuid"] for x in data["facts"] if not x["valid_then"]} == {
        f["contractor"],
        f["laptop"],
    }
    assert main(["memory", "facts", DESK_USER, "--as-of", "2026-01-05T09:03:30"]) == 0
    text = capsys.readouterr().out
    assert "3 fact(s) held, 3 valid in the world then" in text
    assert "Desk User" in text and f["dark"] in text
    code, data = run(
        capsys, "memory", "facts", DESK_USER, "--as-of", AFTER.isoformat(), "--entity",
        cli_env.entities["acme"],
    )  # fmt: skip
    assert code == 0 and [x["uuid"] for x in data["facts"]] == [f["full_time"]]
    views = [r.detail.get("view") for r in memory_audit(get_settings(), DESK_USER)]
    assert views == ["as_of", "as_of", "as_of"]


def test_stats_and_entities_as_of(cli_env: DeskGraph, capsys) -> None:
    code, data = run(capsys, "memory", "stats", DESK_USER, "--as-of", BEFORE.isoformat())
    assert code == 0
    assert (data["held_facts"], data["episodes"], data["entities"]) == (3, 3, 5)
    code, data = run(capsys, "memory", "entities", DESK_USER, "--as-of", "2025-01-01")
    assert code == 0 and data["total"] == 0


def test_a_bad_moment_is_exit_2_and_audited(cli_env: DeskGraph, capsys) -> None:
    code, data = run(capsys, "memory", "facts", DESK_USER, "--as-of", "last tuesday")
    assert code == 2 and data["error"]["code"] == "invalid_input"
    rows = memory_audit(get_settings(), DESK_USER)
    assert ("refused", "as_of", "invalid_input") in [
        (r.outcome, r.detail.get("view"), r.detail.get("code")) for r in rows
    ]


def test_diff_names_the_episode_and_our_correction(cli_env: DeskGraph, capsys) -> None:
    f = cli_env.facts
    window = ("--from", BETWEEN.isoformat(), "--to", AFTER.isoformat())
    code, data = run(capsys, "memory", "diff", DESK_USER, *window)
    assert code == 0 and data["counts"]["retired"] == 2
    assert {x["uuid"] for x in data["retired"]} == {f["contractor"], f["laptop"]}
    assert main(["memory", "diff", DESK_USER, *window]) == 0
    text = capsys.readouterr().out
    assert "2 retired" in text and "episode: episode 104, inferred" in text
    code, done = run(
        capsys, "memory", "retract", f["dark"], "--user", DESK_USER, "--reason", REASON
    )
    assert code == 0
    after_retract = datetime.now(UTC).isoformat()
    code, later = run(
        capsys, "memory", "diff", DESK_USER, "--from", AFTER.isoformat(), "--to", after_retract
    )
    assert code == 0 and [x["uuid"] for x in later["retired"]] == [f["dark"]]
    assert later["retired"][0]["by"]["audit_id"] == done["audit_id"]
    assert (
        main(["memory", "diff", DESK_USER, "--from", AFTER.isoformat(), "--to", after_retract]) == 0
    )
    assert (
        f"our retract by ops@example.com (audit row {done['audit_id']})" in capsys.readouterr().out
    )
    code, data = run(
        capsys, "memory", "diff", DESK_USER, "--from", AFTER.isoformat(), "--to", "2026-01-01"
    )
    assert code == 2 and data["error"]["code"] == "invalid_input"  # --from after --to
    looks = [(r.outcome, r.detail.get("view")) for r in memory_audit(get_settings(), DESK_USER)]
    assert (looks.count(("ok", "diff")), looks.count(("refused", "diff"))) == (5, 1)


def test_looking_back_gated_off_is_exit_6_and_sends_no_statement(
    cli_env: DeskGraph, capsys, graph_client, monkeypatch
) -> None:
    """dmitri_ivanov is gated off in the demo flags: every look back stops at the gate."""
    monkeypatch.setattr("yuxi_dash.memory.views.gate.get_client", lambda *a, **k: graph_client)
    at = ("--as-of", BETWEEN.isoformat())
    for argv in (
        ("memory", "facts", "dmitri_ivanov", *at),
        ("memory", "stats", "dmitri_ivanov", *at),
        ("memory", "entities", "dmitri_ivanov", *at),
        (
            "memory",
            "diff",
            "dmitri_ivanov",
            "--from",
            BEFORE.isoformat(),
            "--to",
            AFTER.isoformat(),
        ),
    ):
        code, data = run(capsys, *argv)
        assert code == 6 and data["error"]["code"] == "memory_gated_off"
    assert graph_client.queries_run == 0


def test_an_empty_moment_is_refused_not_ignored(cli_env: DeskGraph, capsys) -> None:
    for argv in (
        ("memory", "facts", DESK_USER, "--as-of", ""),
        ("memory", "stats", DESK_USER, "--as-of", ""),
        ("memory", "entities", DESK_USER, "--as-of", " "),
    ):
        code, data = run(capsys, *argv)
        assert code == 2 and data["error"]["code"] == "invalid_input"
    rows = memory_audit(get_settings(), DESK_USER)
    refused = [r for r in rows if r.outcome == "refused" and r.detail.get("view") == "as_of"]
    assert len(refused) == 3
