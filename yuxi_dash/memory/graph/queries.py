"""The memory views' Cypher: one read-only, parameterized statement per question.

Rules (why: the index drift and slow range filters of docs/operations.md; each
plan read with GRAPH.EXPLAIN on a big graph):
- The graph already is the user (one graph per user), so no view filters on
  group_id: that filter sends FalkorDB down the relationship index, which after
  a restart is both wrong (it loses node 0's edges) and slow.
- Edge counts and distributions are label-free (`()-[e:RELATES_TO]->()`),
  directed, and never range-filter an edge property in a labeled pattern.
- Only the columns a view shows are returned; never an embedding; long text
  is cut server-side with `left()`; lists are paginated (SKIP/LIMIT).
- The statements that read every fact are run through `memory.cache.distributions`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from yuxi_dash.memory.graph.client import GraphClient, Row

MAX_PAGE = 500

# --- overview counts (each O(1) or a single label-free scan) ---------------
COUNT_ENTITIES = "MATCH (n:Entity) RETURN count(n) AS c"
COUNT_EPISODES = "MATCH (n:Episodic) RETURN count(n) AS c"
COUNT_COMMUNITIES = "MATCH (n:Community) RETURN count(n) AS c"
COUNT_NODES = "MATCH (n) RETURN count(n) AS c"
COUNT_RELATES_TO = "MATCH ()-[e:RELATES_TO]->() RETURN count(e) AS c"
COUNT_MENTIONS = "MATCH ()-[e:MENTIONS]->() RETURN count(e) AS c"
COUNT_HAS_MEMBER = "MATCH ()-[e:HAS_MEMBER]->() RETURN count(e) AS c"

# The index path graphiti-core takes (labeled, group-filtered): only for index health.
COUNT_RELATES_TO_INDEX_PATH = "MATCH (n:Entity)-[e:RELATES_TO]->(m:Entity) WHERE e.group_id IN $group_ids RETURN count(e) AS c"

# The index-path probe (after a restart the relationship index loses exactly the
# outgoing edges of internal node 0): node 0's facts through the same labeled,
# group-filtered index path, and by a plain traversal. Both well under 1 ms where
# the full index-path count above takes 1.7-3 s on 200,000 facts.
PROBE_INDEX_PATH = (
    "MATCH (n:Entity)-[e:RELATES_TO]->(m:Entity) WHERE id(n) = 0 AND e.group_id IN $group_ids "
    "RETURN count(e) AS c"
)
PROBE_LABEL_FREE = "MATCH (n)-[e:RELATES_TO]->() WHERE id(n) = 0 RETURN count(e) AS c"

# status x source kind x unexpired, one label-free pass over the facts.
FACT_BREAKDOWN = """
MATCH ()-[e:RELATES_TO]->()
RETURN coalesce(e.status, '') AS status,
       coalesce(e.source_kind, '') AS source_kind,
       (e.expired_at IS NULL AND e.forgotten_at IS NULL) AS unexpired,
       count(e) AS facts
"""

FACT_NAME_DISTRIBUTION = """
MATCH ()-[e:RELATES_TO]->()
RETURN e.name AS name, count(e) AS facts
ORDER BY facts DESC, name
LIMIT $limit
"""

# Same source, name and target (counted directed: a mirrored pair is not a duplicate here).
DUPLICATE_TRIPLES = """
MATCH (a)-[e:RELATES_TO]->(b)
WITH a, e.name AS name, b, count(e) AS copies
WHERE copies > 1
RETURN a.name AS source, name, b.name AS target, copies
ORDER BY copies DESC, source, name
LIMIT $limit
"""

# The same fact text on more than one fact. Grouping on the text itself makes one
# aggregation group per fact (200,000 groups: 420 ms on the bench graph); instead
# bucket the texts by length (a few hundred groups), keep only the buckets that
# hold a repeat (`list.dedup` shrinks them), sort those and read the repeats off
# neighbours: a text with k copies shows up k - 1 times. One scan, 220-260 ms.
# Facts without text are not duplicates of each other (size(null) buckets nothing).
DUPLICATE_FACT_TEXT = """
MATCH ()-[e:RELATES_TO]->()
WITH size(e.fact) AS length, collect(e.fact) AS texts
WITH texts WHERE size(texts) > size(list.dedup(texts))
WITH list.sort(texts) AS texts
UNWIND [i IN range(1, size(texts) - 1) WHERE texts[i] = texts[i - 1] | texts[i]] AS fact
WITH fact, count(*) + 1 AS copies
RETURN left(fact, 300) AS fact, copies
ORDER BY copies DESC, fact
LIMIT $limit
"""

# a->b and b->a with the same name: an undirected count would report each twice.
MIRRORED_PAIRS = """
MATCH (a)-[e:RELATES_TO]->(b)-[f:RELATES_TO]->(a)
WHERE e.name = f.name AND id(a) < id(b)
RETURN a.name AS source, e.name AS name, b.name AS target, count(*) AS pairs
ORDER BY pairs DESC, source
LIMIT $limit
"""

# Sort on the name first, project the shown columns for the page only (7 ms vs 20 ms at 50k).
ENTITY_PAGE = """
MATCH (n:Entity)
WHERE $search = '' OR toLower(n.name) CONTAINS $search
WITH n ORDER BY n.name, n.uuid SKIP $offset LIMIT $limit
RETURN n.uuid AS uuid, n.name AS name, labels(n) AS labels,
       left(coalesce(n.summary, ''), 200) AS summary, n.created_at AS created_at
"""

ENTITY_COUNT = """
MATCH (n:Entity)
WHERE $search = '' OR toLower(n.name) CONTAINS $search
RETURN count(n) AS c
"""

ENTITY_BY_UUID = """
MATCH (n:Entity {uuid: $uuid})
RETURN n.uuid AS uuid, n.name AS name, labels(n) AS labels,
       left(coalesce(n.summary, ''), 1000) AS summary, n.created_at AS created_at
"""

# A plain traversal from the entity (unaffected by the index drift), both directions,
# each edge once, with its direction relative to the entity.
_FACT_COLUMNS = """
       e.uuid AS uuid, e.name AS name, left(e.fact, 500) AS fact,
       e.created_at AS created_at, e.valid_at AS valid_at, e.invalid_at AS invalid_at,
       e.expired_at AS expired_at, e.status AS status, e.source_kind AS source_kind
"""
ENTITY_FACTS = (
    """
MATCH (n:Entity {uuid: $uuid})-[e:RELATES_TO]-(m)
WITH n, e, m, startNode(e) = n AS outgoing
WHERE ($valid_from = '' OR coalesce(e.invalid_at, '9999') >= $valid_from)
  AND ($valid_to = '' OR coalesce(e.valid_at, '') <= $valid_to)
RETURN CASE WHEN outgoing THEN 'source' ELSE 'target' END AS role,
       CASE WHEN outgoing THEN n.name ELSE m.name END AS source,
       CASE WHEN outgoing THEN m.name ELSE n.name END AS target,
       m.uuid AS other_uuid,"""
    + _FACT_COLUMNS
    + """
ORDER BY created_at, uuid
SKIP $offset LIMIT $limit
"""
)

ENTITY_FACT_COUNT = """
MATCH (n:Entity {uuid: $uuid})-[e:RELATES_TO]-(m)
WHERE ($valid_from = '' OR coalesce(e.invalid_at, '9999') >= $valid_from)
  AND ($valid_to = '' OR coalesce(e.valid_at, '') <= $valid_to)
RETURN count(e) AS c
"""

# Edge-first: scan the facts label-free, sort and cut, then read the two end names.
_EDGE_COLUMNS = """
RETURN startNode(e).name AS source, endNode(e).name AS target,
       e.uuid AS uuid, e.name AS name, left(e.fact, 500) AS fact,
       e.created_at AS created_at, e.valid_at AS valid_at, e.invalid_at AS invalid_at,
       e.expired_at AS expired_at, e.status AS status, e.source_kind AS source_kind
"""
FACTS_PAGE = (
    """
MATCH ()-[e:RELATES_TO]->()
WITH e ORDER BY e.created_at DESC, e.uuid SKIP $offset LIMIT $limit"""
    + _EDGE_COLUMNS
)

# Tentative facts a page at a time in storage order: with no ORDER BY before the
# LIMIT the scan stops once the page is full (1 ms for the first 200 of 28,571 on
# the bench graph), where a global oldest-first sort has to read the status of
# every fact (170 ms; no index may help: the relationship index drifts after a restart). Each page is then sorted
# oldest first. Pages are stable while the graph does not change.
TENTATIVE_FACTS = (
    """
MATCH ()-[e:RELATES_TO]->()
WHERE e.status = 'tentative'
WITH e SKIP $offset LIMIT $limit"""
    + _EDGE_COLUMNS
    + "ORDER BY created_at, uuid\n"
)

# The same list sorted oldest first across the whole graph: a full scan (CLI, exports).
TENTATIVE_FACTS_OLDEST_FIRST = (
    """
MATCH ()-[e:RELATES_TO]->()
WHERE e.status = 'tentative'
WITH e ORDER BY e.created_at, e.uuid SKIP $offset LIMIT $limit"""
    + _EDGE_COLUMNS
)

COMMUNITY_PAGE = """
MATCH (c:Community)
OPTIONAL MATCH (c)-[:HAS_MEMBER]->(m)
RETURN c.uuid AS uuid, c.name AS name, left(coalesce(c.summary, ''), 500) AS summary,
       c.created_at AS created_at, count(m) AS members
ORDER BY members DESC, name
SKIP $offset LIMIT $limit
"""

COMMUNITY_MEMBERS = """
MATCH (c:Community {uuid: $uuid})-[:HAS_MEMBER]->(m)
RETURN m.uuid AS uuid, m.name AS name
ORDER BY name
LIMIT $limit
"""

LATEST_COMMUNITY_AT = "MATCH (c:Community) RETURN max(c.created_at) AS c"
EPISODES_SINCE = "MATCH (ep:Episodic) WHERE ep.created_at > $since RETURN count(ep) AS c"

EPISODE_PAGE = """
MATCH (ep:Episodic)
RETURN ep.uuid AS uuid, ep.name AS name, ep.source AS source,
       ep.source_description AS source_description, ep.created_at AS created_at,
       ep.valid_at AS valid_at, ep.content AS content
ORDER BY created_at DESC, uuid
SKIP $offset LIMIT $limit
"""

EPISODE_MENTIONS = """
MATCH (ep:Episodic)-[:MENTIONS]->(n)
WHERE ep.uuid IN $uuids
RETURN ep.uuid AS uuid, collect(n.name)[..$per_episode] AS entities, count(n) AS mentions
"""

RECENT_EPISODES = """
MATCH (ep:Episodic)
RETURN ep.created_at AS created_at, left(ep.content, 500) AS content
ORDER BY created_at DESC
LIMIT $limit
"""

ALL_QUERIES: dict[str, str] = {
    "count_entities": COUNT_ENTITIES,
    "count_episodes": COUNT_EPISODES,
    "count_communities": COUNT_COMMUNITIES,
    "count_relates_to": COUNT_RELATES_TO,
    "count_mentions": COUNT_MENTIONS,
    "count_relates_to_index_path": COUNT_RELATES_TO_INDEX_PATH,
    "probe_index_path": PROBE_INDEX_PATH,
    "probe_label_free": PROBE_LABEL_FREE,
    "fact_breakdown": FACT_BREAKDOWN,
    "fact_name_distribution": FACT_NAME_DISTRIBUTION,
    "duplicate_triples": DUPLICATE_TRIPLES,
    "duplicate_fact_text": DUPLICATE_FACT_TEXT,
    "mirrored_pairs": MIRRORED_PAIRS,
    "entity_page": ENTITY_PAGE,
    "entity_facts": ENTITY_FACTS,
    "facts_page": FACTS_PAGE,
    "tentative_facts": TENTATIVE_FACTS,
    "tentative_facts_oldest_first": TENTATIVE_FACTS_OLDEST_FIRST,
    "community_page": COMMUNITY_PAGE,
    "episode_page": EPISODE_PAGE,
    "recent_episodes": RECENT_EPISODES,
}

LIVE_STATUSES = frozenset({"active", "tentative", ""})


def _page(limit: int, offset: int) -> dict[str, int]:
    return {"limit": max(1, min(int(limit), MAX_PAGE)), "offset": max(0, int(offset))}


@dataclass(frozen=True)
class MemoryCounts:
    entities: int
    episodes: int
    communities: int
    relates_to_edges: int
    mentions_edges: int
    has_member_edges: int
    live_facts: int
    expired_facts: int
    facts_by_status: dict[str, int]
    facts_by_source_kind: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def counts(
    client: GraphClient, group_id: str, *, breakdown: list[Row] | None = None
) -> MemoryCounts:
    """The overview's numbers; `breakdown` is FACT_BREAKDOWN's rows when the caller has them
    (`memory.cache.distributions` keeps them per graph state), else the statement runs here."""

    def one(statement: str) -> int:
        return int(client.ro_value(group_id, statement) or 0)

    by_status: dict[str, int] = {}
    by_kind: dict[str, int] = {}
    live = expired = 0
    if breakdown is None:
        breakdown = client.ro_rows(group_id, FACT_BREAKDOWN)
    for row in breakdown:
        status = row["status"] or "unset"
        kind = row["source_kind"] or "unknown"
        facts = int(row["facts"])
        by_status[status] = by_status.get(status, 0) + facts
        by_kind[kind] = by_kind.get(kind, 0) + facts
        if row["unexpired"] and (row["status"] or "") in LIVE_STATUSES:
            live += facts
        else:
            expired += facts
    return MemoryCounts(
        entities=one(COUNT_ENTITIES),
        episodes=one(COUNT_EPISODES),
        communities=one(COUNT_COMMUNITIES),
        relates_to_edges=one(COUNT_RELATES_TO),
        mentions_edges=one(COUNT_MENTIONS),
        has_member_edges=one(COUNT_HAS_MEMBER),
        live_facts=live,
        expired_facts=expired,
        facts_by_status=dict(sorted(by_status.items())),
        facts_by_source_kind=dict(sorted(by_kind.items())),
    )


def entity_page(
    client: GraphClient, group_id: str, *, search: str = "", limit: int = 50, offset: int = 0
) -> tuple[list[Row], int]:
    params = {"search": search.strip().lower(), **_page(limit, offset)}
    rows = client.ro_rows(group_id, ENTITY_PAGE, params)
    for row in rows:
        row["labels"] = [label for label in row["labels"] if label != "Entity"]
    total = int(client.ro_value(group_id, ENTITY_COUNT, {"search": params["search"]}) or 0)
    return rows, total


def entity(client: GraphClient, group_id: str, entity_uuid: str) -> Row | None:
    rows = client.ro_rows(group_id, ENTITY_BY_UUID, {"uuid": entity_uuid})
    if not rows:
        return None
    rows[0]["labels"] = [label for label in rows[0]["labels"] if label != "Entity"]
    return rows[0]


def entity_facts(
    client: GraphClient,
    group_id: str,
    entity_uuid: str,
    *,
    valid_from: str = "",
    valid_to: str = "",
    limit: int = 200,
    offset: int = 0,
) -> tuple[list[Row], int]:
    """The entity's facts as source or target, oldest first; optional validity window."""
    window = {"uuid": entity_uuid, "valid_from": valid_from, "valid_to": valid_to}
    rows = client.ro_rows(group_id, ENTITY_FACTS, {**window, **_page(limit, offset)})
    total = int(client.ro_value(group_id, ENTITY_FACT_COUNT, window) or 0)
    return rows, total


def facts_page(
    client: GraphClient, group_id: str, *, limit: int = 200, offset: int = 0
) -> list[Row]:
    return client.ro_rows(group_id, FACTS_PAGE, _page(limit, offset))


def fact_name_distribution(client: GraphClient, group_id: str, *, limit: int = 50) -> list[Row]:
    return client.ro_rows(group_id, FACT_NAME_DISTRIBUTION, {"limit": limit})


def duplicates(client: GraphClient, group_id: str, *, limit: int = 50) -> dict[str, list[Row]]:
    params = {"limit": limit}
    return {
        "same_triple": client.ro_rows(group_id, DUPLICATE_TRIPLES, params),
        "same_fact_text": client.ro_rows(group_id, DUPLICATE_FACT_TEXT, params),
        "mirrored": client.ro_rows(group_id, MIRRORED_PAIRS, params),
    }


def tentative_facts(
    client: GraphClient,
    group_id: str,
    *,
    limit: int = 200,
    offset: int = 0,
    oldest_first: bool = False,
) -> list[Row]:
    """A page of tentative facts: storage order, each page oldest first (cheap), or
    `oldest_first` across the whole graph (a full scan of the facts)."""
    statement = TENTATIVE_FACTS_OLDEST_FIRST if oldest_first else TENTATIVE_FACTS
    return client.ro_rows(group_id, statement, _page(limit, offset))


def community_page(
    client: GraphClient, group_id: str, *, limit: int = 50, offset: int = 0
) -> list[Row]:
    return client.ro_rows(group_id, COMMUNITY_PAGE, _page(limit, offset))


def community_members(
    client: GraphClient, group_id: str, community_uuid: str, *, limit: int = 200
) -> list[Row]:
    return client.ro_rows(group_id, COMMUNITY_MEMBERS, {"uuid": community_uuid, "limit": limit})


def community_rebuild_inputs(client: GraphClient, group_id: str) -> tuple[int, str | None, int]:
    """(episodes, latest Community.created_at, episodes created after it)."""
    episodes = int(client.ro_value(group_id, COUNT_EPISODES) or 0)
    latest = client.ro_value(group_id, LATEST_COMMUNITY_AT)
    if latest is None:
        return episodes, None, episodes
    new = int(client.ro_value(group_id, EPISODES_SINCE, {"since": latest}) or 0)
    return episodes, str(latest), new


def episode_page(
    client: GraphClient, group_id: str, *, limit: int = 20, offset: int = 0
) -> list[Row]:
    return client.ro_rows(group_id, EPISODE_PAGE, _page(min(limit, 100), offset))


def episode_mentions(
    client: GraphClient, group_id: str, episode_uuids: list[str], *, per_episode: int = 20
) -> dict[str, Row]:
    if not episode_uuids:
        return {}
    rows = client.ro_rows(
        group_id, EPISODE_MENTIONS, {"uuids": list(episode_uuids), "per_episode": per_episode}
    )
    return {row["uuid"]: row for row in rows}


def recent_episodes(client: GraphClient, group_id: str, *, limit: int = 5) -> list[Row]:
    return client.ro_rows(group_id, RECENT_EPISODES, {"limit": limit})


def relates_to_count_label_free(client: GraphClient, group_id: str) -> int:
    return int(client.ro_value(group_id, COUNT_RELATES_TO) or 0)


def relates_to_count_index_path(client: GraphClient, group_id: str) -> int:
    return int(
        client.ro_value(group_id, COUNT_RELATES_TO_INDEX_PATH, {"group_ids": [group_id]}) or 0
    )


def index_path_probe(client: GraphClient, group_id: str) -> tuple[int, int]:
    """(node 0's facts via the index path, node 0's facts label-free)."""
    return (
        int(client.ro_value(group_id, PROBE_INDEX_PATH, {"group_ids": [group_id]}) or 0),
        int(client.ro_value(group_id, PROBE_LABEL_FREE) or 0),
    )


def counts_one(client: GraphClient, group_id: str, statement: str) -> int:
    """One of the COUNT_* statements above (the bench times them one by one)."""
    return int(client.ro_value(group_id, statement) or 0)
