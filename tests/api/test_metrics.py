"""`GET /metrics` (yuxi_dash.api.metrics) served by real uvicorn and scraped by a real Prometheus."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from tests.alerts.builders import OPERATOR, add_rule, put_thread
from tests.fixtures.live_server import free_port
from yuxi_dash.alerts.evaluate import evaluate
from yuxi_dash.alerts.hooks import after_attach_scan
from yuxi_dash.api.metrics import router
from yuxi_dash.audit import record_audit
from yuxi_dash.settings import get_settings
from yuxi_dash.store.models import ORIGIN_ATTACHED

pytestmark = pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
THREADS = {
    "t-cold": (0.10, "agent-a", "dashboard"),
    "t-warm": (0.82, "agent-a", "dashboard"),
    "t-hot-1": (0.90, "agent-a", "dashboard"),
    "t-hot-2": (0.95, "agent-b", ORIGIN_ATTACHED),
    "t-over": (1.20, "agent-b", ORIGIN_ATTACHED),
}


@dataclass
class Scan:
    source: str = "db.example:5432/platform"
    seconds: float = 2.5
    projected: int = 7


@contextmanager
def serving_metrics() -> Iterator[str]:
    """A minimal FastAPI app with the metrics router, on real uvicorn on loopback."""
    app = FastAPI()
    app.include_router(router)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def seed() -> None:
    for thread_id, (pressure, agent, origin) in THREADS.items():
        put_thread(thread_id, pressure, agent=agent, origin=origin)
    add_rule("hot")
    evaluate()
    after_attach_scan(get_settings(), Scan())
    for outcome, code in (("completed", None), ("refused", "thread_busy")):
        detail = {"code": code} if code else {}
        record_audit(actor=OPERATOR.id, action="compress", target="thread:t-hot-1",
                     outcome=outcome, detail=detail)  # fmt: skip


def test_exposition_has_the_aggregates(db_url: str) -> None:
    seed()
    with serving_metrics() as target:
        text = httpx.get(f"http://{target}/metrics", timeout=10).text
    assert 'yuxi_dash_threads{agent="agent-a",band="85_100",platform="own"} 1.0' in text
    assert 'yuxi_dash_threads{agent="agent-b",band="ge_100",platform="attached"} 1.0' in text
    assert 'yuxi_dash_compress_total{code="thread_busy",outcome="refused"} 1.0' in text
    assert 'yuxi_dash_alerts{rule="hot",severity="warning",state="firing"} 3.0' in text
    assert 'yuxi_dash_thread_summary_pressure_bucket{le="0.85"} 2.0' in text
    assert "yuxi_dash_metrics_database_up 1.0" in text
    assert 'yuxi_dash_attach_scan_duration_seconds{source="db.example:5432/platform"} 2.5' in text
    for thread_id in THREADS:
        assert thread_id not in text


def test_prometheus_scrapes_and_promql_counts_the_bands(
    db_url: str, prometheus: Callable[[str], str]
) -> None:
    seed()
    with serving_metrics() as target:
        url = prometheus(target)
        query = "sum by (band) (yuxi_dash_threads)"
        deadline = time.monotonic() + 60
        result: list[dict[str, object]] = []
        while time.monotonic() < deadline:
            response = httpx.get(f"{url}/api/v1/query", params={"query": query}, timeout=5)
            result = response.json()["data"]["result"]
            if result:
                break
            time.sleep(0.5)
        bands = {r["metric"]["band"]: float(r["value"][1]) for r in result}  # type: ignore[index]
        assert bands == {"lt_50": 1.0, "80_85": 1.0, "85_100": 2.0, "ge_100": 1.0}
        series = httpx.get(
            f"{url}/api/v1/series", params={"match[]": '{__name__=~"yuxi_dash_.+"}'}, timeout=5
        ).json()["data"]
    assert series
    for labels in series:
        assert "thread_id" not in labels
        assert not set(labels.values()) & set(THREADS)
