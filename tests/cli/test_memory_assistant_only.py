"""`yuxi-dash memory stats|assistant-only|retract-assistant-only|undo` on assistant-only
facts: JSON keys, the preview and its token, exit codes, the bulk undone in one
step by `memory undo`, and the audit rows."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fixtures.graph import make_client, memory_audit
from tests.memory.quality.assistant_only_graph import (
    DAY_2,
    EARLY,
    WORDS_USER,
    WordsGraph,
    plant_words,
)
from yuxi_dash.cli import main
from yuxi_dash.errors import MemoryQueryTimeout
from yuxi_dash.memory.quality import assistant_only
from yuxi_dash.memory.views.gate import DEMO_FLAGS_FILE
from yuxi_dash.settings import get_settings

REASON = "the assistant's guesses are not the user's memory"


@pytest.fixture
def cli_env(falkordb_server, memory_settings, monkeypatch) -> Iterator[WordsGraph]:
    monkeypatch.setenv("YUXI_DASH_LD_FLAGS_FILE", str(DEMO_FLAGS_FILE))  # on for this user
    monkeypatch.setenv("YUXI_DASH_CLI_ACTOR", "ops@example.com")
    get_settings.cache_clear()
    client = make_client(falkordb_server, memory_settings)
    try:
        yield plant_words(client)
    finally:
        client.close()


def run(capsys, *argv: str) -> tuple[int, Any]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_stats_json_carries_the_assistant_only_share(cli_env: WordsGraph, capsys) -> None:
    code, data = run(capsys, "memory", "stats", WORDS_USER)
    assert code == 0
    assert data["assistant_only_share"] == 5 / 13
    assert data["assistant_only_facts"] == 5 and sum(data["assistant_only_by_basis"].values()) == 13
    assert "assistant_only_live_facts" not in data
    assert data["entities"] == 2  # the stats themselves are still there
    assert main(["memory", "stats", WORDS_USER]) == 0
    assert "assistant_only_share: " in capsys.readouterr().out


def test_the_list_and_the_bulk_retract_undone_by_memory_undo(cli_env: WordsGraph, capsys) -> None:
    code, listed = run(capsys, "memory", "assistant-only", WORDS_USER)
    assert code == 0 and listed["total"] == 5 and listed["live_facts"] == 13
    assert main(["memory", "assistant-only", WORDS_USER, "--before", DAY_2.isoformat()]) == 0
    text = capsys.readouterr().out
    assert "5 of 13 live facts are assistant-only (38.5%)" in text
    assert "3 created before 2026-03-02 09:00:00 UTC" in text
    before = DAY_2.isoformat()
    args = ("memory", "retract-assistant-only", WORDS_USER, "--before", before)
    code, preview = run(capsys, *args, "--preview")
    assert code == 0 and preview["count"] == 3
    assert [f["uuid"] for f in preview["facts"]] == cli_env.uuids(EARLY)
    code, no_token = run(capsys, *args, "--reason", REASON)
    assert code == 2 and no_token["error"]["code"] == "invalid_input"
    code, done = run(capsys, *args, "--reason", REASON, "--token", preview["preview_token"])
    assert code == 0 and done["count"] == 3
    code, stats = run(capsys, "memory", "stats", WORDS_USER)
    assert stats["assistant_only_share"] == 2 / 10
    code, undone = run(capsys, "memory", "undo", str(done["audit_id"]))
    assert code == 0 and undone["count"] == 3 and undone["undoes_audit_id"] == done["audit_id"]
    code, stats = run(capsys, "memory", "stats", WORDS_USER)
    assert stats["assistant_only_share"] == 5 / 13
    rows = [(r.action, r.outcome) for r in memory_audit(get_settings(), WORDS_USER)]
    assert rows.count(("memory.bulk_retract", "ok")) == 1
    assert rows.count(("memory.bulk_retract", "refused")) == 1
    assert rows.count(("memory.bulk_undo", "ok")) == 1


def test_a_bad_moment_and_a_viewer_are_refused(cli_env: WordsGraph, capsys, monkeypatch) -> None:
    code, bad = run(
        capsys, "memory", "retract-assistant-only", WORDS_USER, "--before", "soon", "--preview"
    )
    assert code == 2 and bad["error"]["code"] == "invalid_moment"
    monkeypatch.setenv("YUXI_DASH_CLI_ROLE", "viewer")
    get_settings.cache_clear()
    code, viewer = run(
        capsys,
        "memory",
        "retract-assistant-only",
        WORDS_USER,
        "--before",
        DAY_2.isoformat(),
        "--reason",
        REASON,
        "--token",
        "0" * 32,
    )
    assert code == 1 and viewer["error"]["code"] == "forbidden"
    rows = [
        (r.action, r.outcome, r.detail.get("code"))
        for r in memory_audit(get_settings(), WORDS_USER)
    ]
    assert ("memory.bulk_retract_preview", "refused", "invalid_moment") in rows
    assert ("memory.bulk_retract", "refused", "forbidden") in rows


def test_stats_still_print_when_the_share_cannot_be_read(
    cli_env: WordsGraph, capsys, monkeypatch
) -> None:
    def times_out(*_args: Any, **_kw: Any) -> Any:
        raise MemoryQueryTimeout("the graph query ran out of time")

    monkeypatch.setattr(assistant_only, "count_bases", times_out)
    code, data = run(capsys, "memory", "stats", WORDS_USER)
    assert code == 0 and data["entities"] == 2
    assert data["assistant_only_share"] is None
    assert data["assistant_only_error"] == "memory_query_timeout"


def test_the_fleet_says_how_many_user_graphs_it_left_out(
    cli_env: WordsGraph, falkordb_server, memory_settings, capsys
) -> None:
    client = make_client(falkordb_server, memory_settings)
    try:
        plant_words(client, "words_other")
        code, fleet = run(capsys, "memory", "assistant-only", "--all")
        assert main(["memory", "assistant-only", "--all", "--limit", "1"]) == 0
        text = capsys.readouterr().out
    finally:
        client.delete_graph("user_words_other")
        client.close()
    assert code == 0 and fleet["truncated"] is False and fleet["total"] >= 2
    users = [r["user_id"] for r in fleet["users"]]
    assert WORDS_USER in users and "words_other" in users
    assert f"the first 1 of {fleet['total']} user graphs" in text
    assert text.splitlines()[0].split() == [
        "user_id",
        "share",
        "assistant_only_facts",
        "live_facts",
        "error",
    ]
