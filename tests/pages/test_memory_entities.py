"""AppTest: entities page — search, entity facts, neighbourhood drawing."""

from __future__ import annotations


def test_entities_search_and_facts(memory_pages, graph_client) -> None:
    at = memory_pages("memory_entities.py", "alice_chen")
    assert not at.exception
    at.text_input(key="entity_search").input("Alice").run()
    assert not at.exception
    entity_select = at.selectbox[1]
    hub = graph_client.ro_value("user_alice_chen", "MATCH (n:Entity {is_user: true}) RETURN n.uuid")
    entity_select.select(hub).run()
    assert not at.exception
    assert at.subheader[0].value == "Alice Chen"
    total = graph_client.ro_value(
        "user_alice_chen", "MATCH ({uuid: $u})-[e:RELATES_TO]-() RETURN count(e)", {"u": hub}
    )
    assert any(f"{total:,} facts as source or target" in c.value for c in at.caption)
    charts = at.get("graphviz_chart")
    assert charts and "digraph" in charts[0].proto.spec
