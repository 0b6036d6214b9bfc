"""Ratification rules and hit counters read from Redis."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from yuxi_dash.memory.graph.client import hits_connection
from yuxi_dash.memory.views.ratification import assess, hits_key, next_action, read_hits

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def test_rules() -> None:
    assert next_action(1, NOW - timedelta(days=2), NOW)[0] == "promote"
    assert next_action(3, NOW - timedelta(days=90), NOW)[0] == "promote"
    assert next_action(0, NOW - timedelta(days=31), NOW)[0] == "supersede"
    assert next_action(0, NOW - timedelta(days=30), NOW)[0] == "leave"  # not *older* than 30
    assert next_action(0, NOW - timedelta(days=3), NOW)[0] == "leave"
    assert next_action(0, None, NOW)[0] == "leave"


def test_hits_come_from_the_design_key(memory_settings) -> None:
    conn = hits_connection(memory_settings)  # no YUXI_DASH_REDIS_URL: the FalkorDB server
    conn.set(hits_key("u1", "e-hit"), 2)
    conn.delete(hits_key("u1", "e-none"))
    assert hits_key("u1", "e-hit") == "mem:hits:u1:e-hit"
    hits = read_hits(conn, "u1", ["e-hit", "e-none"])
    assert hits == {"e-hit": 2, "e-none": 0}
    rows = [
        {"uuid": "e-hit", "created_at": (NOW - timedelta(days=40)).isoformat()},
        {"uuid": "e-none", "created_at": (NOW - timedelta(days=40)).isoformat()},
    ]
    actions = {t.uuid: t.action for t in assess(rows, hits, now=NOW)}
    assert actions == {"e-hit": "promote", "e-none": "supersede"}
    conn.close()


def test_redis_url_setting_is_used(memory_settings) -> None:
    settings = memory_settings.model_copy(update={"redis_url": "redis://127.0.0.1:6379/15"})
    conn = hits_connection(settings)
    assert conn.connection_pool.connection_kwargs["db"] == 15
    conn.close()
