"""The warm-context preview: the exact `<temporal_context>` block the agent would get.

The modelled system runs a hybrid fact search (top GRAPHITI_CONTEXT_MAX_FACTS) plus the last
5 episodes. With no embedder, facts come from graphiti-core's BM25 `edge_fulltext_search` (the
same rows; the page says so) via `GraphClient.ro_rows` (read-only, timed out, parameters never
logged); `not_live` says why a fact is not. The block (`readable_episode` is for people):

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

import json
import re
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


# --- the episodes for people: the block above stays exactly what the agent gets ---------------
EPISODE_TEXT_KEYS = ("content", "text", "body")  # the envelope key that holds the words
_ROLE_PREFIX = re.compile(r"(user|assistant|tool|system|human|ai): ", re.IGNORECASE)
_MAX_CLOSE_TRIES = 48  # trailing characters dropped, at most, to close a cut JSON envelope


def _closed_envelope(text: str) -> dict[str, Any] | None:
    """A JSON object cut short (the query keeps EPISODE_CONTENT_CHARS): its leading fields,
    the last string value up to the cut. Bounded: at most 2 x _MAX_CLOSE_TRIES decodes."""
    for drop in range(min(_MAX_CLOSE_TRIES, len(text))):
        head = text[: len(text) - drop]
        for closer in ('"}', "}"):
            try:
                value = json.loads(head + closer)
            except ValueError:
                continue
            if isinstance(value, dict) and value:
                return value
    return None


def _field_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def cut_at_word(text: str, limit: int, *, cut: bool = False) -> str:
    """``text`` with at most ``limit`` characters, cut after a whole word with "…" added when
    it is longer, or when it was already ``cut`` (its last word may be partial: dropped)."""
    if len(text) <= limit and not cut:
        return text
    head = text[: max(0, limit)]
    after = text[len(head) : len(head) + 1]
    if not after.isspace():  # the cut is inside a word: back to the blank before it
        blank = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
        if blank > len(head) // 2:
            head = head[:blank]
    return head.rstrip() + "…"


def readable_episode(
    created_at: Any, content: str | None, *, limit: int = EPISODE_CONTENT_CHARS
) -> dict[str, Any]:
    """One episode for people: {"created_at", "fields": {name: text}, "text", "cut"}.

    A JSON envelope gives its fields (memory_kind, source_kind, ...) and its ``content`` as
    text with real line breaks; a "role: text" message gives the role. Content that reached
    EPISODE_CONTENT_CHARS was cut by the query: its text ends at a word, with "…".
    """
    raw = content or ""
    cut = len(raw) >= EPISODE_CONTENT_CHARS
    fields: dict[str, str] = {}
    text = raw
    stripped = raw.strip()
    envelope: dict[str, Any] | None = None
    if stripped.startswith("{"):
        try:
            decoded = json.loads(stripped)
            envelope = decoded if isinstance(decoded, dict) else None
        except ValueError:  # cut by the query? else it is text that only starts with "{"
            envelope = _closed_envelope(stripped) if cut else None
    if envelope is not None:
        key = next((k for k in EPISODE_TEXT_KEYS if k in envelope), None)
        fields = {str(k): _field_text(v) for k, v in envelope.items() if k != key}
        words = envelope.get(key, "") if key else ""
        text = words if isinstance(words, str) else json.dumps(words, indent=2)
    elif role := _ROLE_PREFIX.match(raw):
        fields = {"role": role.group(1).lower()}
        text = raw[role.end() :]
    text = text.replace("\r\n", "\n").replace("\r", "\n").strip("\n")
    return {
        "created_at": _when(created_at),
        "fields": fields,
        "text": cut_at_word(text, limit, cut=cut),
        "cut": cut or len(text) > limit,
    }
