"""`yuxi-dash alerts rule add|list|update|delete`, `alerts evaluate`, `alerts list` (SQLite)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.alerts.builders import put_thread
from yuxi_dash.cli import main
from yuxi_dash.settings import get_settings


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code = main([*argv, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def as_admin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YUXI_DASH_CLI_ROLE", "admin")
    get_settings.cache_clear()


def test_rules_need_admin_then_evaluate_and_list(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, data = run(capsys, "alerts", "rule", "add", "--name", "hot")
    assert (code, data["error"]["code"]) == (1, "forbidden")
    as_admin(monkeypatch)
    code, data = run(capsys, "alerts", "rule", "add", "--name", "hot", "--for", "0",
                     "--severity", "critical", "--all-threads")  # fmt: skip
    assert code == 0 and data["fire_at"] == 0.85 and data["severity"] == "critical"
    code, data = run(capsys, "alerts", "rule", "add", "--name", "x", "--fire-at", "0.7",
                     "--clear-at", "0.9")  # fmt: skip
    assert (code, data["error"]["code"]) == (2, "invalid_input")
    code, data = run(capsys, "alerts", "rule", "update", "--name", "hot", "--clear-at", "0.75")
    assert code == 0 and data["clear_at"] == 0.75
    code, data = run(capsys, "alerts", "rule", "list")
    assert [r["name"] for r in data] == ["hot"]

    put_thread("t1", 0.9)
    put_thread("t2", 0.3)
    code, data = run(capsys, "alerts", "evaluate")
    assert code == 0
    assert {k: data[k] for k in ("firing", "pending", "resolved", "notified")} == {
        "firing": 1, "pending": 0, "resolved": 0, "notified": 0,
    }  # fmt: skip
    code, data = run(capsys, "alerts", "list")
    assert [(a["thread_id"], a["state"], a["rule"]) for a in data] == [("t1", "firing", "hot")]
    assert main(["alerts", "list"]) == 0
    assert "t1" in capsys.readouterr().out

    code, data = run(capsys, "alerts", "rule", "delete", "--name", "hot")
    assert code == 0
    code, data = run(capsys, "alerts", "evaluate")
    assert (data["firing"], data["resolved"]) == (0, 1)
    code, data = run(capsys, "alerts", "rule", "delete", "--name", "hot")
    assert (code, data["error"]["code"]) == (3, "alert_rule_not_found")


def test_new_rules_leave_out_threads_nobody_can_compress(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    as_admin(monkeypatch)
    code, data = run(capsys, "alerts", "rule", "add", "--name", "act")
    assert (code, data["compressible_only"]) == (0, True)
    code, data = run(capsys, "alerts", "rule", "add", "--name", "every", "--all-threads")
    assert (code, data["compressible_only"]) == (0, False)
    with pytest.raises(SystemExit) as usage:  # one or the other
        main(["alerts", "rule", "add", "--name", "x", "--all-threads", "--compressible-only"])
    assert usage.value.code == 2
    capsys.readouterr()
    put_thread("t1", 0.9)  # its agent is not registered here: nobody can compress it
    code, data = run(capsys, "alerts", "evaluate")
    assert data["firing"] == 1
    code, data = run(capsys, "alerts", "list")
    assert [(a["rule"], a["thread_id"]) for a in data] == [("every", "t1")]
    assert data[0]["compress_blocker"] == "agent agent-a not found"

    code, data = run(capsys, "alerts", "rule", "update", "--name", "every", "--compressible-only")
    assert (code, data["compressible_only"]) == (0, True)
    code, data = run(capsys, "alerts", "rule", "update", "--name", "act", "--for", "5")
    assert data["compressible_only"] is True  # not given: left as it was
    code, data = run(capsys, "alerts", "evaluate")
    assert (data["firing"], data["resolved"]) == (0, 1)
    assert main(["alerts", "rule", "list"]) == 0
    assert "compressible only" in capsys.readouterr().out
