"""`yuxi-dash tune` (yuxi_dash.cli.context), in-process: the JSON shape, the text, refusals."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from tests.tuning.fleet_builders import AGENT, simulated_fleet
from yuxi_dash.access.audit import wait_for_pending_audit
from yuxi_dash.cli import main
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AuditEntry
from yuxi_dash.tuning.fleet import ACTION

SIDE_FIGURES = (
    "compressions",
    "offload_only_passes",
    "input_tokens_total",
    "input_tokens_per_turn_mean",
)


def _outcomes() -> list[tuple[str, str]]:
    wait_for_pending_audit()
    with session_scope() as session:
        rows = session.execute(
            sa.select(AuditEntry.actor, AuditEntry.outcome).where(AuditEntry.action == ACTION)
        ).all()
    return [(actor, outcome) for actor, outcome in rows]


def test_json_has_both_sides_the_threads_and_the_fields(capsys: pytest.CaptureFixture[str]) -> None:
    simulated_fleet(threads=2, turns=6)
    argv = ["tune", "--agent", AGENT, "--summary-threshold-k", "5", "--keep-messages", "6"]
    code = main([*argv, "--tool-result-limit-tokens", "200", "--actor", "ops", "--json"])
    out, err = capsys.readouterr()
    assert code == 0
    data = json.loads(out)
    for side in ("current", "proposed"):
        assert all(figure in data[side] for figure in SIDE_FIGURES)
    assert len(data["threads"]) == 2 and data["stopped"] is False
    assert data["config"] == {
        "summary_threshold": {"value": 5, "unit": "K tokens (x 1024 = 5,120 tokens)"},
        "summary_tool_result_token_limit": {"value": 200, "unit": "tokens"},
        "summary_keep_messages": {"value": 6, "unit": "messages"},
    }
    assert "replayed 2 of 2 threads" in err  # progress goes to stderr
    assert _outcomes() == [("ops", "completed")]


def test_text_ends_with_the_fields_to_copy(capsys: pytest.CaptureFixture[str]) -> None:
    simulated_fleet(threads=1, turns=4)
    assert main(["tune", "--agent", AGENT, "--sample", "1", "--actor", "ops"]) == 0
    out = capsys.readouterr().out
    assert "a stratified sample of 1 of 1 threads" in out
    assert "FIGURE" in out and "IN FORCE" in out and "PROPOSED" in out
    assert out.rstrip().splitlines()[-3:] == [
        "summary_threshold = 8  # K tokens (x 1024 = 8,192 tokens)",
        "summary_tool_result_token_limit = 300  # tokens",
        "summary_keep_messages = 10  # messages",
    ]


def test_a_bad_setting_is_exit_2_and_one_audit_row(capsys: pytest.CaptureFixture[str]) -> None:
    simulated_fleet(threads=1, turns=2)
    assert main(["tune", "--agent", AGENT, "--keep-messages", "-1", "--actor", "ops"]) == 2
    assert "[invalid_input]" in capsys.readouterr().err
    assert _outcomes() == [("ops", "refused")]


def test_bad_workers_are_exit_2_and_one_audit_row(capsys: pytest.CaptureFixture[str]) -> None:
    simulated_fleet(threads=1, turns=2)
    assert main(["tune", "--agent", AGENT, "--workers", "0", "--actor", "ops"]) == 2
    assert "[invalid_input]" in capsys.readouterr().err
    assert _outcomes() == [("ops", "refused")]


def test_help_names_the_field_each_flag_sets(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["tune", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for field in (
        "summary_threshold:",
        "summary_tool_result_token_limit:",
        "summary_keep_messages:",
    ):
        assert field in out
