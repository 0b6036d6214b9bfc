"""Writing Graphiti's true schema: graphiti-core's node and edge classes, batched.

Records are built as graphiti-core objects (`EntityNode`, `EpisodicNode`,
`CommunityNode`, `EntityEdge`, `EpisodicEdge`, `CommunityEdge`) with
precomputed embeddings, turned into property maps exactly as graphiti-core's
`add_nodes_and_edges_bulk_tx` does (attributes flattened onto the node or edge,
datetimes as ISO strings), and written with graphiti-core's own FalkorDB
UNWIND statements in batches. The indexes are graphiti-core's FalkorDB range
and fulltext indexes. Used by the demo seeder, the test fixtures and the bench.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any, cast

import redis
from graphiti_core.driver.driver import GraphProvider
from graphiti_core.edges import CommunityEdge, EntityEdge, EpisodicEdge
from graphiti_core.graph_queries import get_fulltext_indices, get_range_indices
from graphiti_core.models.edges.edge_db_queries import (
    get_entity_edge_save_bulk_query,
    get_episodic_edge_save_bulk_query,
)
from graphiti_core.models.nodes.node_db_queries import (
    get_entity_node_save_bulk_query,
    get_episode_node_save_bulk_query,
)
from graphiti_core.nodes import CommunityNode, EntityNode, EpisodicNode
from graphiti_core.utils.datetime_utils import convert_datetimes_to_strings

from yuxi_dash.memory.graph.client import GraphClient, error_text

FALKOR = GraphProvider.FALKORDB
EMBEDDING_DIM = 16

# Community nodes and HAS_MEMBER edges: graphiti-core's single-record FalkorDB
# statements (get_community_node_save_query / get_community_edge_save_query),
# unwound over a batch.
COMMUNITY_SAVE_BULK = """
UNWIND $communities AS c
MERGE (n:Community {uuid: c.uuid})
SET n = {uuid: c.uuid, name: c.name, group_id: c.group_id, summary: c.summary,
         created_at: c.created_at, name_embedding: vecf32(c.name_embedding)}
RETURN count(n) AS written
"""
HAS_MEMBER_SAVE_BULK = """
UNWIND $members AS m
MATCH (community:Community {uuid: m.source_node_uuid})
MATCH (node:Entity {uuid: m.target_node_uuid})
MERGE (community)-[e:HAS_MEMBER {uuid: m.uuid}]->(node)
SET e = {uuid: m.uuid, group_id: m.group_id, created_at: m.created_at}
RETURN count(e) AS written
"""


def deterministic_embedding(text: str, dim: int = EMBEDDING_DIM) -> list[float]:
    """A small unit vector derived from the text's hash: stands in for an embedder (no LLM)."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    raw = [(digest[i % len(digest)] - 127.5) / 127.5 for i in range(dim)]
    norm = math.sqrt(sum(x * x for x in raw)) or 1.0
    return [round(x / norm, 6) for x in raw]


def index_statements() -> list[str]:
    """graphiti-core's FalkorDB indexes, range first (as its driver builds them)."""
    return list(get_range_indices(FALKOR)) + list(get_fulltext_indices(FALKOR))


def create_indexes(client: GraphClient, group_id: str) -> None:
    for statement in index_statements():
        try:
            client.write(group_id, statement)
        except redis.ResponseError as exc:
            if "already indexed" not in error_text(exc):
                raise


def episode_rows(episodes: Iterable[EpisodicNode]) -> list[dict[str, Any]]:
    rows = []
    for episode in episodes:
        row = dict(episode)
        row["source"] = str(episode.source.value)
        row.pop("labels", None)
        row.pop("episode_metadata", None)
        rows.append(row)
    return convert_datetimes_to_strings(rows)


def entity_rows(nodes: Iterable[EntityNode]) -> list[dict[str, Any]]:
    rows = []
    for node in nodes:
        row: dict[str, Any] = {
            "uuid": node.uuid,
            "name": node.name,
            "group_id": node.group_id,
            "summary": node.summary,
            "created_at": node.created_at,
            "name_embedding": node.name_embedding,
            "labels": sorted(set(node.labels + ["Entity"])),
        }
        for key, value in (node.attributes or {}).items():
            row.setdefault(key, value)
        rows.append(row)
    return convert_datetimes_to_strings(rows)


def fact_rows(edges: Iterable[EntityEdge]) -> list[dict[str, Any]]:
    rows = []
    for edge in edges:
        row: dict[str, Any] = {
            "uuid": edge.uuid,
            "source_node_uuid": edge.source_node_uuid,
            "target_node_uuid": edge.target_node_uuid,
            "name": edge.name,
            "fact": edge.fact,
            "group_id": edge.group_id,
            "episodes": edge.episodes,
            "created_at": edge.created_at,
            "expired_at": edge.expired_at,
            "valid_at": edge.valid_at,
            "invalid_at": edge.invalid_at,
            "reference_time": edge.reference_time,
            "fact_embedding": edge.fact_embedding,
        }
        for key, value in (edge.attributes or {}).items():
            row.setdefault(key, value)
        rows.append(row)
    return convert_datetimes_to_strings(rows)


def _batches(rows: Sequence[dict[str, Any]], size: int) -> Iterable[Sequence[dict[str, Any]]]:
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


def write_graph(
    client: GraphClient,
    group_id: str,
    *,
    episodes: Sequence[EpisodicNode] = (),
    entities: Sequence[EntityNode] = (),
    mentions: Sequence[EpisodicEdge] = (),
    facts: Sequence[EntityEdge] = (),
    communities: Sequence[CommunityNode] = (),
    members: Sequence[CommunityEdge] = (),
    batch_size: int = 2000,
    timeout_ms: int = 0,
) -> dict[str, int]:
    """Write the records in graphiti-core's shape; returns how many of each were sent."""
    # Entities first: in a real graph the user is the first node (internal id 0, the node whose edges the index loses after a restart).
    if entities:
        by_labels: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
        for row in entity_rows(entities):
            by_labels[tuple(row["labels"])].append(row)
        for labels, rows in by_labels.items():
            # graphiti-core builds one UNWIND statement per label set; reuse its text per batch.
            # graphiti-core types the result `str | Any`; for FalkorDB it is a list of
            # (query, params) pairs, one per node given.
            per_node = cast(
                list[tuple[str, dict[str, Any]]],
                get_entity_node_save_bulk_query(FALKOR, [{"labels": list(labels)}]),
            )
            query, _ = per_node[0]
            clean = [{k: v for k, v in row.items() if k != "labels"} for row in rows]
            for batch in _batches(clean, batch_size):
                client.write(group_id, query, {"nodes": list(batch)}, timeout_ms=timeout_ms)
    if episodes:
        query = get_episode_node_save_bulk_query(FALKOR)
        for batch in _batches(episode_rows(episodes), batch_size):
            client.write(group_id, query, {"episodes": list(batch)}, timeout_ms=timeout_ms)
    if mentions:
        query = get_episodic_edge_save_bulk_query(FALKOR)
        rows = convert_datetimes_to_strings([edge.model_dump() for edge in mentions])
        for batch in _batches(rows, batch_size):
            client.write(group_id, query, {"episodic_edges": list(batch)}, timeout_ms=timeout_ms)
    if facts:
        query = get_entity_edge_save_bulk_query(FALKOR)
        for batch in _batches(fact_rows(facts), batch_size):
            client.write(group_id, query, {"entity_edges": list(batch)}, timeout_ms=timeout_ms)
    if communities:
        rows = convert_datetimes_to_strings(
            [
                {
                    "uuid": c.uuid,
                    "name": c.name,
                    "group_id": c.group_id,
                    "summary": c.summary,
                    "created_at": c.created_at,
                    "name_embedding": c.name_embedding or deterministic_embedding(c.name),
                }
                for c in communities
            ]
        )
        for batch in _batches(rows, batch_size):
            client.write(group_id, COMMUNITY_SAVE_BULK, {"communities": list(batch)})
    if members:
        rows = convert_datetimes_to_strings([edge.model_dump() for edge in members])
        for batch in _batches(rows, batch_size):
            client.write(group_id, HAS_MEMBER_SAVE_BULK, {"members": list(batch)})
    return {
        "episodes": len(episodes),
        "entities": len(entities),
        "mentions": len(mentions),
        "facts": len(facts),
        "communities": len(communities),
        "members": len(members),
    }
