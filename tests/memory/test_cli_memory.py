"""`yuxi-dash memory ...` and `yuxi-dash flags USER`: JSON shapes, exit codes, audit."""

from __future__ import annotations

import json
import os
import signal

import pytest

from tests.fixtures.graph import memory_audit
from yuxi_dash.cli import main
from yuxi_dash.settings import get_settings


@pytest.fixture
def cli_env(demo_graphs, memory_settings, demo_flags_file, monkeypatch) -> None:
    monkeypatch.setenv("YUXI_DASH_LD_FLAGS_FILE", str(demo_flags_file))
    get_settings.cache_clear()


def run(capsys, *argv: str) -> tuple[int, object]:
    code = main([*argv, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_memory_stats_json_and_audit(cli_env, capsys, graph_client) -> None:
    code, data = run(capsys, "memory", "stats", "alice_chen", "--actor", "ops@example.com")
    assert code == 0
    assert data["user_id"] == "alice_chen" and data["group_id"] == "user_alice_chen"
    assert data["relates_to_edges"] == graph_client.ro_value(
        "user_alice_chen", "MATCH ()-[e:RELATES_TO]->() RETURN count(e)"
    )
    assert data["mentions_edges"] == graph_client.ro_value(
        "user_alice_chen", "MATCH ()-[e:MENTIONS]->() RETURN count(e)"
    )
    rows = memory_audit(get_settings(), "alice_chen")
    assert [(r.actor, r.outcome, r.detail["view"]) for r in rows] == [
        ("ops@example.com", "ok", "stats")
    ]


def test_gated_off_exits_6(cli_env, capsys) -> None:
    code, data = run(capsys, "memory", "stats", "dmitri_ivanov")
    assert code == 6
    assert data["error"]["code"] == "memory_gated_off"
    assert "the user is targeted individually" in data["error"]["message"]


def test_communities_gate_exits_6_and_on_works(cli_env, capsys) -> None:
    code, data = run(capsys, "memory", "communities", "bruno_silva")
    assert code == 6 and "graphiti-communities-enabled" in data["error"]["message"]
    code, data = run(capsys, "memory", "communities", "alice_chen")
    assert code == 0 and len(data["communities"]) == 4
    assert data["rebuild"]["would_run"] is True


def test_flags_json(cli_env, capsys) -> None:
    code, data = run(capsys, "flags", "dmitri_ivanov")
    assert code == 6  # memory gated off, as every memory command for this user would exit
    assert data == {
        "graphiti-memory": {"value": False, "reason": "TARGET_MATCH"},
        "graphiti-communities-enabled": {"value": False, "reason": "FALLTHROUGH"},
    }


def test_entities_facts_ratification(cli_env, capsys, graph_client) -> None:
    code, data = run(capsys, "memory", "entities", "alice_chen", "--search", "an", "--limit", "2")
    assert code == 0 and data["total"] >= 3 and len(data["entities"]) == 2
    uuid = data["entities"][0]["uuid"]
    code, data = run(capsys, "memory", "facts", "alice_chen", "--entity", uuid)
    assert code == 0 and data["entity"]["uuid"] == uuid
    code, data = run(capsys, "memory", "facts", "alice_chen", "--limit", "5")
    assert code == 0 and len(data["facts"]) == 5
    code, data = run(capsys, "memory", "ratification", "alice_chen")
    assert code == 0 and sum(data["next_pass"].values()) == len(data["tentative"])
    # for people: the CLI's one aligned table (header, rule, one line per fact)
    assert main(["memory", "facts", "alice_chen", "--limit", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "uuid",
        "source",
        "name",
        "target",
        "status",
        "source_kind",
        "created_at",
    ]
    assert set(lines[1].replace(" ", "")) == {"-"} and len(lines) == 5


def test_bad_user_ids_and_missing_graphs(cli_env, capsys) -> None:
    code, data = run(capsys, "memory", "stats", "a'})-[r]-() DELETE r //")
    assert code == 2 and data["error"]["code"] == "invalid_input"
    code, data = run(capsys, "memory", "stats", "../../etc/passwd")
    assert code == 2
    code, data = run(capsys, "memory", "stats", "nobody_at_all")
    assert code == 3 and data["error"]["code"] == "user_not_found"


def test_not_configured_gates_everything_off(demo_graphs, memory_settings, capsys) -> None:
    code, data = run(capsys, "memory", "stats", "alice_chen")
    assert code == 6 and "not configured" in data["error"]["message"]


def test_index_health_one_user_and_all(cli_env, capsys) -> None:
    code, data = run(capsys, "memory", "index-health", "alice_chen")
    assert code == 0 and data["drift"] == 0 and data["label_free_facts"] > 0
    code, rows = run(capsys, "memory", "index-health", "--all")
    assert code == 0
    by_user = {r["user_id"]: r for r in rows}
    assert by_user["dmitri_ivanov"]["gated_off"] is True
    assert "label_free_facts" not in by_user["dmitri_ivanov"]  # gated off: not read
    assert by_user["alice_chen"]["drift"] == 0
    scans = memory_audit(get_settings(), "*")  # one row for the whole scan, target memory:*
    assert [(r.action, r.detail["checked"], r.detail["drifted"]) for r in scans] == [
        ("memory.index_health_scan", len(rows) - 1, 0)
    ]


def test_repair_indexes_cli(cli_env, capsys, monkeypatch) -> None:
    code, data = run(capsys, "memory", "repair-indexes", "alice_chen", "--actor", "ops")
    assert code == 1 and data["error"]["code"] == "forbidden"  # the CLI is an operator by default
    monkeypatch.setenv("YUXI_DASH_CLI_ROLE", "admin")
    get_settings.cache_clear()
    code, data = run(capsys, "memory", "repair-indexes", "alice_chen", "--actor", "ops")
    assert code == 0 and data["after"]["drift"] == 0 and data["statements"]
    code, data = run(capsys, "memory", "repair-indexes", "dmitri_ivanov")
    assert code == 6


def test_server_start_status_stop(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("YUXI_DASH_FALKORDB_DIR", str(tmp_path / "fdb"))
    get_settings.cache_clear()
    code, data = run(capsys, "memory", "server", "status")
    assert code == 0 and data["running"] is False
    code, data = run(capsys, "memory", "server", "start")
    assert code == 0 and data["running"] and data["started_now"] and data["pid"]
    pid = data["pid"]
    code, data = run(capsys, "memory", "server", "start")
    assert data["pid"] == pid and not data["started_now"]  # reused
    code, data = run(capsys, "memory", "server", "stop")
    assert code == 0 and data["stopped"] is True
    code, data = run(capsys, "memory", "server", "status")
    assert data["running"] is False


def test_server_status_says_a_busy_server_runs(tmp_path, monkeypatch, capsys) -> None:
    """A server that does not answer (stopped here with SIGSTOP) is running, not absent."""
    monkeypatch.setenv("YUXI_DASH_FALKORDB_DIR", str(tmp_path / "fdb"))
    get_settings.cache_clear()
    code, data = run(capsys, "memory", "server", "start")
    pid = data["pid"]
    os.kill(pid, signal.SIGSTOP)
    try:
        code, data = run(capsys, "memory", "server", "status")
        assert code == 1 and data["running"] is True
        assert (data["pid"], data["answering"]) == (pid, False)
    finally:
        os.kill(pid, signal.SIGCONT)
        run(capsys, "memory", "server", "stop")
