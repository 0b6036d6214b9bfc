"""The Cypher of one fact's provenance: the fact, its episodes, what invalidated it, its batch.

Read-only and parameterized like `memory.graph.queries`, with the same rules (no
group_id filter: the graph is the user). One point is special: a fact is found
by its uuid through the relationship index first (fast), and when the index
does not have it, by a label-free scan whose filter (`toString(e.uuid)`) no
index can serve. After a FalkorDB restart the index loses the outgoing edges
of internal node 0, usually the user, so a miss on the index path is never
taken as "no such fact" (docs/operations.md, the index drift). The other statements
never touch the relationship index: they start from an entity found by its node index
or scan edges label-free, and compare edge properties through `toString` (no index
serves it; FalkorDB's range index also returns wrong rows for `<`/`<=` on string times).
"""

from __future__ import annotations

from typing import Any

from yuxi_dash.memory.graph.client import GraphClient, Row

MAX_EPISODES = 50
MAX_EPISODE_CHARS = 20_000
MAX_BATCH = 50

_FACT_COLUMNS = """
RETURN properties(e) AS props,
       a.uuid AS source_uuid, a.name AS source_name, labels(a) AS source_labels,
       b.uuid AS target_uuid, b.name AS target_name, labels(b) AS target_labels
LIMIT 1
"""
FACT_BY_UUID_INDEX = "MATCH (a)-[e:RELATES_TO {uuid: $uuid}]->(b)" + _FACT_COLUMNS
FACT_BY_UUID_SCAN = "MATCH (a)-[e:RELATES_TO]->(b) WHERE toString(e.uuid) = $uuid" + _FACT_COLUMNS

EPISODES_BY_UUID = """
MATCH (ep:Episodic)
WHERE ep.uuid IN $uuids
RETURN ep.uuid AS uuid, ep.name AS name, ep.source AS source,
       ep.source_description AS source_description, ep.created_at AS created_at,
       ep.valid_at AS valid_at, left(ep.content, $max_chars) AS content,
       size(ep.content) AS content_chars
"""

# The newer fact on the same source, name and target that became valid at or after
# this one stopped being valid (how Graphiti's contradiction step invalidates a fact):
# a traversal from the source entity, edge properties compared as text.
INVALIDATED_BY = """
MATCH (a:Entity {uuid: $source})-[f:RELATES_TO]->(b)
WHERE toString(b.uuid) = $target AND toString(f.name) = $name
  AND toString(f.uuid) <> $uuid AND toString(f.valid_at) >= $invalid_at
RETURN f.uuid AS uuid, left(f.fact, 500) AS fact, f.valid_at AS valid_at,
       f.created_at AS created_at, f.episodes[..$episodes] AS episodes
ORDER BY valid_at, uuid
LIMIT 5
"""

# Facts by uuid, where no end is known (a successor named by superseded_by): one
# label-free scan for all of them.
FACT_SUMMARIES = """
MATCH (a)-[f:RELATES_TO]->(b)
WHERE toString(f.uuid) IN $uuids
RETURN f.uuid AS uuid, left(f.fact, 500) AS fact, f.valid_at AS valid_at,
       f.created_at AS created_at, f.episodes[..$episodes] AS episodes,
       a.name AS source, f.name AS name, b.name AS target
"""

# Facts retired in the same batch: same expired_at, touching this fact's source or target.
SAME_BATCH = """
MATCH (n:Entity {uuid: $node})-[f:RELATES_TO]-()
WHERE toString(f.expired_at) = $expired_at AND toString(f.uuid) <> $uuid
RETURN DISTINCT f.uuid AS uuid, startNode(f).name AS source, f.name AS name,
       endNode(f).name AS target, left(f.fact, 300) AS fact, f.invalid_at AS invalid_at,
       f.status AS status
LIMIT $limit
"""


def fact_by_uuid(client: GraphClient, group_id: str, fact_uuid: str) -> Row | None:
    """The fact and its two ends (index path, then a drift-proof scan), or None."""
    params = {"uuid": fact_uuid}
    rows = client.ro_rows(group_id, FACT_BY_UUID_INDEX, params)
    if not rows:
        rows = client.ro_rows(group_id, FACT_BY_UUID_SCAN, params)
    if not rows:
        return None
    row = rows[0]
    props: dict[str, Any] = dict(row.pop("props") or {})
    props.pop("fact_embedding", None)  # never shown, never sent on
    row["props"] = props
    for end in ("source_labels", "target_labels"):
        row[end] = [label for label in row[end] or [] if label != "Entity"]
    return row


def episodes_by_uuid(client: GraphClient, group_id: str, uuids: list[str]) -> dict[str, Row]:
    if not uuids:
        return {}
    rows = client.ro_rows(
        group_id,
        EPISODES_BY_UUID,
        {"uuids": list(uuids[:MAX_EPISODES]), "max_chars": MAX_EPISODE_CHARS},
    )
    return {row["uuid"]: row for row in rows}


def invalidated_by(
    client: GraphClient,
    group_id: str,
    *,
    fact_uuid: str,
    source: str,
    target: str,
    name: str,
    invalid_at: str,
) -> list[Row]:
    params = {
        "uuid": fact_uuid,
        "source": source,
        "target": target,
        "name": name,
        "invalid_at": invalid_at,
        "episodes": MAX_EPISODES,
    }
    return client.ro_rows(group_id, INVALIDATED_BY, params)


def fact_summaries(client: GraphClient, group_id: str, uuids: list[str]) -> dict[str, Row]:
    """uuid -> the fact's text, times, episodes and end names (one label-free scan)."""
    if not uuids:
        return {}
    params = {"uuids": list(dict.fromkeys(uuids)), "episodes": MAX_EPISODES}
    return {str(row["uuid"]): row for row in client.ro_rows(group_id, FACT_SUMMARIES, params)}


def fact_summary(client: GraphClient, group_id: str, fact_uuid: str) -> Row | None:
    return fact_summaries(client, group_id, [fact_uuid]).get(fact_uuid)


def same_batch(
    client: GraphClient, group_id: str, *, fact_uuid: str, nodes: list[str], expired_at: str
) -> list[Row]:
    """Other facts with this expired_at on the fact's source or target, each once."""
    seen: dict[str, Row] = {}
    for node in dict.fromkeys(nodes):
        params = {"node": node, "expired_at": expired_at, "uuid": fact_uuid, "limit": MAX_BATCH}
        for row in client.ro_rows(group_id, SAME_BATCH, params):
            seen.setdefault(row["uuid"], row)
    return sorted(seen.values(), key=lambda r: (r.get("source") or "", r.get("name") or ""))[
        :MAX_BATCH
    ]
