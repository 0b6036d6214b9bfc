"""The Cypher of assistant-only facts: live facts by source kind, the candidates, the
episodes' openings.

Read-only and parameterized with the rules of `memory.graph.queries`: no group_id filter (the
graph is the user), label-free directed fact scans, no range filter on an edge property in a
labeled pattern, only the columns used, long text cut server-side. Live: no `expired_at`,
`forgotten_at` or `invalid_at`, and a live status (`queries.LIVE_STATUSES`).
- `live_by_source_kind`: one aggregate pass, the live facts per source kind.
- `candidate_groups`: live facts whose source kind is neither `user_asserted` nor
  `operator_corrected`, counted per (source kind, episode list): all the share needs.
- `candidates`: the same facts one row each, for the lists (one scan; sorted in Python).
- `episode_openings`: each episode's source, the first and last characters of its content and
  its length (an envelope's `source_kind` may sit at either end); never a whole large episode.
"""

from __future__ import annotations

from typing import Any

from yuxi_dash.memory.graph import queries
from yuxi_dash.memory.graph.client import GraphClient, Row

EPISODE_CHUNK = 1000
HEAD_CHARS = 4000
TAIL_CHARS = 1000
FACT_CHARS = 300
SET_ASIDE_KINDS = ("user_asserted", "operator_corrected")  # never assistant-only

_LIVE = """e.expired_at IS NULL AND e.forgotten_at IS NULL AND e.invalid_at IS NULL
  AND coalesce(e.status, '') IN $live_statuses"""

LIVE_BY_SOURCE_KIND = f"""
MATCH ()-[e:RELATES_TO]->()
WHERE {_LIVE}
RETURN coalesce(e.source_kind, '') AS source_kind, count(e) AS facts
"""

# The candidates grouped by source kind and episode list: the share needs no more (many
# facts come from one episode, so far fewer rows than facts).
CANDIDATE_GROUPS = f"""
MATCH ()-[e:RELATES_TO]->()
WHERE {_LIVE}
  AND NOT coalesce(e.source_kind, '') IN $set_aside
RETURN coalesce(e.source_kind, '') AS source_kind, coalesce(e.episodes, []) AS episodes,
       count(e) AS facts
"""

CANDIDATES = f"""
MATCH (s)-[e:RELATES_TO]->(t)
WHERE {_LIVE}
  AND NOT coalesce(e.source_kind, '') IN $set_aside
RETURN e.uuid AS uuid, e.source_kind AS source_kind, e.episodes AS episodes,
       e.created_at AS created_at, e.status AS status, e.name AS name,
       left(e.fact, $fact_chars) AS fact, s.name AS source, t.name AS target
"""

EPISODE_OPENINGS = """
MATCH (ep:Episodic)
WHERE ep.uuid IN $uuids
RETURN ep.uuid AS uuid, ep.source AS source, left(ep.content, $head) AS head,
       right(ep.content, $tail) AS tail, size(ep.content) AS chars
"""


def _live_statuses() -> list[str]:
    return sorted(queries.LIVE_STATUSES)


def live_by_source_kind(client: GraphClient, group_id: str) -> dict[str, int]:
    """Live facts per source kind ("" for none)."""
    rows = client.ro_rows(group_id, LIVE_BY_SOURCE_KIND, {"live_statuses": _live_statuses()})
    return {str(r["source_kind"] or ""): int(r["facts"]) for r in rows}


def _candidate_params() -> dict[str, Any]:
    return {"live_statuses": _live_statuses(), "set_aside": list(SET_ASIDE_KINDS)}


def candidate_groups(client: GraphClient, group_id: str) -> list[Row]:
    """The live facts that may be assistant-only: (source kind, episodes, count)."""
    return client.ro_rows(group_id, CANDIDATE_GROUPS, _candidate_params())


def candidates(client: GraphClient, group_id: str) -> list[Row]:
    """Every live fact that may be assistant-only, one row each (storage order)."""
    params = {**_candidate_params(), "fact_chars": FACT_CHARS}
    return client.ro_rows(group_id, CANDIDATES, params)


def episode_openings(client: GraphClient, group_id: str, uuids: list[str]) -> dict[str, Row]:
    """Each episode's source, head, tail and length, by uuid (those not found are absent)."""
    found: dict[str, Row] = {}
    for start in range(0, len(uuids), EPISODE_CHUNK):
        params = {
            "uuids": uuids[start : start + EPISODE_CHUNK],
            "head": HEAD_CHARS,
            "tail": TAIL_CHARS,
        }
        for row in client.ro_rows(group_id, EPISODE_OPENINGS, params):
            found[str(row["uuid"])] = row
    return found
