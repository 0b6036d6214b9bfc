"""Index drift on a real server: drift after a restart from the RDB is detected and repaired."""

from __future__ import annotations

from pathlib import Path

import redis

from tests.fixtures.graph import graph_settings, make_client
from yuxi_dash.demo.graph_writer import create_indexes
from yuxi_dash.memory.graph.index_health import (
    check_index_health,
    probe_index_health,
    rebuild_relationship_indexes,
)
from yuxi_dash.memory.graph.server import ensure_server, stop_server

G = "user_drift"


def test_drift_after_restart_is_detected_and_repaired(tmp_path: Path) -> None:
    data_dir = tmp_path / "fdb"
    settings = graph_settings(data_dir)
    try:
        client = make_client(ensure_server(settings), settings)
        create_indexes(client, G)  # graphiti-core's indexes, RELATES_TO range index included
        client.write(
            G,
            "UNWIND range(0, 50) AS i CREATE (:Entity {uuid: toString(i), group_id: $g})",
            {"g": G},
        )
        client.write(
            G,
            "MATCH (hub:Entity {uuid: '0'}), (m:Entity) WHERE m.uuid <> '0' "
            "CREATE (hub)-[:RELATES_TO {uuid: 'e' + m.uuid, group_id: $g, name: 'KNOWS'}]->(m)",
            {"g": G},
        )
        before = check_index_health(client, G)
        assert (before.index_path_facts, before.label_free_facts, before.drift) == (50, 50, 0)
        probe = probe_index_health(client, G)
        assert (probe.probe_index_path_facts, probe.probe_label_free_facts) == (50, 50)
        assert probe.drift == 0
        assert probe.label_free_facts == 50 and probe.healthy
        client.db.connection.execute_command("SAVE")
        client.close()
        stop_server(settings)

        client = make_client(ensure_server(settings), settings)
        after_restart = check_index_health(client, G)
        assert after_restart.label_free_facts == 50
        assert after_restart.drift > 0 and not after_restart.healthy
        assert any(i.label == "RELATES_TO" for i in after_restart.relationship_indexes)
        probe = probe_index_health(client, G)  # node 0 alone finds the same loss in < 1 ms
        assert probe.drift == after_restart.drift == 50 and not probe.healthy
        assert (probe.probe_index_path_facts, probe.label_free_facts) == (0, 50)
        assert probe.to_dict()["check"] == "probe" and after_restart.to_dict()["check"] == "full"

        statements = rebuild_relationship_indexes(client, G)
        assert any(s.startswith("DROP INDEX FOR ()-[e:RELATES_TO]") for s in statements)
        repaired = check_index_health(client, G)
        assert repaired.drift == 0 and repaired.index_path_facts == 50
        assert probe_index_health(client, G).drift == 0
        assert {i.label for i in repaired.relationship_indexes} == {
            i.label for i in after_restart.relationship_indexes
        }
        assert all(i.status == "OPERATIONAL" for i in repaired.relationship_indexes)
        client.close()
    finally:
        stop_server(settings)


def test_a_healthy_graph_has_no_drift(demo_graphs, graph_client) -> None:
    health = check_index_health(graph_client, "user_bruno_silva")
    assert health.drift == 0 and health.label_free_facts > 0
    assert isinstance(graph_client.db.connection, redis.Redis)
