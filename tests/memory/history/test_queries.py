"""The plans of the history statements (GRAPH.EXPLAIN on the desk graph, graphiti-core's
indexes): facts are read label-free or from their entity, never through the relationship
index, and no time comparison reaches a range index (each goes through `toString`)."""

from __future__ import annotations

import re

import pytest

from tests.fixtures.desk import DeskGraph
from tests.memory.history.conftest import BETWEEN
from yuxi_dash.memory.history import queries as hq

AT = BETWEEN.isoformat()
RAW_TIME = re.compile(r"\b\w+\.\w+_at\s*[<>]")  # `e.created_at <= $at`, not through toString
PARAMS = {
    "at": AT,
    "a": AT,
    "b": AT,
    "since": AT,
    "until": AT,
    "present": ["p"],
    "absent": ["q"],
    "corrected": ["c"],
    "unborn": ["u"],
    "limit": 5,
    "offset": 0,
    "after": "",
    "uuid": "x",
    "search": "",
    "uuids": ["x"],
    "pairs": [{"source": "x", "uuid": "y"}],
    "query": "acme",
    "group_ids": ["g"],
}
# each statement -> how its plan starts (the scan under everything else)
STARTS = {
    "facts_as_of": "All Node Scan",
    "facts_as_of_after": "All Node Scan",
    "fact_counts_as_of": "All Node Scan",
    "diff": "All Node Scan",
    "entity_facts_as_of": "Node By Index Scan | (n:Entity)",
    "entity_fact_count_as_of": "Node By Index Scan | (n:Entity)",
    "facts_by_source_and_uuid": "Node By Index Scan | (n:Entity)",
    "entity_page_as_of": "Node By Label Scan | (n:Entity)",
    "entity_count_as_of": "Node By Label Scan | (n:Entity)",
    "episodes_as_of": "Node By Label Scan | (ep:Episodic)",
    "episode_count_as_of": "Node By Label Scan | (ep:Episodic)",
    "episodes_by_uuid": "Node By Index Scan | (ep:Episodic)",  # uuid equality, no time
    "fact_fulltext_as_of": "ProcedureCall",
}


def test_every_statement_has_an_expected_plan() -> None:
    assert set(STARTS) == set(hq.ALL_QUERIES)


@pytest.mark.parametrize("name", sorted(STARTS))
def test_no_statement_reads_through_the_relationship_index(
    desk_graph: DeskGraph, graph_client, name: str
) -> None:
    plan = graph_client.explain(desk_graph.group_id, hq.ALL_QUERIES[name], PARAMS)
    assert "Edge By Index" not in plan
    assert STARTS[name] in plan
    if "Label Scan" in STARTS[name]:
        assert "Index" not in plan  # created_at compared through toString: no range index


@pytest.mark.parametrize("name", sorted(STARTS))
def test_every_time_comparison_goes_through_tostring(name: str) -> None:
    """FalkorDB's range index returns wrong rows for `<=` on a string time."""
    assert not RAW_TIME.findall(hq.ALL_QUERIES[name])
