"""The Cypher of the retirements view: the retired facts, and the text of the ones shown.

Read-only and parameterized, with the rules of `memory.graph.queries`: no group_id filter
(the graph is the user), label-free edge scans (`()-[e:RELATES_TO]->()`, never a labeled
edge pattern with a range filter: HAZARDS item 8), only the columns shown (never an
embedding), long text cut server-side, every list read a slice of source nodes at a
time (by internal id: no SKIP over a full sort, no relationship index). One fact's
provenance queries live in `memory.views.provenance_queries`, and the episode that
retired a fact is found by `memory.views.retiring_episode`: both reused here, not repeated.
"""

from __future__ import annotations

from yuxi_dash.memory.graph.client import GraphClient, Row
from yuxi_dash.memory.views.retiring_episode import sliced_rows

SLICE = 5000  # source nodes per statement (internal ids lo <= id < hi)

# Each statement reads the facts leaving one slice of source nodes, found by their internal
# id (a seek, not the relationship index, which loses node 0's facts after a restart):
# every fact once in all, O(facts) in all, where a sorted SKIP/LIMIT page would sort every
# fact again for each page.
_SLICE = """
MATCH (a)-[e:RELATES_TO]->(b)
WHERE id(a) >= $lo AND id(a) < $hi AND """
_WHEN = """
       e.created_at AS created_at, e.valid_at AS valid_at, e.episodes[..$episodes] AS episodes"""

# Every fact with an end (expired_at or invalid_at) or an invalidated status, with the
# names of its ends (no text: a page reads its rows' text with FACT_TEXTS).
RETIRED_FACTS = (
    _SLICE
    + """(e.expired_at IS NOT NULL OR e.invalid_at IS NOT NULL OR e.status IN $statuses)
RETURN e.uuid AS uuid, e.name AS name, a.uuid AS source_uuid, a.name AS source,
       b.uuid AS target_uuid, b.name AS target, e.invalid_at AS invalid_at,
       e.expired_at AS expired_at, e.status AS status, e.superseded_by AS superseded_by,"""
    + _WHEN
    + "\n"
)

# The text and end names of the facts one page shows: one label-free scan; the uuid is
# compared as text so no index serves it (the relationship index drifts).
FACT_TEXTS = """
MATCH (a)-[e:RELATES_TO]->(b)
WHERE toString(e.uuid) IN $uuids
RETURN e.uuid AS uuid, a.name AS source, b.name AS target, left(e.fact, 300) AS fact
"""


def retired_facts(client: GraphClient, group_id: str, statuses: list[str]) -> list[Row]:
    """Every retired fact (ended or with an invalidated status), with its two ends."""
    return sliced_rows(client, group_id, RETIRED_FACTS, {"statuses": statuses}, size=SLICE)


def fact_texts(client: GraphClient, group_id: str, uuids: list[str]) -> dict[str, Row]:
    """uuid -> {source, target, fact} of the given facts (one statement)."""
    if not uuids:
        return {}
    rows = client.ro_rows(group_id, FACT_TEXTS, {"uuids": list(dict.fromkeys(uuids))})
    return {str(row["uuid"]): row for row in rows}
