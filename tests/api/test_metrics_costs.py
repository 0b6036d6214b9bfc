"""`/metrics`' model-call families (yuxi_dash.api.metrics, `costs.spend`): calls and tokens per
agent always (counters), dollars and unpriced calls with a prices file (gauges); the agent
label bounded; a bad file logged once per change; scraped by a real Prometheus.
PostgreSQL only (the `api serve` process and the test share the database)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.alerts.builders import put_thread
from tests.api.test_metrics import _query, api_serve_process, serving_app, token
from yuxi_dash.api.metrics import exposition
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.labels import OTHER_AGENT
from yuxi_dash.store.models import UsageSnapshotRow

pytestmark = pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
PRICES = {
    "agent-a": {"input_per_million": 3, "output_per_million": 15},
    "*": {"input_per_million": 1, "output_per_million": 2},
}
# thread, agent, [(llm_input_tokens, next_llm_input_tokens)] of its model calls
CALLS = {
    "t-a1": ("agent-a", [(10_000, 10_500), (12_000, 12_100)]),
    "t-a2": ("agent-a", [(4_000, 4_000)]),
    "t-b1": ("agent-b", [(50_000, 51_000)]),
}


def _seed() -> None:
    for thread_id, (agent, _) in CALLS.items():
        put_thread(thread_id, 0.5, agent=agent)
    with session_scope() as session:
        for thread_id, (_, calls) in CALLS.items():
            for n, (inp, nxt) in enumerate(calls):
                session.add(
                    UsageSnapshotRow(
                        thread_id=thread_id,
                        measured_at=T0 + timedelta(minutes=n),
                        llm_input_tokens=inp,
                        next_llm_input_tokens=nxt,
                        context_window=200_000,
                        context_usage_ratio=0.0,
                        summary_trigger_tokens=100_000,
                        summary_pressure_ratio=0.0,
                        source="model_call",
                    )
                )


def _use_prices(root: Path) -> None:
    """The prices file, named in `.env` (read by this process and by `api serve` in ``root``)."""
    path = root / "prices.json"
    path.write_text(json.dumps(PRICES), encoding="utf-8")
    (root / ".env").write_text(f"YUXI_DASH_MODEL_PRICES={path}\n", encoding="utf-8")
    get_settings.cache_clear()


def _hand(agent: str, price: dict[str, float]) -> tuple[int, int, float]:
    inp = sum(i for a, calls in CALLS.values() if a == agent for i, _ in calls)
    out = sum(max(0, n - i) for a, calls in CALLS.values() if a == agent for i, n in calls)
    dollars = (
        Decimal(inp) * Decimal(str(price["input_per_million"]))
        + Decimal(out) * Decimal(str(price["output_per_million"]))
    ) / 1_000_000
    return inp, out, float(dollars)


def _scrape() -> dict[str, dict[str, float]]:
    with serving_app() as base:
        response = httpx.get(
            f"{base}/metrics", headers={"Authorization": f"Bearer {token()}"}, timeout=10
        )
    assert response.status_code == 200
    found: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(response.text):
        if family.name.startswith("yuxi_dash_model_"):
            for sample in family.samples:
                found.setdefault(sample.name, {})[sample.labels["agent"]] = sample.value
    return found


@pytest.mark.parametrize("limit", [None, 1])
def test_tokens_and_dollars_per_agent(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: int | None
) -> None:
    if limit is not None:  # agent-a has the most threads: agent-b is `other`
        monkeypatch.setenv("YUXI_DASH_LABEL_AGENTS_MAX", str(limit))
    _use_prices(tmp_path)
    _seed()
    found = _scrape()
    b = "agent-b" if limit is None else OTHER_AGENT
    a_in, a_out, a_usd = _hand("agent-a", PRICES["agent-a"])
    b_in, b_out, b_usd = _hand("agent-b", PRICES["*"])
    assert found["yuxi_dash_model_calls_total"] == {"agent-a": 3, b: 1}
    assert found["yuxi_dash_model_input_tokens_total"] == {"agent-a": a_in, b: b_in}
    assert found["yuxi_dash_model_output_tokens_total"] == {"agent-a": a_out, b: b_out}
    assert found["yuxi_dash_model_cost_dollars"] == {"agent-a": a_usd, b: b_usd}
    assert found["yuxi_dash_model_unpriced_calls"] == {"agent-a": 0, b: 0}


def test_calls_no_entry_prices_are_a_gauge_not_zero_dollars(db_url: str, tmp_path: Path) -> None:
    _use_prices(tmp_path)
    (tmp_path / "prices.json").write_text(json.dumps({"agent-a": PRICES["agent-a"]}), "utf-8")
    _seed()
    found = _scrape()
    assert found["yuxi_dash_model_cost_dollars"] == {
        "agent-a": _hand("agent-a", PRICES["agent-a"])[2]
    }
    assert found["yuxi_dash_model_unpriced_calls"] == {"agent-a": 0, "agent-b": 1}


def test_without_prices_tokens_only(db_url: str) -> None:
    _seed()
    found = _scrape()
    assert "yuxi_dash_model_cost_dollars" not in found
    assert "yuxi_dash_model_unpriced_calls" not in found
    assert found["yuxi_dash_model_input_tokens_total"]["agent-b"] == 50_000


def test_a_bad_prices_file_leaves_the_dollars_out_not_the_scrape(
    db_url: str, tmp_path: Path
) -> None:
    _use_prices(tmp_path)
    (tmp_path / "prices.json").write_text("{not json", encoding="utf-8")
    _seed()
    found = _scrape()
    assert "yuxi_dash_model_cost_dollars" not in found
    assert found["yuxi_dash_model_calls_total"] == {"agent-a": 3, "agent-b": 1}


def test_a_bad_prices_file_is_logged_once_per_change_not_per_scrape(
    db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _use_prices(tmp_path)
    path = tmp_path / "prices.json"
    path.write_text("{not json", encoding="utf-8")
    _seed()

    def warnings() -> int:
        return sum("prices file is not valid" in r.getMessage() for r in caplog.records)

    with caplog.at_level(logging.WARNING, logger="yuxi_dash.api.metrics"):
        for _ in range(3):
            assert b"yuxi_dash_model_calls_total" in exposition(get_settings())
        assert warnings() == 1
        path.write_text("[still, not, prices]", encoding="utf-8")  # another size: a change
        exposition(get_settings())
        exposition(get_settings())
        assert warnings() == 2


def test_prometheus_sums_the_dollars_per_agent(
    db_url: str, prometheus: Callable[..., str], tmp_path: Path
) -> None:
    _use_prices(tmp_path)
    _seed()
    scrape_token = token()
    with api_serve_process(db_url, tmp_path) as target:
        url = prometheus(target, token=scrape_token)
        result = _query(url, "sum by (agent) (yuxi_dash_model_cost_dollars)")
    dollars = {r["metric"]["agent"]: float(r["value"][1]) for r in result}  # type: ignore[index]
    assert dollars == {
        "agent-a": _hand("agent-a", PRICES["agent-a"])[2],
        "agent-b": _hand("agent-b", PRICES["*"])[2],
    }
