"""yuxi_dash.tuning.fleet: a replay of an agent's threads reads, sums, and audits once.

A replay writes nothing to any thread: every checkpoint, every row of our tables and every
workdir file is the same after it, and the audit log has one row more (a look), written
"pending" when planned and completed when the run ends (completed, stopped or failed). A
thread the replay refuses is counted and the run goes on; a stop between threads keeps
what was replayed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from tests.service.builders import OPERATOR, seed_thread
from tests.tuning.fleet_builders import AGENT, simulated_fleet
from yuxi_dash.access.audit import wait_for_pending_audit
from yuxi_dash.errors import InvalidInput
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AuditEntry, Base
from yuxi_dash.store.thread_store import state_store
from yuxi_dash.tuning.fleet import ACTION
from yuxi_dash.tuning.plan import plan_tuning, run_tuning
from yuxi_dash.tuning.report import summary_lines


def _tables() -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table but the audit log, as tuples, in key order."""
    found: dict[str, list[tuple[Any, ...]]] = {}
    with session_scope() as session:
        for table in Base.metadata.sorted_tables:
            if table.name == AuditEntry.__tablename__:
                continue
            rows = session.execute(sa.select(table).order_by(*table.primary_key.columns)).all()
            found[table.name] = [tuple(row) for row in rows]
    return found


def _checkpoints(thread_ids: list[str]) -> dict[str, list[str]]:
    store = state_store(get_settings())
    return {t: [cp.checkpoint_id for cp in store.history(t)] for t in thread_ids}


def _files() -> dict[str, bytes]:
    root = Path(get_settings().workdir)
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _audit() -> list[tuple[str, str, str, dict[str, Any]]]:
    wait_for_pending_audit()
    with session_scope() as session:
        rows = session.execute(
            sa.select(AuditEntry.actor, AuditEntry.outcome, AuditEntry.target, AuditEntry.detail)
            .where(AuditEntry.action == ACTION)
            .order_by(AuditEntry.id)
        ).all()
    return [(a, o, t, dict(d or {})) for a, o, t, d in rows]


def test_a_replay_changes_nothing_and_writes_one_audit_row() -> None:
    ids = simulated_fleet(threads=3, turns=8)
    tables, checkpoints, files = _tables(), _checkpoints(ids), _files()
    result = run_tuning(AGENT, actor=OPERATOR, summary_threshold_k=5, keep_messages=6)
    assert _tables() == tables
    assert _checkpoints(ids) == checkpoints
    assert _files() == files
    [(actor, outcome, target, detail)] = _audit()
    assert (actor, outcome, target) == (OPERATOR.id, "completed", f"agent:{AGENT}")
    assert detail["threads_replayed"] == 3 and detail["proposed"]["summary_threshold"] == 5
    data = result.to_dict()
    assert data["threads_replayed"] == 3 and len(data["threads"]) == 3
    for side in ("current", "proposed"):
        for figure in ("compressions", "offload_only_passes", "input_tokens_total"):
            assert data[side][figure] == sum(t[side][figure] for t in data["threads"])
        assert data[side]["input_tokens_per_turn_mean"] > 0
        assert data[side]["estimated"] is (data[side]["compressions"] > 0)  # any summary
    assert data["proposed"]["compressions"] >= data["current"]["compressions"]
    assert data["config"]["summary_threshold"] == {
        "value": 5,
        "unit": "K tokens (x 1024 = 5,120 tokens)",
    }
    assert data["config"]["summary_keep_messages"]["value"] == 6
    assert data["current"]["compressions"] > 0


def test_a_stop_between_threads_keeps_what_was_replayed() -> None:
    simulated_fleet(threads=3, turns=4)
    seen: list[int] = []
    result = run_tuning(
        AGENT,
        actor=OPERATOR,
        summary_threshold_k=4,
        on_progress=lambda done, total: seen.append(done),
        should_stop=lambda: len(seen) >= 2,
    )
    assert result.stopped and seen == [1, 2]
    assert [t["thread_id"] for t in result.threads] == [f"sim-11-0{n}" for n in (1, 2)]
    [(_actor, outcome, _target, detail)] = _audit()
    assert outcome == "stopped" and detail["threads_replayed"] == 2


def test_prices_add_dollars_beside_the_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    simulated_fleet(threads=1, turns=4)
    prices = Path("prices.json")
    prices.write_text(json.dumps({AGENT: {"input_per_million": 2.5, "output_per_million": 10}}))
    monkeypatch.setenv("YUXI_DASH_MODEL_PRICES", str(prices.absolute()))
    get_settings.cache_clear()
    data = run_tuning(AGENT, actor=OPERATOR, summary_threshold_k=4).to_dict()
    for side in ("current", "proposed"):
        assert data[side]["cost_usd"] == round(data[side]["input_tokens_total"] * 2.5 / 1e6, 4)
    assert any("input tokens only" in note for note in data["notes"])


def test_worker_processes_give_the_same_result() -> None:
    simulated_fleet(threads=3, turns=5)
    alone = run_tuning(AGENT, actor=OPERATOR, summary_threshold_k=5).to_dict()
    pooled = run_tuning(AGENT, actor=OPERATOR, summary_threshold_k=5, workers=2).to_dict()
    assert pooled == alone
    with pytest.raises(InvalidInput):
        run_tuning(AGENT, actor=OPERATOR, workers=0)
    assert [outcome for _a, outcome, _t, _d in _audit()] == ["completed", "completed", "refused"]


def _image_only(turns: int) -> list[BaseMessage]:
    """A thread whose messages carry images and no text: nothing a summary can be made of."""
    image = {
        "type": "image",
        "source_type": "base64",
        "data": "aGk=" * 3000,
        "mime_type": "image/png",
    }
    messages: list[BaseMessage] = []
    for _turn in range(turns):
        messages += [HumanMessage(content=[image]), AIMessage(content=[image])]
    return messages


def test_a_thread_the_replay_refuses_is_counted_and_the_run_goes_on() -> None:
    seed_thread("images", agent_slug="lens", messages=_image_only(12))
    seed_thread("words", agent_slug="lens", create_agent=False)
    result = run_tuning("lens", actor=OPERATOR, summary_threshold_k=1, keep_messages=2)
    assert [t["thread_id"] for t in result.threads] == ["words"]
    assert result.failed == {"summarizer_failed": 1}
    assert any(
        "could not be replayed (summarizer_failed): 1 thread" in line
        for line in summary_lines(result)
    )
    [(_actor, outcome, _target, detail)] = _audit()
    assert outcome == "completed" and detail["threads_failed"] == 1


def test_an_error_that_ends_a_run_completes_its_row_as_failed() -> None:
    simulated_fleet(threads=3, turns=3)
    run = plan_tuning(AGENT, actor=OPERATOR)
    assert [outcome for _a, outcome, _t, _d in _audit()] == ["pending"]  # before any read

    def broken(done: int, total: int) -> None:
        raise RuntimeError("the caller's progress display broke")

    with pytest.raises(RuntimeError):
        run.step(on_progress=broken)
    [(_actor, outcome, _target, detail)] = _audit()
    assert (outcome, detail["error"], detail["threads_replayed"]) == ("failed", "RuntimeError", 1)
    assert run.complete and run.error == "RuntimeError"


def test_an_interrupted_run_completes_its_row_as_stopped() -> None:
    simulated_fleet(threads=2, turns=3)
    run = plan_tuning(AGENT, actor=OPERATOR)

    def interrupt() -> bool:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run.step(should_stop=interrupt)
    [(_actor, outcome, _target, detail)] = _audit()
    assert outcome == "stopped" and detail["error"] == "interrupted"
