"""`yuxi-dash costs` and the `cost_usd` of `yuxi-dash threads --json`: null and a hint without
a prices file, the hand sum of the recorded calls with one, one typed error for a bad file."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from yuxi_dash.cli import main
from yuxi_dash.costs.prices import NO_PRICES_HINT
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AuditEntry, UsageSnapshotRow

IN_PER_M, OUT_PER_M = Decimal("1.25"), Decimal("10")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def _simulated_thread() -> str:
    from yuxi_dash.sim.run import simulate

    return simulate(get_settings(), threads=1, turns=3, seed=5).threads[0].thread_id


def _hand_sum(thread_id: str) -> float:
    """Each recorded call's input, and what its answer added to the next input, priced."""
    with session_scope() as session:
        rows = session.execute(
            sa.select(UsageSnapshotRow.llm_input_tokens, UsageSnapshotRow.next_llm_input_tokens)
            .where(UsageSnapshotRow.thread_id == thread_id)
            .where(UsageSnapshotRow.source.in_(("model_call", "auto_compaction")))
        ).all()
    assert rows, "the simulated thread recorded no model call"
    total = sum(
        (Decimal(inp) * IN_PER_M + Decimal(max(0, nxt - inp)) * OUT_PER_M for inp, nxt in rows),
        Decimal(0),
    )
    return float(total / 1_000_000)


def _use_prices(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    monkeypatch.setenv("YUXI_DASH_MODEL_PRICES", str(path))
    get_settings.cache_clear()


def test_without_prices_cost_is_null_and_the_hint_is_given(
    capsys: pytest.CaptureFixture[str],
) -> None:
    thread_id = _simulated_thread()
    code, rows = run(capsys, "threads")
    assert code == 0 and [(r["thread_id"], r["cost_usd"]) for r in rows] == [(thread_id, None)]
    code, data = run(capsys, "costs", "--by", "thread")
    assert code == 0 and data["priced"] is False and data["hint"] == NO_PRICES_HINT
    assert [(r["key"], r["cost_usd"]) for r in data["rows"]] == [(thread_id, None)]
    assert data["rows"][0]["input_tokens"] > 0
    assert main(["costs"]) == 0
    assert NO_PRICES_HINT in capsys.readouterr().out


def test_with_prices_cost_is_the_hand_sum(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    thread_id = _simulated_thread()
    prices = tmp_path / "prices.json"
    prices.write_text(
        json.dumps({"*": {"input_per_million": 1.25, "output_per_million": 10}}), encoding="utf-8"
    )
    _use_prices(monkeypatch, prices)
    expected = _hand_sum(thread_id)
    code, rows = run(capsys, "threads")
    assert code == 0 and rows[0]["cost_usd"] == expected
    for view in ("thread", "user", "agent", "day"):
        code, data = run(capsys, "costs", "--by", view)
        assert code == 0 and data["hint"] is None
        assert [r["cost_usd"] for r in data["rows"]] == [expected], view
    assert main(["costs", "--by", "agent"]) == 0
    text = capsys.readouterr().out
    assert "COST" in text and "$" in text and NO_PRICES_HINT not in text


def test_a_bad_prices_file_fails_costs_on_record_and_threads_lists_without_dollars(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    thread_id = _simulated_thread()
    bad = tmp_path / "prices.json"
    bad.write_text('{"*": {"input_per_million": "cheap"}}', encoding="utf-8")
    _use_prices(monkeypatch, bad)
    code, data = run(capsys, "costs")
    assert code == 2 and data["error"]["code"] == "invalid_prices_file", data
    assert "YUXI_DASH_MODEL_PRICES" in data["error"]["message"]
    assert main(["threads", "--json"]) == 0  # the listing does not depend on the prices
    out, err = capsys.readouterr()
    assert [(r["thread_id"], r["cost_usd"]) for r in json.loads(out)] == [(thread_id, None)]
    (line,) = err.splitlines()  # one line saying why the dollars are missing
    assert "cost_usd left null" in line and "YUXI_DASH_MODEL_PRICES" in line
    with session_scope() as session:
        rows = session.execute(sa.select(AuditEntry.action, AuditEntry.outcome)).all()
    # a fault of the server's configuration, not of the request: on record as failed
    assert [tuple(r) for r in rows] == [("cli.costs", "failed")]


def test_by_day_the_newest_days_are_kept_and_the_cut_is_said(
    capsys: pytest.CaptureFixture[str],
) -> None:
    thread_id = _simulated_thread()
    start = datetime(2026, 11, 1, 12, tzinfo=UTC)
    with session_scope() as session:
        session.execute(sa.delete(UsageSnapshotRow).where(UsageSnapshotRow.thread_id == thread_id))
        for n in range(5):  # one call a day for 5 days, more than --limit 2
            session.add(
                UsageSnapshotRow(
                    thread_id=thread_id,
                    measured_at=start + timedelta(days=n),
                    llm_input_tokens=100,
                    next_llm_input_tokens=150,
                    context_window=200_000,
                    context_usage_ratio=0.0,
                    summary_trigger_tokens=100_000,
                    summary_pressure_ratio=0.0,
                    source="model_call",
                )
            )
    code, data = run(capsys, "costs", "--by", "day", "--limit", "2")
    assert code == 0 and (data["total"], data["truncated"]) == (5, True)
    assert [r["key"] for r in data["rows"]] == ["2026-11-04", "2026-11-05"]
    code, data = run(capsys, "costs", "--by", "day", "--limit", "5")
    assert (data["total"], data["truncated"], len(data["rows"])) == (5, False, 5)
    assert main(["costs", "--by", "day", "--limit", "2"]) == 0
    assert "the newest 2 of 5 rows" in capsys.readouterr().out


def test_calls_no_entry_prices_are_counted_and_model_keys_named(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    thread_id = _simulated_thread()
    prices = tmp_path / "prices.json"
    prices.write_text(
        json.dumps({"gpt-4.1": {"input_per_million": 2, "output_per_million": 8}}),
        encoding="utf-8",
    )
    _use_prices(monkeypatch, prices)
    code, data = run(capsys, "costs", "--by", "thread")
    (row,) = data["rows"]
    assert code == 0 and row["key"] == thread_id and row["cost_usd"] is None
    assert data["unpriced_calls"] == row["model_calls"] == row["unpriced_calls"] > 0
    assert data["unmatched_keys"] == ["gpt-4.1"]  # a model key no recorded call names
    assert main(["costs"]) == 0
    text = capsys.readouterr().out
    assert f"{row['model_calls']:,} model calls have no price" in text
    assert "matching no agent" in text and "gpt-4.1" in text
