"""The Cypher of memory as of a moment: one read-only, parameterized statement per question.

Rules (each plan read with GRAPH.EXPLAIN on the 200,000-fact bench graph, bench/memory.py):
- Facts are scanned label-free and directed (`()-[e:RELATES_TO]->()`): a labeled edge
  pattern with a range filter on an edge property can run for minutes (HAZARDS item 8),
  and no statement filters on group_id (the relationship index drifts after a restart).
- Moments are ISO-8601 UTC strings, compared as strings, as graphiti-core stores them, and
  always through `toString(...)`: a range filter that FalkorDB sends down graphiti-core's
  range index on a string time gives wrong rows (`<=` on `created_at`, edge or node index,
  kept every row on FalkorDB 4.16); `toString` keeps it a plain filter.
- "Held at $at": created at or before it, and neither expired nor forgotten then (the
  platform's `forgotten_at` ends a fact as an expiry does). The facts our
  corrections changed after the moment are decided in Python from the correction rows and
  passed in: `$present` (held then, whatever the edge says now), `$absent` (not held then).
- Only the shown columns are returned, long text cut with `left()`, lists paginated.
"""

from __future__ import annotations

# Not yet ended at $at: neither expired nor forgotten then.
_LIVE = """(e.expired_at IS NULL OR toString(e.expired_at) > $at)
  AND (e.forgotten_at IS NULL OR toString(e.forgotten_at) > $at)"""

# Held at $at, with the corrected facts decided by the caller.
_HELD = (
    """toString(e.created_at) <= $at
  AND ("""
    + _LIVE
    + """ OR e.uuid IN $present)
  AND NOT e.uuid IN $absent"""
)

FACT_COLUMNS = """
RETURN startNode(e).name AS source, endNode(e).name AS target,
       startNode(e).uuid AS source_uuid, endNode(e).uuid AS target_uuid,
       e.uuid AS uuid, e.name AS name, left(e.fact, 500) AS fact,
       e.created_at AS created_at, e.valid_at AS valid_at, e.invalid_at AS invalid_at,
       e.expired_at AS expired_at, e.status AS status, e.source_kind AS source_kind,
       e.forgotten_at AS forgotten_at, e.ratified_at AS ratified_at, e.episodes AS episodes"""

# The same columns for a list of edges `x` (a page collected in one pass).
_LIST_COLUMNS = """{source: startNode(x).name, target: endNode(x).name,
       source_uuid: startNode(x).uuid, target_uuid: endNode(x).uuid,
       uuid: x.uuid, name: x.name, fact: left(x.fact, 500),
       created_at: x.created_at, valid_at: x.valid_at, invalid_at: x.invalid_at,
       expired_at: x.expired_at, status: x.status, source_kind: x.source_kind,
       forgotten_at: x.forgotten_at, ratified_at: x.ratified_at, episodes: x.episodes}"""

# The facts held at $at, newest first, one page, with the counts, in one pass over the facts
# (two passes took about twice as long on the bench graph). The counts leave out the
# corrected facts (`$corrected`): the caller counts them from their reconstructed edges; a
# corrected fact is listed when the caller says it was held then (`$present`).
FACTS_AS_OF = (
    """
MATCH ()-[e:RELATES_TO]->()
WHERE toString(e.created_at) <= $at
WITH e, ("""
    + _LIVE
    + """) AS live,
     e.uuid IN $corrected AS corrected
WITH e, live AND NOT corrected AS held,
     CASE WHEN corrected THEN e.uuid IN $present ELSE live END AS shown,
     live AND NOT corrected AND (e.valid_at IS NULL OR toString(e.valid_at) <= $at)
       AND (e.invalid_at IS NULL OR toString(e.invalid_at) > $at) AS valid,
     NOT live AND NOT corrected AS retired
ORDER BY e.created_at DESC, e.uuid
WITH sum(CASE WHEN held THEN 1 ELSE 0 END) AS held,
     sum(CASE WHEN valid THEN 1 ELSE 0 END) AS valid,
     sum(CASE WHEN retired THEN 1 ELSE 0 END) AS retired,
     collect(CASE WHEN shown THEN e END)[$offset..$offset + $limit] AS page
RETURN held, valid, retired, [x IN page | """
    + _LIST_COLUMNS
    + """] AS facts
"""
)

# How many facts had been written by $at: held then (not yet expired), held and valid in
# the world then (valid_at unknown or not after it, invalid_at unknown or after it), and
# retired by then. The corrected facts (`$corrected`) are left out: the caller counts them
# from their reconstructed edges.
FACT_COUNTS_AS_OF = (
    """
MATCH ()-[e:RELATES_TO]->()
WHERE toString(e.created_at) <= $at AND NOT e.uuid IN $corrected
WITH e, ("""
    + _LIVE
    + """) AS held
RETURN sum(CASE WHEN held THEN 1 ELSE 0 END) AS held,
       sum(CASE WHEN held AND (e.valid_at IS NULL OR toString(e.valid_at) <= $at)
                 AND (e.invalid_at IS NULL OR toString(e.invalid_at) > $at) THEN 1 ELSE 0 END) AS valid,
       sum(CASE WHEN held THEN 0 ELSE 1 END) AS retired
"""
)

# Every fact held at $at, a page at a time in uuid order after $after (the support bundle
# streams them as it streams today's facts; `toString` keeps the uuid test a plain filter).
FACTS_AS_OF_AFTER = (
    """
MATCH ()-[e:RELATES_TO]->()
WHERE toString(e.uuid) > $after AND """
    + _HELD
    + """
WITH e ORDER BY e.uuid LIMIT $limit"""
    + FACT_COLUMNS
)

# The facts one entity had at $at, as source or target (a plain traversal from the
# entity: unaffected by the index drift).
ENTITY_FACTS_AS_OF = (
    """
MATCH (n:Entity {uuid: $uuid})-[e:RELATES_TO]-()
WHERE """
    + _HELD
    + """
WITH DISTINCT e ORDER BY e.created_at, e.uuid SKIP $offset LIMIT $limit"""
    + FACT_COLUMNS
)

ENTITY_FACT_COUNT_AS_OF = (
    """
MATCH (n:Entity {uuid: $uuid})-[e:RELATES_TO]-()
WHERE """
    + _HELD
    + """
RETURN count(DISTINCT e) AS c
"""
)

# Entities created at or before $at (names and summaries are today's: not versioned).
ENTITY_PAGE_AS_OF = """
MATCH (n:Entity)
WHERE toString(n.created_at) <= $at AND ($search = '' OR toLower(n.name) CONTAINS $search)
WITH n ORDER BY n.name, n.uuid SKIP $offset LIMIT $limit
RETURN n.uuid AS uuid, n.name AS name, labels(n) AS labels,
       left(coalesce(n.summary, ''), 200) AS summary, n.created_at AS created_at
"""

ENTITY_COUNT_AS_OF = """
MATCH (n:Entity)
WHERE toString(n.created_at) <= $at AND ($search = '' OR toLower(n.name) CONTAINS $search)
RETURN count(n) AS c
"""

# The episodes written up to $at, newest first.
EPISODES_AS_OF = """
MATCH (ep:Episodic)
WHERE toString(ep.created_at) <= $at
WITH ep ORDER BY ep.created_at DESC, ep.uuid SKIP $offset LIMIT $limit
RETURN ep.uuid AS uuid, ep.name AS name, ep.source_description AS source_description,
       ep.created_at AS created_at, left(ep.content, 500) AS content
"""

EPISODE_COUNT_AS_OF = (
    "MATCH (ep:Episodic) WHERE toString(ep.created_at) <= $at RETURN count(ep) AS c"
)

# Named episodes (the ones that wrote the facts a diff shows).
EPISODES_BY_UUID = """
MATCH (ep:Episodic)
WHERE ep.uuid IN $uuids
RETURN ep.uuid AS uuid, ep.name AS name, ep.created_at AS created_at,
       ep.source_description AS source_description
"""

# The corrected facts as the graph holds them now, found from their source entity (a plain
# traversal: unaffected by the index drift; `toString` keeps the uuid test off the
# relationship index, which loses node 0's edges after a restart). `$pairs`: [{source, uuid}].
FACTS_BY_SOURCE_AND_UUID = (
    """
UNWIND $pairs AS p
MATCH (n:Entity {uuid: p.source})-[e:RELATES_TO]->()
WHERE toString(e.uuid) = p.uuid
WITH e"""
    + FACT_COLUMNS
)

# --- two moments, $a before $b (facts no correction touched after $a) -------------------------
# A fact ends at its expiry or its forgetting, the first of the two (`ended`). added: held at
# $b, not at $a; retired: held at $a, not at $b; came and went: written and ended in
# between; changed: held at both and ratified in between (tentative -> active, in place).
# One pass: each change's count and its first $limit facts (retired in end order, the
# others in creation order). Four passes took about five times as long.
DIFF = (
    """
MATCH ()-[e:RELATES_TO]->()
WHERE toString(e.created_at) <= $b
  AND (toString(e.created_at) > $a OR toString(e.expired_at) > $a
       OR toString(e.forgotten_at) > $a OR toString(e.ratified_at) > $a)
  AND NOT e.uuid IN $corrected
WITH e, CASE WHEN e.forgotten_at IS NOT NULL
              AND (e.expired_at IS NULL OR toString(e.forgotten_at) < toString(e.expired_at))
             THEN toString(e.forgotten_at) ELSE toString(e.expired_at) END AS ended
WITH e, ended, toString(e.created_at) > $a AS born,
     ended IS NOT NULL AND ended <= $a AS gone_at_a,
     ended IS NOT NULL AND ended <= $b AS gone
WITH e, ended, CASE WHEN born AND NOT gone THEN 'added'
             WHEN gone AND NOT born AND NOT gone_at_a THEN 'retired'
             WHEN born AND gone THEN 'came_and_went'
             WHEN NOT born AND NOT gone AND toString(e.ratified_at) > $a
                  AND toString(e.ratified_at) <= $b THEN 'changed' END AS change
WHERE change IS NOT NULL
WITH change, e
ORDER BY CASE WHEN change = 'retired' THEN ended ELSE toString(e.created_at) END, e.uuid
WITH change, count(e) AS total, collect(e)[..$limit] AS first
RETURN change, total, [x IN first | """
    + _LIST_COLUMNS
    + """] AS facts
"""
)

# graphiti-core's FalkorDB edge fulltext search (as `memory.views.warm_context` runs it), kept
# to the facts that existed at $at (created by then; `$unborn`: made later by a correction).
FACT_FULLTEXT_AS_OF = (
    """
CALL db.idx.fulltext.queryRelationships('RELATES_TO', $query)
YIELD relationship AS rel, score
WITH rel, score ORDER BY score DESC
WITH rel AS e, score, startNode(rel) AS n, endNode(rel) AS m
WHERE n:Entity AND m:Entity AND e.group_id IN $group_ids
  AND toString(e.created_at) <= $at AND NOT e.uuid IN $unborn
WITH e, score LIMIT $limit"""
    + FACT_COLUMNS
    + ", score\nORDER BY score DESC"
)

ALL_QUERIES: dict[str, str] = {
    "facts_as_of": FACTS_AS_OF,
    "facts_as_of_after": FACTS_AS_OF_AFTER,
    "fact_counts_as_of": FACT_COUNTS_AS_OF,
    "entity_facts_as_of": ENTITY_FACTS_AS_OF,
    "entity_fact_count_as_of": ENTITY_FACT_COUNT_AS_OF,
    "entity_page_as_of": ENTITY_PAGE_AS_OF,
    "entity_count_as_of": ENTITY_COUNT_AS_OF,
    "episodes_as_of": EPISODES_AS_OF,
    "episode_count_as_of": EPISODE_COUNT_AS_OF,
    "episodes_by_uuid": EPISODES_BY_UUID,
    "facts_by_source_and_uuid": FACTS_BY_SOURCE_AND_UUID,
    "diff": DIFF,
    "fact_fulltext_as_of": FACT_FULLTEXT_AS_OF,
}
