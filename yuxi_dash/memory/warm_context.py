"""The warm-context preview: the exact `<temporal_context>` block the agent would get.

The modelled system runs a hybrid fact search (top GRAPHITI_CONTEXT_MAX_FACTS)
plus the last 5 episodes. yuxi-dash has no embedder and no LLM, so the fact
search here is graphiti-core's own BM25 fulltext search
(`edge_fulltext_search`) — the honest fallback, and the page says so. Format
(DESIGN §5):

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

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")

from falkordb.asyncio import FalkorDB as AsyncFalkorDB  # noqa: E402
from graphiti_core.driver.falkordb_driver import FalkorDriver  # noqa: E402
from graphiti_core.edges import EntityEdge  # noqa: E402
from graphiti_core.search.search_filters import SearchFilters  # noqa: E402
from graphiti_core.search.search_utils import edge_fulltext_search  # noqa: E402

from yuxi_dash.memory import queries  # noqa: E402
from yuxi_dash.memory.client import GraphClient, call_with_backpressure  # noqa: E402

RECENT_EPISODE_COUNT = 5
EPISODE_CONTENT_CHARS = 500
SEARCH_METHOD = "bm25_fulltext"
SEARCH_NOTE = (
    "Facts found with graphiti-core's BM25 fulltext search: no embedder or LLM is configured, "
    "so this is the fallback for the agent's hybrid (semantic + BM25) search."
)


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


def _async_db(client: GraphClient) -> AsyncFalkorDB:
    handle = client.handle
    if handle is None:
        kwargs = client.db.connection.connection_pool.connection_kwargs
        if kwargs.get("path"):
            return AsyncFalkorDB(unix_socket_path=kwargs["path"])
        return AsyncFalkorDB(
            host=kwargs.get("host", "localhost"),
            port=kwargs.get("port", 6379),
            password=kwargs.get("password"),
        )
    return AsyncFalkorDB(**handle.redis_kwargs())  # type: ignore[arg-type]


def bm25_fact_search(
    client: GraphClient, group_id: str, query: str, *, limit: int
) -> list[EntityEdge]:
    """graphiti-core's fulltext (BM25) fact search on this user's graph only."""
    if not query.strip():
        return []
    db = _async_db(client)
    driver = FalkorDriver(falkor_db=db, database=group_id)  # opened by name, outside any loop

    async def run() -> list[EntityEdge]:
        try:
            return await edge_fulltext_search(
                driver, query, SearchFilters(), group_ids=[group_id], limit=limit
            )
        finally:
            await db.aclose()

    client.stats.queries_run += 1
    return call_with_backpressure(
        lambda: asyncio.run(run()),
        max_attempts=client.settings.falkordb_query_max_attempts,
        base=client.settings.falkordb_query_backoff_base,
        what="fulltext fact search",
    )


def build_warm_context(
    client: GraphClient, group_id: str, query: str, *, max_facts: int
) -> WarmContext:
    edges = bm25_fact_search(client, group_id, query, limit=max_facts)
    facts = [
        {
            "uuid": edge.uuid,
            "name": edge.name,
            "fact": edge.fact,
            "valid_at": _when(edge.valid_at),
            "invalid_at": _when(edge.invalid_at),
        }
        for edge in edges
    ]
    episodes = queries.recent_episodes(client, group_id, limit=RECENT_EPISODE_COUNT)
    return WarmContext(
        query=query,
        method=SEARCH_METHOD,
        note=SEARCH_NOTE,
        facts=facts,
        episodes=episodes,
        block=format_temporal_context(facts, episodes),
    )
