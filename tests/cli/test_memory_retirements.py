"""`yuxi-dash memory retirements USER [--suspicious] [--json]`: JSON, the table, gate, audit."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from graphiti_core.edges import EntityEdge

from tests.fixtures.graph import make_client, memory_audit
from tests.memory.quality.retirement_graph import (
    RETIRE_USER,
    START,
    RetireGraph,
    plant_retirements,
)
from yuxi_dash.cli import main
from yuxi_dash.demo.graph_writer import deterministic_embedding, write_graph
from yuxi_dash.memory.graph.server import ServerHandle
from yuxi_dash.settings import get_settings


@pytest.fixture
def cli_env(
    falkordb_server: ServerHandle, memory_settings, demo_flags_file, demo_graphs, monkeypatch
) -> Iterator[RetireGraph]:
    monkeypatch.setenv("YUXI_DASH_LD_FLAGS_FILE", str(demo_flags_file))
    monkeypatch.setenv("YUXI_DASH_CLI_ACTOR", "ops@example.com")
    get_settings.cache_clear()
    client = make_client(falkordb_server, memory_settings)
    try:
        yield plant_retirements(client)
    finally:
        client.close()


def run(capsys, *argv: str) -> tuple[int, Any]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_suspicious_json_lists_only_the_unrelated_retirement(cli_env: RetireGraph, capsys) -> None:
    code, data = run(capsys, "memory", "retirements", RETIRE_USER, "--suspicious")
    assert code == 0
    [row] = data["rows"]
    assert row["uuid"] == cli_env.facts["rust"] and row["suspicious"] is True
    assert row["episode_uuid"] == cli_env.episodes["tea"]
    assert [f["uuid"] for f in row["retiring_facts"]] == [cli_env.facts["tea"]]
    assert data["retired"] == 4 and data["counts"]["suspicious"] == 1
    code, data = run(capsys, "memory", "retirements", RETIRE_USER)
    assert code == 0 and len(data["rows"]) == 4
    assert sum(r["suspicious"] for r in data["rows"]) == 1
    views = [(r.actor, r.detail["view"]) for r in memory_audit(get_settings(), RETIRE_USER)]
    assert views == [("ops@example.com", "retirements")] * 2


def test_text_names_the_flag_and_what_retired_it(cli_env: RetireGraph, capsys) -> None:
    assert main(["memory", "retirements", RETIRE_USER, "--suspicious"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0].startswith("4 retired fact(s): 1 suspicious")
    assert "Rust -[COMPILES_TO]-> wasm" in text and "SUSPICIOUS" in text
    assert f"retired by {cli_env.facts['tea']}: Bob likes tea" in text
    assert "Alice prefers jazz" not in text  # shares the relation name: not listed
    assert main(["memory", "retirements", RETIRE_USER, "--limit", "1", "--offset", "1"]) == 0
    assert "--offset 2 for more" in capsys.readouterr().out


def test_gated_off_exits_6(cli_env: RetireGraph, capsys) -> None:
    code, data = run(capsys, "memory", "retirements", "dmitri_ivanov", "--suspicious")
    assert code == 6 and data["error"]["code"] == "memory_gated_off"


def test_text_from_the_graph_is_printed_with_controls_escaped(
    cli_env: RetireGraph, graph_client, capsys
) -> None:
    tea = START + timedelta(hours=2)
    evil = EntityEdge(
        uuid="00000000-0000-4000-9000-000000000240",
        source_node_uuid="00000000-0000-4000-9000-000000000004",  # Rust
        target_node_uuid="00000000-0000-4000-9000-000000000005",  # wasm
        name="RUNS\x1b[2J",
        fact="line one\nline two\x1b]0;owned\x07",
        group_id=cli_env.group_id,
        episodes=[cli_env.episodes["first"]],
        created_at=START + timedelta(seconds=10),
        valid_at=START,
        invalid_at=tea,
        expired_at=tea + timedelta(seconds=30),
        fact_embedding=deterministic_embedding("evil"),
        attributes={"status": "active"},
    )
    write_graph(graph_client, cli_env.group_id, facts=[evil])
    assert main(["memory", "retirements", RETIRE_USER, "--suspicious"]) == 0
    text = capsys.readouterr().out
    assert "\x1b" not in text and "\x07" not in text
    assert "-[RUNS\\x1b[2J]->" in text
    assert f"{evil.uuid}: line one\\nline two\\x1b]0;owned\\x07" in text
