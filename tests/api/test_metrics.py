"""`GET /metrics` (yuxi_dash.api.metrics) in the real app: a token, the aggregates, Prometheus.

The app is `create_app()` on real uvicorn; the Prometheus test scrapes a real
`yuxi-dash api serve` process with a bearer token from a credentials file, as
deploy/prometheus/prometheus.yml does. PostgreSQL only (the process and the
test share the database).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import uvicorn
from prometheus_client.parser import text_string_to_metric_families

from tests.alerts.builders import ADMIN, OPERATOR, add_rule, many_agents, put_thread
from tests.fixtures.live_server import dashboard_env, free_port, yuxi_dash_command
from tests.store.compression_builders import item, put_record
from yuxi_dash.access.audit import record_audit, wait_for_pending_audit
from yuxi_dash.alerts.evaluate import evaluate
from yuxi_dash.alerts.hooks import after_attach_scan
from yuxi_dash.api.app import create_app
from yuxi_dash.api.service_tokens import create_token, revoke_token
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.labels import OTHER_AGENT, top_agents
from yuxi_dash.store.models import ORIGIN_ATTACHED
from yuxi_dash.store.queries import list_audit

pytestmark = pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
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
def serving_app() -> Iterator[str]:
    """The real application (`create_app`) on uvicorn on a free loopback port; yields its URL."""
    app = create_app(get_settings())
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def token(role: str = "viewer", name: str = "prometheus") -> str:
    return create_token(role=role, actor_name=name, by=ADMIN, settings=get_settings()).token


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
    seed_compressions()


def seed_compressions() -> None:
    """agent-a: 3 of 4 cited kept in view, then 0 of 2, then nothing cited; agent-b: 1 of 1."""
    cited = [item(f"k{n}", "visible", cited=True) for n in range(3)]
    put_record("t-hot-1", T0, [*cited, item("k3", "lost", cited=True), item("u", "lost")])
    put_record("t-hot-1", T0 + timedelta(hours=1),
               [item("a", "recoverable", cited=True), item("b", "lost", cited=True)])  # fmt: skip
    put_record("t-warm", T0, [item("plain", "visible")])
    put_record("t-over", T0, [item("w", "visible", cited=True)], agent="agent-b",
               origin="attached")  # fmt: skip


def test_exposition_has_the_aggregates(db_url: str) -> None:
    seed()
    with serving_app() as base:
        response = httpx.get(
            f"{base}/metrics", headers={"Authorization": f"Bearer {token()}"}, timeout=10
        )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert 'yuxi_dash_threads{agent="agent-a",band="85_100",platform="own"} 1.0' in text
    assert 'yuxi_dash_threads{agent="agent-b",band="ge_100",platform="attached"} 1.0' in text
    assert 'yuxi_dash_compress_total{code="thread_busy",outcome="refused"} 1.0' in text
    assert 'yuxi_dash_alerts{rule="hot",severity="warning",state="firing"} 3.0' in text
    assert 'yuxi_dash_thread_summary_pressure_bucket{le="0.85"} 2.0' in text
    assert "yuxi_dash_metrics_database_up 1.0" in text
    assert 'yuxi_dash_attach_scan_duration_seconds{source="db.example:5432/platform"} 2.5' in text
    for thread_id in THREADS:
        assert thread_id not in text


@pytest.mark.parametrize("limit", [None, 5])
def test_the_agent_label_names_the_top_agents_and_other(
    db_url: str, monkeypatch: pytest.MonkeyPatch, limit: int | None
) -> None:
    if limit is not None:
        monkeypatch.setenv("YUXI_DASH_LABEL_AGENTS_MAX", str(limit))
        get_settings.cache_clear()
    n = get_settings().label_agents_max
    counts = many_agents(409)  # 391 agents: a platform with one assistant per user
    with serving_app() as base:
        response = httpx.get(
            f"{base}/metrics", headers={"Authorization": f"Bearer {token()}"}, timeout=10
        )
    assert response.status_code == 200
    (threads,) = [
        f for f in text_string_to_metric_families(response.text) if f.name == "yuxi_dash_threads"
    ]
    agents = {sample.labels["agent"] for sample in threads.samples}
    with session_scope() as session:
        top = top_agents(session, n)
    assert agents == top | {OTHER_AGENT} and len(agents) == n + 1
    assert {"big-a", "big-b", "big-c"} <= top
    assert sum(sample.value for sample in threads.samples) == 409
    other = sum(s.value for s in threads.samples if s.labels["agent"] == OTHER_AGENT)
    assert other == 409 - sum(counts[agent] for agent in top)
    series = {tuple(sorted(s.labels.items())) for s in threads.samples}
    assert len(series) == len(threads.samples)  # one sample per label set (own and attached)


def test_metrics_need_a_token_and_refusals_leave_no_audit_row(db_url: str) -> None:
    seed()
    revoked = create_token(role="viewer", actor_name="old", by=ADMIN, settings=get_settings())
    revoke_token(revoked.id, by=ADMIN, settings=get_settings())
    wait_for_pending_audit()
    with session_scope() as session:
        before = len(list_audit(session))
    with serving_app() as base:
        for headers in (
            {},
            {"Authorization": "Basic dXNlcjpwYXNz"},
            {"Authorization": "Bearer yxd_not-a-token"},
            {"Authorization": f"Bearer {revoked.token}"},
        ):
            response = httpx.get(f"{base}/metrics", headers=headers, timeout=10)
            assert response.status_code == 401, headers
            assert response.headers["www-authenticate"] == "Bearer"
            assert response.json()["detail"]["code"] == "unauthorized"
            assert "yuxi_dash_threads" not in response.text
        operator = httpx.get(
            f"{base}/metrics",
            headers={"Authorization": f"Bearer {token('operator', 'ops')}"},
            timeout=10,
        )
        assert operator.status_code == 200  # any role reads the aggregates
    wait_for_pending_audit()
    with session_scope() as session:
        rows = list_audit(session)
    assert [r.action for r in rows[: len(rows) - before]] == ["api_token.create"]


def _histograms(text: str, name: str) -> dict[str, dict[str, float]]:
    """Each agent's samples of histogram ``name``: ``le`` (or count / sum) -> value."""
    (family,) = [f for f in text_string_to_metric_families(text) if f.name == name]
    out: dict[str, dict[str, float]] = {}
    for sample in family.samples:
        key = sample.labels.get("le") or sample.name.removeprefix(name + "_")
        out.setdefault(sample.labels["agent"], {})[key] = sample.value
    return out


@pytest.mark.parametrize("limit", [None, 1])
def test_the_cited_share_kept_in_view_per_agent(
    db_url: str, monkeypatch: pytest.MonkeyPatch, limit: int | None
) -> None:
    if limit is not None:  # agent-a has the most threads: agent-b is `other`
        monkeypatch.setenv("YUXI_DASH_LABEL_AGENTS_MAX", str(limit))
        get_settings.cache_clear()
    seed()
    with serving_app() as base:
        response = httpx.get(
            f"{base}/metrics", headers={"Authorization": f"Bearer {token()}"}, timeout=10
        )
    assert response.status_code == 200
    name = "yuxi_dash_compression_cited_in_view_ratio"
    found = _histograms(response.text, name)
    b = "agent-b" if limit is None else OTHER_AGENT
    assert set(found) == {"agent-a", b}
    edges = [str(t / 10) for t in range(1, 11)]
    # agent-a: shares 0.75 and 0.0 (the record with nothing cited is left out)
    assert [found["agent-a"][e] for e in edges] == [1, 1, 1, 1, 1, 1, 1, 2, 2, 2]
    assert (found["agent-a"]["+Inf"], found["agent-a"]["count"]) == (2, 2)
    assert found["agent-a"]["sum"] == pytest.approx(0.75)
    assert [found[b][e] for e in edges] == [0] * 9 + [1]
    assert (found[b]["count"], found[b]["sum"]) == (1, 1.0)
    assert "t-hot-1" not in response.text and "thread_id" not in response.text


@contextmanager
def api_serve_process(db_url: str, root: Path) -> Iterator[str]:
    """A real `yuxi-dash api serve` on the test's PostgreSQL database; yields "host:port"."""
    port = free_port()
    env = dashboard_env(root, YUXI_DASH_DATABASE_URL=db_url)
    process = subprocess.Popen(
        [*yuxi_dash_command(), "api", "serve", "--port", str(port)],
        env=env,
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, process.communicate()[1]
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "api serve did not answer"
            time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _query(url: str, query: str) -> list[dict[str, object]]:
    deadline = time.monotonic() + 60
    result: list[dict[str, object]] = []
    while time.monotonic() < deadline:
        response = httpx.get(f"{url}/api/v1/query", params={"query": query}, timeout=5)
        result = response.json()["data"]["result"]
        if result:
            break
        time.sleep(0.5)
    return result


def test_prometheus_scrapes_api_serve_and_promql_counts_the_bands(
    db_url: str, prometheus: Callable[..., str], tmp_path: Path
) -> None:
    seed()
    scrape_token = token()
    with api_serve_process(db_url, tmp_path) as target:
        url = prometheus(target, token=scrape_token)
        result = _query(url, "sum by (band) (yuxi_dash_threads)")
        bands = {r["metric"]["band"]: float(r["value"][1]) for r in result}  # type: ignore[index]
        assert bands == {"lt_50": 1.0, "80_85": 1.0, "85_100": 2.0, "ge_100": 1.0}
        (up,) = _query(url, 'up{job="yuxi-dash"}')
        assert float(up["value"][1]) == 1.0  # type: ignore[index]
        result = _query(url, "sum by (agent) (yuxi_dash_compression_cited_in_view_ratio_count)")
        counts = {r["metric"]["agent"]: float(r["value"][1]) for r in result}  # type: ignore[index]
        assert counts == {"agent-a": 2.0, "agent-b": 1.0}
        series = httpx.get(
            f"{url}/api/v1/series", params={"match[]": '{__name__=~"yuxi_dash_.+"}'}, timeout=5
        ).json()["data"]
    assert series
    for labels in series:
        assert "thread_id" not in labels
        assert not set(labels.values()) & set(THREADS)


def test_prometheus_without_the_token_sees_the_target_down(
    db_url: str, prometheus: Callable[..., str]
) -> None:
    seed()
    with serving_app() as base:
        url = prometheus(base.removeprefix("http://"))
        (up,) = _query(url, 'up{job="yuxi-dash"}')
        assert float(up["value"][1]) == 0.0  # type: ignore[index]
        assert not _query_once(url, "yuxi_dash_threads")


def _query_once(url: str, query: str) -> list[object]:
    response = httpx.get(f"{url}/api/v1/query", params={"query": query}, timeout=5)
    return list(response.json()["data"]["result"])
