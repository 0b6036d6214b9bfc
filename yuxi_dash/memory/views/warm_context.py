"""The warm-context preview: the exact `<temporal_context>` block the agent would get.

The modelled system runs a hybrid fact search (top GRAPHITI_CONTEXT_MAX_FACTS) plus the last
5 episodes. With no embedder, the fact search here is graphiti-core's `edge_fulltext_search`
BM25 statement on FalkorDB (the same rows; the page says so), through `GraphClient.ro_rows`
(read-only, timed out, parameters never logged). Each fact says if it is live (`not_live`). Format:

    <temporal_context>
    <FACTS>
    - {fact} ({valid_at or unknown} — {invalid_at or present})
    </FACTS>
    <RECENT_EPISODES>
    - [{created_at}] {content[:500]}
    </RECENT_EPISODES>
    </temporal_context>
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from graphiti_core.driver.falkordb.fulltext import build_falkor_fulltext_query

from yuxi_dash.memory.graph import queries
from yuxi_dash.memory.graph.client import GraphClient, Row
from yuxi_dash.memory.graph.correction_rules import INVALIDATED_STATUSES

RECENT_EPISODE_COUNT = 5
EPISODE_CONTENT_CHARS = 500
SEARCH_METHOD = "bm25_fulltext"
SEARCH_NOTE = (
    "Facts found with graphiti-core's BM25 fulltext search: no embedder or LLM is configured, "
    "so this is the fallback for the agent's hybrid (semantic + BM25) search."
)
# graphiti-core's FalkorDB edge_fulltext_search statement, returning only the shown columns,
# sorted by score *before* its end-node and group filter: the filter then runs only until the
# LIMIT is full, not once per hit (a query whose words are in all 200,000 bench facts:
# 600 ms instead of 2 s; the same rows).
FACT_FULLTEXT_SEARCH = """\
CALL db.idx.fulltext.queryRelationships('RELATES_TO', $query)
YIELD relationship AS rel, score
WITH rel, score ORDER BY score DESC
WITH rel AS e, score, startNode(rel) AS n, endNode(rel) AS m
WHERE n:Entity AND m:Entity AND e.group_id IN $group_ids
RETURN e.uuid AS uuid, e.name AS name, e.fact AS fact,
       e.valid_at AS valid_at, e.invalid_at AS invalid_at,
       e.status AS status, e.expired_at AS expired_at, e.forgotten_at AS forgotten_at
LIMIT $limit"""


@dataclass(frozen=True)
class WarmContext:
    query: str
    method: str
    note: str
    facts: list[dict[str, Any]]
    episodes: list[dict[str, Any]]
    block: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _when(value: Any) -> str | None:
    if value in (None, ""):
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def format_fact_line(fact: str, valid_at: Any, invalid_at: Any) -> str:
    return f"- {fact} ({_when(valid_at) or 'unknown'} — {_when(invalid_at) or 'present'})"


def format_episode_line(created_at: Any, content: str) -> str:
    return f"- [{_when(created_at) or 'unknown'}] {(content or '')[:EPISODE_CONTENT_CHARS]}"


def format_temporal_context(
    facts: Sequence[dict[str, Any]], episodes: Sequence[dict[str, Any]]
) -> str:
    lines = ["<temporal_context>", "<FACTS>"]
    lines += [format_fact_line(f["fact"], f.get("valid_at"), f.get("invalid_at")) for f in facts]
    lines += ["</FACTS>", "<RECENT_EPISODES>"]
    lines += [format_episode_line(e.get("created_at"), e.get("content") or "") for e in episodes]
    lines += ["</RECENT_EPISODES>", "</temporal_context>"]
    return "\n".join(lines)


def why_not_live(fact: dict[str, Any]) -> str | None:
    """Why a fact the search found is no longer live (the block still gives it to the agent,
    as the platform's search does), or None while it is."""
    status = fact.get("status")
    if isinstance(status, str) and status in INVALIDATED_STATUSES:
        return status
    if fact.get("forgotten_at") not in (None, ""):
        return "forgotten"
    if fact.get("expired_at") not in (None, ""):
        return "expired"
    return None


def bm25_fact_search(client: GraphClient, group_id: str, query: str, *, limit: int) -> list[Row]:
    """BM25 fulltext fact search on this user's graph only: read-only, with the query timeout."""
    fulltext = build_falkor_fulltext_query(query, [group_id])  # "" when only stopwords remain
    if not query.strip() or not fulltext:
        return []
    return client.ro_rows(
        group_id,
        FACT_FULLTEXT_SEARCH,
        {"query": fulltext, "group_ids": [group_id], "limit": max(1, int(limit))},
    )


def build_warm_context(
    client: GraphClient, group_id: str, query: str, *, max_facts: int
) -> WarmContext:
    facts = [
        {
            "uuid": row["uuid"],
            "name": row["name"],
            "fact": row["fact"] or "",
            "valid_at": _when(row["valid_at"]),
            "invalid_at": _when(row["invalid_at"]),
            "status": row.get("status"),
            "expired_at": _when(row.get("expired_at")),
            "forgotten_at": _when(row.get("forgotten_at")),
        }
        for row in bm25_fact_search(client, group_id, query, limit=max_facts)
    ]
    for fact in facts:
        fact["not_live"] = why_not_live(fact)
    episodes = queries.recent_episodes(client, group_id, limit=RECENT_EPISODE_COUNT)
    return WarmContext(
        query=query,
        method=SEARCH_METHOD,
        note=SEARCH_NOTE,
        facts=facts,
        episodes=episodes,
        block=format_temporal_context(facts, episodes),
    )
