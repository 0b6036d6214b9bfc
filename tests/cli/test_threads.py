"""Tests for yuxi_dash.cli.threads: the `yuxi-dash` thread commands, in-process and as a script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.fixtures.app import SEED_RECORD
from yuxi_dash.cli import main
from yuxi_dash.cli.output import render_table
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AuditEntry, ChatMessage, Conversation
from yuxi_dash.store.thread_store import load_state, state_store

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "thread.json"
SAMPLE_ID = "sample-refund-001"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    """Run `yuxi-dash argv --json` in-process: (exit code, parsed stdout, stderr)."""
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def run_text(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _state_rows() -> list[tuple[str, str]]:
    """(thread id, newest checkpoint id) of every thread the checkpointer holds."""
    threads = {item.config["configurable"]["thread_id"] for item in state_store().saver.list(None)}
    rows: list[tuple[str, str]] = []
    for thread_id in sorted(threads):
        stored = load_state(thread_id)
        assert stored is not None and stored.checkpoint_id is not None
        rows.append((thread_id, stored.checkpoint_id))
    return rows


def _simulated_thread(turns: int = 4) -> str:
    from yuxi_dash.sim.run import simulate

    report = simulate(get_settings(), threads=1, turns=turns, seed=3)
    return report.threads[0].thread_id


# --- rendering -------------------------------------------------------------------


def test_render_table_aligns_columns_and_right_aligns_numbers() -> None:
    table = render_table([("a", 1, "5.0%"), ("bbbb", 12345, "100.0%")], ("NAME", "N", "P"))
    lines = table.splitlines()
    assert lines[0].split() == ["NAME", "N", "P"]
    assert lines[2] == "a" + " " * 10 + "1" + " " * 4 + "5.0%"
    assert lines[3] == "bbbb  12,345  100.0%"


# --- import-thread ------------------------------------------------------------------


def test_import_thread_twice_is_one_thread_with_a_new_checkpoint(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, first, err = run(capsys, "import-thread", str(SAMPLE))
    assert code == 0 and err == ""
    assert first["thread_id"] == SAMPLE_ID and first["created"]
    assert _state_rows() == [(SAMPLE_ID, first["checkpoint_id"])]
    code, second, _ = run(capsys, "import-thread", str(SAMPLE))
    assert code == 0 and not second["created"]
    assert second["checkpoint_id"] != first["checkpoint_id"]
    assert _state_rows() == [(SAMPLE_ID, second["checkpoint_id"])]
    with session_scope() as session:
        assert session.scalar(sa.select(sa.func.count()).select_from(Conversation)) == 1
        chat = session.scalar(
            sa.select(sa.func.count())
            .select_from(ChatMessage)
            .where(ChatMessage.thread_id == SAMPLE_ID)
        )
        assert chat == 4  # replaced, not appended


@pytest.mark.parametrize(
    "content",
    [
        '{"thread_id": "x", "user_id": ',  # truncated JSON
        "[1, 2, 3]",  # not an object
        '{"thread_id": "x", "user_id": "u", "agent": {"slug": "a"}}',  # no messages
        '{"thread_id": "x", "user_id": "u", "agent": {"slug": "a"}, "messages": [{"type": 1}]}',
    ],
)
def test_malformed_thread_file_is_exit_2_and_changes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str
) -> None:
    assert run(capsys, "import-thread", str(SAMPLE))[0] == 0
    before = _state_rows()
    bad = tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")
    code, out, err = run(capsys, "import-thread", str(bad))
    assert code == 2
    assert set(out) == {"error"} and out["error"]["status"] == 400
    assert out["error"]["code"] == "invalid_input" and out["error"]["message"]
    assert "Traceback" not in err
    assert _state_rows() == before
    code, text, err = run_text(capsys, "import-thread", str(bad))
    assert code == 2 and text == "" and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("n", [2**70, -(2**70), 2**63])
def test_an_integer_past_64_bits_is_invalid_input_with_an_audit_row(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, n: int
) -> None:
    payload = json.loads(SAMPLE.read_text(encoding="utf-8"))
    payload["messages"][0]["data"]["additional_kwargs"] = {"n": n}
    bad = tmp_path / "big.json"
    bad.write_text(json.dumps(payload), encoding="utf-8")
    code, out, err = run(capsys, "import-thread", str(bad))
    assert code == 2 and out["error"]["code"] == "invalid_input", out
    assert "64 bits" in out["error"]["message"] and "Traceback" not in err
    assert _state_rows() == []
    with session_scope() as session:
        rows = session.execute(
            sa.select(AuditEntry.action, AuditEntry.target, AuditEntry.outcome, AuditEntry.detail)
        ).all()
    assert [tuple(r) for r in rows] == [
        ("import_thread", f"thread:{SAMPLE_ID}", "refused", {"code": "invalid_input"})
    ]


def test_an_integer_of_64_bits_is_stored_exactly(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    payload = json.loads(SAMPLE.read_text(encoding="utf-8"))
    payload["messages"][0]["data"]["additional_kwargs"] = {"hi": 2**63 - 1, "lo": -(2**63)}
    edge = tmp_path / "edge.json"
    edge.write_text(json.dumps(payload), encoding="utf-8")
    code, out, _ = run(capsys, "import-thread", str(edge))
    assert code == 0, out
    stored = load_state(SAMPLE_ID)
    assert stored is not None
    assert stored.state.messages[0].additional_kwargs == {"hi": 2**63 - 1, "lo": -(2**63)}


def test_missing_file_is_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "import-thread", str(tmp_path / "nope.json"))
    assert code == 2 and "no such file" in out["error"]["message"]


# --- threads and context ------------------------------------------------------------


def test_threads_lists_usage_highest_pressure_first(capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "import-thread", str(SAMPLE))
    hot = _simulated_thread()
    code, rows, _ = run(capsys, "threads")
    assert code == 0 and [row["thread_id"] for row in rows] == [hot, SAMPLE_ID]
    for key in (
        "thread_id",
        "user_id",
        "agent",
        "status",
        "summary_pressure_ratio",
        "context_usage_ratio",
        "next_llm_input_tokens",
        "summary_trigger_tokens",
        "busy_reason",
    ):
        assert key in rows[0]
    assert rows[0]["summary_pressure_ratio"] > rows[1]["summary_pressure_ratio"]
    threshold = rows[1]["summary_pressure_ratio"] + 0.0001
    code, filtered, _ = run(capsys, "threads", "--min-pressure", str(threshold))
    assert [row["thread_id"] for row in filtered] == [hot]
    code, by_agent, _ = run(capsys, "threads", "--agent", "support-agent")
    assert [row["thread_id"] for row in by_agent] == [SAMPLE_ID]
    code, text, _ = run_text(capsys, "threads", "--limit", "1")
    assert code == 0 and hot in text and SAMPLE_ID not in text and "PRESSURE" in text


def test_threads_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["threads", "--min-pressure", "lots"], ["threads", "--limit", "0"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


def test_a_min_pressure_given_as_a_percentage_is_refused_with_a_hint(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for value in ("85", "150"):  # 150 was once an argparse line with no hint
        code, out, _ = run(capsys, "threads", "--min-pressure", value)
        assert code == 2 and out["error"]["code"] == "invalid_input"
        assert "--min-pressure is a ratio: 0.85 means 85%" in out["error"]["message"]
    code, _, err = run_text(capsys, "threads", "--min-pressure", "85")
    assert code == 2 and err.count("\n") == 1  # one line
    assert "0.85 means 85%" in err and "[invalid_input]" in err
    with session_scope() as session:
        refused = session.scalars(
            sa.select(AuditEntry).where(AuditEntry.action == "cli.threads")
        ).all()
    assert [(row.actor, row.outcome) for row in refused] == [("cli", "refused")] * 3
    assert run(capsys, "threads", "--min-pressure", "5")[0] == 0  # 500%: still a ratio
    with pytest.raises(SystemExit) as exc:
        main(["threads", "--min-pressure", "85%"])
    assert exc.value.code == 2 and "0.85 means 85%" in capsys.readouterr().err


def test_context_shows_the_next_model_call(capsys: pytest.CaptureFixture[str]) -> None:
    from yuxi_dash.compression import count_state_tokens
    from yuxi_dash.store.queries import get_thread

    thread_id = _simulated_thread(turns=6)
    code, view, _ = run(capsys, "context", thread_id)
    assert code == 0
    with session_scope() as session:
        detail = get_thread(session, thread_id)
    assert view["total_tokens"] == count_state_tokens(detail.state)
    assert sum(entry["tokens"] for entry in view["messages"]) == view["total_tokens"]
    assert view["messages_visible"] == len(view["messages"])
    assert view["saved_results"], "offloaded results are shown as previews"
    assert all(item["preview"].startswith("[Tool result saved]") for item in view["saved_results"])
    # the next input and the pressure are the figures every page shows (issue 37 item 4)
    assert view["next_input_tokens"] == detail.summary.next_llm_input_tokens
    assert view["summary_pressure_ratio"] == detail.summary.summary_pressure_ratio
    code, text, _ = run_text(capsys, "context", thread_id)
    assert code == 0 and f"{view['total_tokens']:,} tokens" in text and "ROLE" in text
    assert f"next input: {view['next_input_tokens']:,} tokens" in text


def test_context_of_a_summarized_thread_starts_with_the_summary(
    capsys: pytest.CaptureFixture[str],
) -> None:
    thread_id = _simulated_thread(turns=5)
    code, result, _ = run(capsys, "compress", thread_id, "--actor", "ops@example.com")
    assert code == 0 and result["status"] == "completed"
    code, view, _ = run(capsys, "context", thread_id)
    assert view["summary_active"] and view["summary"]["file_path"] == result["file_path"]
    assert view["messages"][0]["role"] == "summary" and view["messages"][0]["index"] is None
    assert view["messages"][1]["index"] == view["summary"]["cutoff_index"]


def test_unknown_thread_is_exit_3_with_the_error_shape(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["context", "nope"], ["compress", "nope", "--actor", "ops"]):
        code, out, err = run(capsys, *argv)
        assert code == 3
        assert out == {
            "error": {"code": "thread_not_found", "status": 404, "message": out["error"]["message"]}
        }
        assert "Traceback" not in err


# --- compress -----------------------------------------------------------------------


def test_compress_completed_then_no_op_and_audited(capsys: pytest.CaptureFixture[str]) -> None:
    thread_id = _simulated_thread(turns=5)
    before = dict(_state_rows())[thread_id]
    code, result, _ = run(
        capsys, "compress", thread_id, "--actor", "ops@example.com", "--expected-checkpoint",
        before,
    )  # fmt: skip
    assert code == 0
    assert {"status", "before_tokens", "after_tokens", "compressed_messages", "file_path"} <= set(
        result
    )
    assert "reason" in result
    assert result["status"] == "completed" and result["after_tokens"] < result["before_tokens"]
    assert result["compressed_messages"] > 0 and result["file_path"].endswith(".md")
    after = dict(_state_rows())[thread_id]
    assert after != before and result["checkpoint_id"] == after  # one new checkpoint
    (parent,) = [c.parent_checkpoint_id for c in state_store().history(thread_id, limit=1)]
    assert parent == before
    code, again, _ = run(capsys, "compress", thread_id, "--actor", "ops@example.com")
    assert code == 0 and again["status"] == "no_op" and again["reason"]
    with session_scope() as session:
        outcomes = session.scalars(
            sa.select(AuditEntry.outcome)
            .where(AuditEntry.actor == "ops@example.com")
            .order_by(AuditEntry.id)
        ).all()
    assert outcomes[-2:] == ["completed", "no_op"]


def test_compress_says_the_file_holds_the_history(capsys: pytest.CaptureFixture[str]) -> None:
    thread_id = _simulated_thread(turns=5)
    code, text, _ = run_text(capsys, "compress", thread_id, "--actor", "ops")
    assert code == 0 and text.startswith("completed: ")
    assert "messages summarized; history in " in text  # the summary is in the thread state
    assert "summarized into" not in text
    file_path = text.split("history in ", 1)[1].split(" (checkpoint", 1)[0]
    assert file_path.endswith(".md") and "conversation_history" in file_path


def test_compress_with_a_stale_checkpoint_is_exit_4(capsys: pytest.CaptureFixture[str]) -> None:
    thread_id = _simulated_thread(turns=5)
    before = _state_rows()
    newest, older = list(state_store().history(thread_id, limit=2))
    assert newest.checkpoint_id == dict(before)[thread_id]
    stale = older.checkpoint_id
    code, out, _ = run(
        capsys, "compress", thread_id, "--actor", "ops", "--expected-checkpoint", stale
    )
    assert code == 4 and out["error"]["code"] == "stale_state" and out["error"]["status"] == 409
    assert _state_rows() == before
    code, out, _ = run(capsys, "compress", thread_id, "--actor", "ops", "--expected-checkpoint", "")
    assert code == 2 and out["error"]["code"] == "invalid_input"  # not a checkpoint id at all
    code, out, _ = run(capsys, "compress", thread_id)  # no --actor and no YUXI_DASH_CLI_ACTOR
    assert code == 2 and out["error"]["code"] == "invalid_input"
    assert _state_rows() == before


def test_compress_a_busy_thread_is_exit_4(capsys: pytest.CaptureFixture[str]) -> None:
    from yuxi_dash.service import enqueue_request

    thread_id = _simulated_thread(turns=5)
    enqueue_request(thread_id, content="one more thing")
    before = _state_rows()
    code, out, _ = run(capsys, "compress", thread_id, "--actor", "ops")
    assert code == 4 and out["error"]["code"] == "thread_busy"
    assert _state_rows() == before


def test_compress_without_the_capability_is_exit_5(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    payload = json.loads(SAMPLE.read_text())
    payload["agent"] = {**payload["agent"], "slug": "plain-agent", "capabilities": []}
    path = tmp_path / "plain.json"
    path.write_text(json.dumps(payload))
    assert run(capsys, "import-thread", str(path))[0] == 0
    code, out, _ = run(capsys, "compress", SAMPLE_ID, "--actor", "ops")
    assert code == 5
    assert out["error"] == {
        "code": "compression_unsupported",
        "status": 422,
        "message": out["error"]["message"],
    }


# --- tool-results -------------------------------------------------------------------


def test_tool_results_verify_finds_a_tampered_and_a_deleted_file(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from yuxi_dash.files.workdir import Workdir

    thread_id = _simulated_thread(turns=6)
    code, listed, _ = run(capsys, "tool-results", "--thread", thread_id)
    assert code == 0 and len(listed) >= 2
    code, clean, _ = run(capsys, "tool-results", "--verify")
    assert code == 0 and clean["checked"] == len(listed) and clean["ok"] == len(listed)
    workdir = Workdir(get_settings().workdir)
    tampered, deleted = listed[0]["path"], listed[1]["path"]
    with open(workdir.resolve(tampered), "a", encoding="utf-8") as handle:
        handle.write("\nsomeone was here")
    workdir.resolve(deleted).unlink()
    code, report, _ = run(capsys, "tool-results", "--verify")
    assert code == 1
    assert report["mismatch"] == 1 and report["missing"] == 1
    assert report["ok"] == len(listed) - 2
    problems = {item["path"]: item["status"] for item in report["problems"]}
    assert problems == {tampered: "mismatch", deleted: "missing"}
    code, text, _ = run_text(capsys, "tool-results", "--verify")
    assert code == 1 and "1 content changed, 1 file not on this volume" in text and deleted in text
    # --limit and --offset page --verify as they page the listing (newest first)
    code, page, _ = run(capsys, "tool-results", "--verify", "--limit", "1")
    assert code == 1 and (page["checked"], page["mismatch"], page["missing"]) == (1, 1, 0)
    code, rest, _ = run(capsys, "tool-results", "--verify", "--offset", "2")
    assert code == 0 and rest["checked"] == rest["ok"] == len(listed) - 2
    code, text, _ = run_text(capsys, "tool-results", "--verify", "--limit", "2")
    assert code == 1 and text.startswith("checked 2 files (--limit 2, --offset 0, newest first)")


def test_tool_results_verify_checks_exactly_the_listed_page(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from yuxi_dash.files.workdir import Workdir
    from yuxi_dash.tool_results import index as tool_results

    _simulated_thread(turns=6)
    code, everything, _ = run(capsys, "tool-results")
    assert code == 0 and len(everything) >= 3
    code, listed, _ = run(capsys, "tool-results", "--limit", "2", "--offset", "1")
    assert code == 0 and len(listed) == 2
    workdir = Workdir(get_settings().workdir)
    for item in everything:  # every file gone: the problems name exactly the rows checked
        workdir.resolve(item["path"]).unlink()
    calls: list[dict[str, Any]] = []
    verify = tool_results.verify_tool_results

    def spy(*args: Any, **kwargs: Any) -> tool_results.VerifyReport:
        if not args:  # the CLI's call (its own session then recurses with one: not counted)
            calls.append(kwargs)
        return verify(*args, **kwargs)

    monkeypatch.setattr(tool_results, "verify_tool_results", spy)
    code, page, _ = run(capsys, "tool-results", "--verify", "--limit", "2", "--offset", "1")
    assert code == 1 and page["checked"] == page["missing"] == 2
    assert {item["path"] for item in page["problems"]} == {item["path"] for item in listed}
    assert [(c["limit"], c["offset"]) for c in calls] == [(2, 1)]  # one call, paged in the library
    code, whole, _ = run(capsys, "tool-results", "--verify")
    assert code == 1 and whole["checked"] == whole["missing"] == len(everything)
    assert {item["path"] for item in whole["problems"]} == {item["path"] for item in everything}
    assert [(c["limit"], c["offset"]) for c in calls[1:]] == [(None, 0)]  # no page: every row


# --- db, simulate, demo ---------------------------------------------------------------


def test_db_downgrade_and_upgrade(capsys: pytest.CaptureFixture[str]) -> None:
    code, up, _ = run(capsys, "db", "upgrade")
    assert code == 0 and up["revision"]
    head = up["revision"]
    code, down, _ = run(capsys, "db", "downgrade", "base")
    assert code == 0 and down["revision"] is None and down["from_revision"] == head
    url = get_settings().database_url
    assert sa.inspect(sa.create_engine(url)).get_table_names() == ["alembic_version"]
    code, again, _ = run(capsys, "db", "upgrade")
    assert code == 0 and again["revision"] == head
    code, out, _ = run(capsys, "db", "downgrade", "no-such-revision")
    assert code == 2 and out["error"]["code"] == "invalid_input"


def test_simulate_command_reports_per_thread(capsys: pytest.CaptureFixture[str]) -> None:
    code, report, _ = run(capsys, "simulate", "--threads", "2", "--turns", "2", "--seed", "4")
    assert code == 0 and report["seed"] == 4
    assert [item["thread_id"] for item in report["threads"]] == ["sim-4-01", "sim-4-02"]
    assert all(item["turns"] == 2 and item["model_calls"] >= 4 for item in report["threads"])
    code, out, _ = run(capsys, "simulate", "--agent", "ghost")
    assert code == 3 and out["error"]["code"] == "agent_not_found"


def test_demo_command_seeds_threads_only_with_no_memory(
    demo_seed: Path, demo_env: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # the first run, from an empty database, is the run's shared seed: its console script
    # `yuxi-dash demo --no-memory --json` (tests/fixtures/app.py), as printed
    first = json.loads((demo_seed / SEED_RECORD).read_text())
    report, err = first["report"], first["command"]["stderr"]
    assert first["command"]["exit_code"] == 0 and "Traceback" not in err
    assert report["threads"] >= 190 and report["users"] == 30 and report["graphs"] == 0
    assert datetime.fromisoformat(report["anchor"]).tzinfo is not None  # the story's "now"
    stages = err.splitlines()  # progress on stderr, one line per stage; stdout held only JSON
    assert stages[0].startswith("yuxi-dash: building ") and "demo threads" in stages[0]
    assert any("simulating" in line for line in stages)
    assert not any("memory graphs" in line for line in stages)  # --no-memory
    # again, on this test's copy of it: nothing left to build
    code, again, err = run(capsys, "demo", "--no-memory")
    assert code == 0 and again["threads"] == report["threads"] and again["anchor"] is None
    assert "building" not in err  # no stage announced
    code, rows, _ = run(capsys, "threads", "--min-pressure", "0.85", "--limit", "500")
    assert code == 0 and len(rows) >= 20


# --- the console script -------------------------------------------------------------


def test_console_script_prints_json_alone_and_exit_codes(tmp_path: Path) -> None:
    script = shutil.which("yuxi-dash", path=str(Path(sys.executable).parent))
    assert script, "the yuxi-dash console script is installed next to the interpreter"
    env = {
        **os.environ,
        "YUXI_DASH_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}",
        "YUXI_DASH_WORKDIR": str(tmp_path / "workdir"),
    }
    env.pop("YUXI_DASH_DEBUG", None)

    def call(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [script, *argv], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
        )

    imported = call("import-thread", str(SAMPLE), "--json")
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["thread_id"] == SAMPLE_ID
    listed = call("threads", "--json")
    assert listed.returncode == 0 and listed.stderr == ""
    assert [row["thread_id"] for row in json.loads(listed.stdout)] == [SAMPLE_ID]
    missing = call("context", "nope", "--json")
    assert missing.returncode == 3
    assert json.loads(missing.stdout)["error"]["code"] == "thread_not_found"
    assert "Traceback" not in missing.stderr
    usage = call("threads", "--min-pressure", "high", "--json")
    assert usage.returncode == 2 and json.loads(usage.stdout)["error"]["code"] == "usage"
    text = call("threads")
    assert text.returncode == 0 and text.stdout.splitlines()[0].split()[:2] == ["THREAD", "USER"]


def test_unreachable_database_is_one_line_exit_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("YUXI_DASH_DATABASE_URL", "postgresql://127.0.0.1:1/nowhere")
    get_settings.cache_clear()
    code, out, err = run(capsys, "threads")
    assert code == 1 and out["error"]["code"] == "store_unavailable"
    assert out["error"]["status"] == 503 and "Traceback" not in err
    code, text, err = run_text(capsys, "context", "t-1")
    assert code == 1 and text == "" and err.count("\n") == 1 and "database unavailable" in err
