"""AppTest: memory overview on demo graphs — counts, gates, index health, audit, gated-off user."""

from __future__ import annotations

from tests.fixtures.graph import memory_audit
from yuxi_dash.settings import get_settings


def test_overview_counts_and_audit(memory_pages, graph_client) -> None:
    at = memory_pages("memory_overview.py", "alice_chen")
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    entities = graph_client.ro_value("user_alice_chen", "MATCH (n:Entity) RETURN count(n)")
    facts = graph_client.ro_value("user_alice_chen", "MATCH ()-[e:RELATES_TO]->() RETURN count(e)")
    assert metrics["Entities"] == f"{entities:,}"
    assert metrics["RELATES_TO (directed)"] == f"{facts:,}"
    assert metrics["Facts the index misses"] == "0"
    assert any("graphiti-memory" in m.value and "on" in m.value for m in at.markdown)
    rows = memory_audit(get_settings(), "alice_chen")
    assert [(r.action, r.outcome, r.detail["view"]) for r in rows] == [
        ("memory.view", "ok", "overview")
    ]


def test_gated_off_user_shows_the_gate_and_reason(memory_pages) -> None:
    at = memory_pages("memory_overview.py", "dmitri_ivanov")
    assert not at.exception
    assert not at.metric
    assert "graphiti-memory is off (the user is targeted individually)" in at.warning[0].value
    rows = memory_audit(get_settings(), "dmitri_ivanov")
    assert [r.outcome for r in rows] == ["gated_off"]


def test_picker_lists_existing_graphs(memory_pages) -> None:
    at = memory_pages("memory_overview.py", None)
    assert not at.exception
    options = at.selectbox[0].options
    assert {"alice_chen", "bruno_silva"} <= set(options)
    at.text_input(key="memory_user_search").input("brun").run()
    assert at.selectbox[0].options == ["bruno_silva"]
    at.selectbox[0].select("bruno_silva").run()
    assert not at.exception and at.metric


def test_a_server_with_no_user_graphs_says_how_to_get_some(
    memory_pages, monkeypatch, tmp_path
) -> None:
    from yuxi_dash.memory.graph.server import stop_server

    monkeypatch.delenv("GRAPHITI_FALKORDB_HOST", raising=False)
    monkeypatch.setenv("YUXI_DASH_FALKORDB_DIR", str(tmp_path / "empty-fdb"))  # a fresh server
    get_settings.cache_clear()
    try:
        at = memory_pages("memory_overview.py", None)
        assert not at.exception
        assert at.selectbox[0].options == []
        said = [i.value for i in at.main.info]
        assert len(said) == 1 and said[0].startswith("No user graphs on this FalkorDB yet")
        assert "yuxi-dash demo" in said[0] and not at.metric
    finally:
        stop_server(get_settings())


def test_falkordb_down_is_one_line(memory_pages, monkeypatch) -> None:
    monkeypatch.setenv("GRAPHITI_FALKORDB_HOST", "127.0.0.1")
    monkeypatch.setenv("GRAPHITI_FALKORDB_PORT", "1")  # nothing listens there
    get_settings.cache_clear()
    at = memory_pages("memory_overview.py", "alice_chen")
    assert not at.exception
    assert len(at.error) == 1
    assert "[memory_unavailable]" in at.error[0].value and "\n" not in at.error[0].value
    assert not at.metric


def _drifted_graph(data_dir, monkeypatch):
    """A private server whose user graph lost hub edges from its index after a restart."""
    import json

    from tests.fixtures.graph import graph_settings, make_client
    from yuxi_dash.demo.flags import demo_flags
    from yuxi_dash.demo.graph_writer import create_indexes
    from yuxi_dash.memory.graph.server import ensure_server, stop_server

    settings = graph_settings(data_dir)
    client = make_client(ensure_server(settings), settings)
    create_indexes(client, "user_drifty")
    client.write(
        "user_drifty", "UNWIND range(0, 20) AS i CREATE (:Entity {uuid: toString(i), name: 'n'})"
    )
    client.write(
        "user_drifty",
        "MATCH (h:Entity {uuid: '0'}), (m:Entity) WHERE m.uuid <> '0' "
        "CREATE (h)-[:RELATES_TO {uuid: 'e' + m.uuid, group_id: 'user_drifty', name: 'K'}]->(m)",
    )
    client.db.connection.execute_command("SAVE")
    client.close()
    stop_server(settings)
    ensure_server(settings)
    flags = data_dir / "flags.json"
    flags.write_text(json.dumps(demo_flags(["drifty"])))
    monkeypatch.setenv("YUXI_DASH_FALKORDB_DIR", str(data_dir))
    monkeypatch.setenv("YUXI_DASH_LD_FLAGS_FILE", str(flags))
    get_settings.cache_clear()
    return settings


def test_drift_is_shown_and_an_admin_repairs_it(tmp_path, monkeypatch) -> None:

    from streamlit.testing.v1 import AppTest

    from tests.fixtures.graph import REPO
    from yuxi_dash.memory.graph.client import close_clients
    from yuxi_dash.memory.graph.server import stop_server
    from yuxi_dash.ui.memory import clear_memory_caches

    settings = _drifted_graph(tmp_path / "fdb", monkeypatch)

    def overview() -> AppTest:
        clear_memory_caches()
        at = AppTest.from_file(str(REPO / "app_pages" / "memory_overview.py"), default_timeout=60)
        at.session_state["memory_user"] = "drifty"
        return at.run()

    try:
        monkeypatch.setenv("YUXI_DASH_VIEWERS", "operator@localhost")  # the local user: a viewer
        get_settings.cache_clear()
        viewer = overview()
        assert not viewer.exception
        assert "misses" in viewer.error[0].value and not viewer.button
        assert any("An admin can rebuild" in c.value for c in viewer.caption)

        monkeypatch.delenv("YUXI_DASH_VIEWERS")  # the local user: admin again
        get_settings.cache_clear()
        at = overview()
        assert not at.exception
        metrics = {m.label: m.value for m in at.metric}
        assert metrics["Facts in the graph"] == "20" and metrics["Facts the index misses"] != "0"
        # plain words on the page; the mechanism is one click away
        shown = " ".join([*metrics, *(e.value for e in at.error), *(c.value for c in at.caption)])
        assert not {"label-free", "Drift", "Node 0", "node 0"} & set(
            shown.replace(".", " ").split()
        )
        assert "label-free" in " ".join(str(m.value) for m in at.expander[0].markdown)
        at.button[0].click().run()
        assert not at.exception
        assert "the index now misses 0 fact(s)" in at.success[0].value
        repairs = [
            r for r in memory_audit(get_settings(), "drifty") if r.action == "memory.repair_indexes"
        ]
        assert [(r.outcome, r.detail["drift_after"]) for r in repairs] == [("ok", 0)]
    finally:
        close_clients()
        stop_server(settings)


def test_scan_every_user_graph(memory_pages) -> None:
    at = memory_pages("memory_overview.py", "alice_chen")
    scan = next(b for b in at.button if b.label == "Scan every user graph")
    scan.click().run()
    assert not at.exception
    table = at.dataframe[-1].value
    assert {"alice_chen", "dmitri_ivanov"} <= set(table["user_id"])
    assert bool(table[table["user_id"] == "dmitri_ivanov"]["gated_off"].iloc[0])


def test_overview_opens_with_the_probe_and_runs_the_full_check_on_request(
    memory_pages, graph_client
) -> None:
    at = memory_pages("memory_overview.py", "alice_chen")
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    node0 = graph_client.ro_value(
        "user_alice_chen", "MATCH (n)-[e:RELATES_TO]->() WHERE id(n) = 0 RETURN count(e)"
    )
    assert metrics["Quick check: facts the index finds"] == f"{node0:,} of {node0:,}"
    assert "Facts the index finds" not in metrics  # the slow count has not run
    full = next(b for b in at.button if b.label == "Run the full index check")
    full.click().run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    facts = graph_client.ro_value("user_alice_chen", "MATCH ()-[e:RELATES_TO]->() RETURN count(e)")
    assert metrics["Facts the index finds"] == f"{facts:,}"
    assert (
        metrics["Facts in the graph"] == f"{facts:,}" and metrics["Facts the index misses"] == "0"
    )
    assert not any(b.label == "Run the full index check" for b in at.button)


def test_a_user_link_opens_that_users_memory_and_the_choice_is_linkable(memory_pages) -> None:
    from streamlit.testing.v1 import AppTest

    from tests.fixtures.graph import REPO

    memory_pages("memory_overview.py", None)  # seeds the demo graphs and points the env at them
    at = AppTest.from_file(str(REPO / "app_pages" / "memory_overview.py"), default_timeout=60)
    at.query_params["user"] = "bruno_silva"
    at.run()
    assert not at.exception
    assert at.selectbox[0].value == "bruno_silva" and at.metric
    assert [r.detail["view"] for r in memory_audit(get_settings(), "bruno_silva")] == ["overview"]
    at.selectbox[0].select("alice_chen").run()
    assert at.query_params["user"] == "alice_chen"


def test_a_crafted_user_link_is_refused_without_a_query(memory_pages) -> None:
    from streamlit.testing.v1 import AppTest

    from tests.fixtures.graph import REPO

    memory_pages("memory_overview.py", None)
    at = AppTest.from_file(str(REPO / "app_pages" / "memory_overview.py"), default_timeout=60)
    at.query_params["user"] = "x' OR 1=1 //../../etc"
    at.run()
    assert not at.exception
    assert not at.metric
    assert len(at.error) == 1 and "\n" not in at.error[0].value
