"""AppTest: ratification page — next-pass counts and the tentative table with hits."""

from __future__ import annotations

from yuxi_dash.settings import get_settings


def test_ratification_page(memory_pages, graph_client) -> None:
    at = memory_pages("memory_ratification.py", "alice_chen")
    assert not at.exception
    metrics = {m.label: int(m.value) for m in at.metric}
    tentative = graph_client.ro_value(
        "user_alice_chen", "MATCH ()-[e:RELATES_TO {status: 'tentative'}]->() RETURN count(e)"
    )
    assert sum(metrics.values()) == tentative
    assert metrics["Would promote"] > 0 and metrics["Would supersede"] > 0
    table = at.dataframe[0].value
    assert set(table["action"]) == {"promote", "supersede", "leave"}
    assert (table[table["action"] == "promote"]["hits"] >= 1).all()


def _hits_caption(at) -> str:
    return next(c.value for c in at.caption if c.value.startswith("Hits from"))


def test_hits_say_they_are_on_falkordb_without_a_redis_url(memory_pages) -> None:
    """With YUXI_DASH_REDIS_URL unset the counters live on the FalkorDB server (the README's
    configuration table): the page must not say Redis."""
    at = memory_pages("memory_ratification.py", "alice_chen")
    assert not at.exception
    caption = _hits_caption(at)
    assert "FalkorDB server itself" in caption and "YUXI_DASH_REDIS_URL is unset" in caption
    assert "Redis" not in caption.replace("YUXI_DASH_REDIS_URL", "")
    assert "`mem:hits:alice_chen:<edge uuid>`" in caption


def test_hits_name_the_redis_url_setting_when_it_is_set(memory_pages, monkeypatch) -> None:
    monkeypatch.setenv("YUXI_DASH_REDIS_URL", "redis://127.0.0.1:6379/13")
    get_settings.cache_clear()
    at = memory_pages("memory_ratification.py", "alice_chen")
    assert not at.exception
    caption = _hits_caption(at)
    assert "Redis server at YUXI_DASH_REDIS_URL" in caption
    assert "FalkorDB" not in caption and "127.0.0.1" not in caption  # nor the URL itself
