"""The bounded `agent` label (yuxi_dash.store.labels) in the alerts a real Alertmanager holds.

409 hot threads (attached and own) over 391 agents: the alerts' ``agent``
label names the top N agents by thread count and ``other``, the annotation and
the webhook notice keep the real slug. PostgreSQL only.
"""

from __future__ import annotations

import httpx
import pytest
import sqlalchemy as sa

from tests.alerts.builders import SECRET, add_rule, many_agents
from tests.fixtures.monitoring import WebhookReceiver
from yuxi_dash.alerts.evaluate import evaluate
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.labels import OTHER_AGENT, agent_label, top_agents
from yuxi_dash.store.models import AlertOutbox

pytestmark = pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)


def test_the_setting_defaults_to_twenty_and_refuses_zero(db_url: str) -> None:
    assert get_settings().label_agents_max == 20
    with pytest.raises(ValueError):
        Settings(label_agents_max=0)
    with pytest.raises(ValueError):
        Settings(alert_deadline_seconds=0)


def test_top_agents_counts_live_threads_and_breaks_ties_by_slug(db_url: str) -> None:
    counts = many_agents(409)
    with session_scope() as session:
        assert top_agents(session, 2) == {"big-a", "big-b"}
        top = top_agents(session, 5)
    assert top == {"big-a", "big-b", "big-c", "assistant-0000", "assistant-0001"}
    assert agent_label("big-c", top) == "big-c"
    assert agent_label("assistant-0300", top) == OTHER_AGENT
    assert len(counts) == 3 + 388


@pytest.mark.parametrize("limit", [None, 3])
def test_alertmanager_gets_at_most_n_plus_one_agent_values(
    db_url: str,
    alertmanager: str,
    webhook_receiver: WebhookReceiver,
    monkeypatch: pytest.MonkeyPatch,
    limit: int | None,
) -> None:
    monkeypatch.setenv("YUXI_DASH_ALERTMANAGER_URL", alertmanager)
    monkeypatch.setenv("YUXI_DASH_ALERT_WEBHOOK_URL", webhook_receiver.url)
    monkeypatch.setenv("YUXI_DASH_ALERT_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("YUXI_DASH_ALERT_DEADLINE_SECONDS", "3")  # the webhook drains a few
    if limit is not None:
        monkeypatch.setenv("YUXI_DASH_LABEL_AGENTS_MAX", str(limit))
    get_settings.cache_clear()
    n = get_settings().label_agents_max
    counts = many_agents(409)
    add_rule("hot")

    report = evaluate()
    assert (report.firing, report.alertmanager_posted) == (409, 409)
    alerts = httpx.get(f"{alertmanager}/api/v2/alerts", timeout=10).json()
    assert len(alerts) == 409
    labels = {a["labels"]["agent"] for a in alerts}
    with session_scope() as session:
        top = top_agents(session, n)
    assert labels == top | {OTHER_AGENT} and len(labels) == n + 1
    others = [a for a in alerts if a["labels"]["agent"] == OTHER_AGENT]
    assert len(others) == 409 - sum(counts[agent] for agent in top)
    assert {a["annotations"]["agent"] for a in alerts} == set(counts)  # the real slug is kept

    with session_scope() as session:  # the webhook's notices name the real agent (not a label)
        payloads = session.scalars(sa.select(AlertOutbox.payload)).all()
    assert {p["agent"] for p in payloads} == set(counts)
    assert webhook_receiver.events()  # some went out in the pass's deadline
    assert {e["agent"] for e in webhook_receiver.events()} <= set(counts)
