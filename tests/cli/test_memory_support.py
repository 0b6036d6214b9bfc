"""`yuxi-dash memory forget|bundle`: roles, confirmation, exit codes, files, audit row ids."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from tests.fixtures.graph import memory_audit
from tests.memory.support_graphs import REDIS_URL, SupportUsers, unique_user
from yuxi_dash.cli import main
from yuxi_dash.memory.graph.groups import derive_group_id
from yuxi_dash.memory.support.bundle_schema import BUNDLE_SCHEMA
from yuxi_dash.settings import get_settings


@pytest.fixture
def cli_env(demo_graphs, memory_settings, demo_flags_file, monkeypatch) -> None:
    monkeypatch.setenv("YUXI_DASH_LD_FLAGS_FILE", str(demo_flags_file))
    monkeypatch.setenv("YUXI_DASH_REDIS_URL", REDIS_URL)
    get_settings.cache_clear()


@pytest.fixture
def users(cli_env, graph_client) -> Iterator[SupportUsers]:
    seeded = SupportUsers(graph_client)
    yield seeded
    seeded.close()


def run(capsys, *argv: str) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_forget_needs_admin_and_the_exact_confirmation(users, capsys, monkeypatch) -> None:
    victim = unique_user()
    users.seed(victim)
    before = users.counts(victim)
    code, data = run(capsys, "memory", "forget", victim, "--confirm", victim)
    assert code == 1 and data["error"]["code"] == "forbidden"  # the CLI role is operator
    monkeypatch.setenv("YUXI_DASH_CLI_ROLE", "admin")
    get_settings.cache_clear()
    code, data = run(capsys, "memory", "forget", victim, "--confirm", victim + "x")
    assert code == 2 and data["error"]["code"] == "confirmation_mismatch"
    assert users.counts(victim) == before
    rows = memory_audit(get_settings(), victim)
    assert [(r.outcome, r.detail["code"]) for r in rows] == [
        ("refused", "confirmation_mismatch"),
        ("refused", "forbidden"),
    ]


def test_forget_prints_counts_and_the_audit_row(users, capsys, monkeypatch, graph_client) -> None:
    monkeypatch.setenv("YUXI_DASH_CLI_ROLE", "admin")
    get_settings.cache_clear()
    victim = unique_user()
    seeded = users.seed(victim)
    code, data = run(
        capsys, "memory", "forget", victim, "--confirm", victim, "--actor", "dpo@example.com"
    )
    assert code == 0 and data["verified"] is True
    assert data["deleted"]["redis_keys"] == seeded["hit_keys"]
    assert data["deleted"]["facts"] == len(seeded["graph"].facts)
    assert not graph_client.graph_exists(derive_group_id(victim))
    (row,) = memory_audit(get_settings(), victim)
    assert (row.id, row.actor, row.outcome) == (data["audit_id"], "dpo@example.com", "ok")
    # for people: one line naming the audit row
    victim2 = unique_user()
    users.seed(victim2)
    assert main(["memory", "forget", victim2, "--confirm", victim2]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"forgot {victim2}: ") and "verified: nothing is left" in line
    assert line.endswith(f"audit row {memory_audit(get_settings(), victim2)[0].id}")


def test_bundle_writes_json_and_markdown(cli_env, capsys, tmp_path: Path, graph_client) -> None:
    out = tmp_path / "alice.json"
    code, data = run(capsys, "memory", "bundle", "alice_chen", "--out", str(out))
    assert code == 0 and data["path"] == str(out)
    bundle = json.loads(out.read_text())
    jsonschema.Draft202012Validator(BUNDLE_SCHEMA).validate(bundle)
    facts = graph_client.ro_value("user_alice_chen", "MATCH ()-[e:RELATES_TO]->() RETURN count(e)")
    assert bundle["fact_count"] == data["facts"] == facts
    rows = memory_audit(get_settings(), "alice_chen")
    assert (rows[0].id, rows[0].action) == (data["audit_id"], "memory.bundle")

    md = tmp_path / "alice.md"
    assert main(["memory", "bundle", "alice_chen", "--out", str(md), "--episodes", "3"]) == 0
    line = capsys.readouterr().out
    assert f"{facts:,} facts, 3 episodes" in line and "audit row" in line
    assert md.read_text().startswith("# Support bundle: alice_chen")


def test_bundle_progress_goes_to_stderr(cli_env, capsys, tmp_path: Path, graph_client) -> None:
    out = tmp_path / "alice.json"
    code = main(["memory", "bundle", "alice_chen", "--out", str(out), "--json"])
    captured = capsys.readouterr()
    data = json.loads(captured.out)  # stdout is the result and nothing else
    assert code == 0 and data["facts"] > 0
    lines = captured.err.splitlines()
    facts = f"{data['facts']:,}"
    assert lines[0] == f"yuxi-dash: bundle: 0 of {facts} facts (0%)…"
    assert f"yuxi-dash: bundle: {facts} of {facts} facts" in "\n".join(lines)
    assert [line.split(" (")[0] for line in lines[-4:]] == [
        "yuxi-dash: bundle: episodes",
        "yuxi-dash: bundle: corrections",
        "yuxi-dash: bundle: threads",
        "yuxi-dash: bundle: done",
    ]
    assert lines[-1] == "yuxi-dash: bundle: done (100%)…"


def test_bundle_refuses_a_missing_directory(cli_env, capsys, tmp_path: Path) -> None:
    code, data = run(
        capsys, "memory", "bundle", "alice_chen", "--out", str(tmp_path / "no" / "b.json")
    )
    assert code == 2 and data["error"]["code"] == "invalid_input"
    rows = memory_audit(get_settings(), "alice_chen")
    assert [(r.action, r.outcome) for r in rows] == [("memory.bundle", "refused")]


def test_bundle_of_a_gated_off_user_exits_0_without_facts(cli_env, capsys, tmp_path) -> None:
    out = tmp_path / "d.json"
    code, data = run(capsys, "memory", "bundle", "dmitri_ivanov", "--out", str(out))
    assert code == 0 and data["gated_off"] is True and data["facts"] == 0
