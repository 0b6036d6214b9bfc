"""The audited, gated entry points for every memory view (pages and CLI call these).

This module holds the data views (stats, entities, facts, relations,
ratification, communities, episodes, chat vs memory, warm context). Every one
takes the `MemoryAccess` that only `open_view` hands out, so no view can skip
the gate or the audit, and reads through `graph_for`, which checks the view's
own inputs before any query. The door itself (`open_view`, the gates, the audit
target, `list_memory_users`) is in `memory.views.gate`; the index views and the
admin-only, audited repair are in `memory.views.index_views`.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from yuxi_dash.errors import MemoryGatedOff, UserNotFound
from yuxi_dash.memory.cache.distributions import counts as distribution_counts
from yuxi_dash.memory.cache.distributions import parts as distribution_parts
from yuxi_dash.memory.cache.distributions import relations as distribution_relations
from yuxi_dash.memory.graph import queries
from yuxi_dash.memory.graph.client import GraphClient, hits_connection
from yuxi_dash.memory.views.chat_compare import compare_facts
from yuxi_dash.memory.views.communities import rebuild_decision
from yuxi_dash.memory.views.gate import MemoryAccess, gate_message, graph_for
from yuxi_dash.memory.views.ratification import assess, read_hits
from yuxi_dash.memory.views.warm_context import build_warm_context

__all__ = [
    "LARGE_EPISODE_BYTES",
    "chat_vs_memory",
    "communities",
    "entities",
    "entity_detail",
    "episodes",
    "facts",
    "parse_envelope",
    "ratification",
    "relations",
    "stats",
    "warm_context",
]

LARGE_EPISODE_BYTES = 64 * 1024


# --- views -----------------------------------------------------------------
def stats(access: MemoryAccess, *, client: GraphClient | None = None) -> dict[str, Any]:
    client = graph_for(access, client)
    counts = distribution_counts(client, access.group_id)
    return {"user_id": access.user_id, "group_id": access.group_id, **counts.to_dict()}


def entities(
    access: MemoryAccess,
    *,
    search: str = "",
    limit: int = 50,
    offset: int = 0,
    client: GraphClient | None = None,
) -> dict[str, Any]:
    client = graph_for(
        access, client, texts={"search": search}, pages={"limit": limit, "offset": offset}
    )
    rows, total = queries.entity_page(
        client, access.group_id, search=search, limit=limit, offset=offset
    )
    return {"user_id": access.user_id, "total": total, "entities": rows}


def entity_detail(
    access: MemoryAccess,
    entity_uuid: str,
    *,
    valid_from: str = "",
    valid_to: str = "",
    limit: int = 200,
    offset: int = 0,
    client: GraphClient | None = None,
) -> dict[str, Any]:
    client = graph_for(
        access,
        client,
        texts={"entity uuid": entity_uuid, "valid from": valid_from, "valid to": valid_to},
        pages={"limit": limit, "offset": offset},
    )
    node = queries.entity(client, access.group_id, entity_uuid)
    if node is None:
        raise UserNotFound(f"no entity {entity_uuid} in {access.user_id}'s memory")
    rows, total = queries.entity_facts(
        client,
        access.group_id,
        entity_uuid,
        valid_from=valid_from,
        valid_to=valid_to,
        limit=limit,
        offset=offset,
    )
    return {"entity": node, "total": total, "facts": rows}


def facts(
    access: MemoryAccess, *, limit: int = 200, offset: int = 0, client: GraphClient | None = None
) -> dict[str, Any]:
    client = graph_for(access, client, pages={"limit": limit, "offset": offset})
    rows = queries.facts_page(client, access.group_id, limit=limit, offset=offset)
    return {"user_id": access.user_id, "facts": rows}


def relations(
    access: MemoryAccess, *, limit: int = 50, client: GraphClient | None = None
) -> dict[str, Any]:
    client = graph_for(access, client, pages={"limit": limit})
    # names and duplicates: kept until the graph changes (memory.cache.distributions)
    return {
        "user_id": access.user_id,
        **distribution_relations(client, access.group_id, limit=limit),
    }


def ratification(
    access: MemoryAccess,
    *,
    limit: int = 200,
    offset: int = 0,
    client: GraphClient | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    client = graph_for(access, client, pages={"limit": limit, "offset": offset})
    counts = distribution_counts(client, access.group_id)
    rows = queries.tentative_facts(client, access.group_id, limit=limit, offset=offset)
    conn = hits_connection(access.settings)
    try:
        hits = read_hits(conn, access.user_id, [r["uuid"] for r in rows])
    finally:
        conn.close()
    tentative = [t.to_dict() for t in assess(rows, hits, now=now or datetime.now(UTC))]
    actions = {"promote": 0, "supersede": 0, "leave": 0}
    for item in tentative:
        actions[item["action"]] += 1
    return {
        "user_id": access.user_id,
        "by_status": counts.facts_by_status,
        "tentative_total": counts.facts_by_status.get("tentative", 0),
        "tentative": tentative,  # this page, in storage order; sorted oldest first within it
        "next_pass": actions,
    }


def communities(
    access: MemoryAccess,
    *,
    limit: int = 50,
    offset: int = 0,
    members_per_community: int = 50,
    client: GraphClient | None = None,
) -> dict[str, Any]:
    if not access.gates.communities_on:  # open_view already refused; belt and braces
        raise MemoryGatedOff(gate_message(access.gates, communities=True))
    client = graph_for(
        access,
        client,
        pages={"limit": limit, "offset": offset, "members per community": members_per_community},
    )
    rows = queries.community_page(client, access.group_id, limit=limit, offset=offset)
    for row in rows:
        row["member_names"] = [
            m["name"]
            for m in queries.community_members(
                client, access.group_id, row["uuid"], limit=members_per_community
            )
        ]
    episodes, last_built, new = queries.community_rebuild_inputs(client, access.group_id)
    decision = rebuild_decision(
        episodes=episodes,
        new_episodes=new,
        last_built_at=last_built,
        threshold=access.settings.community_rebuild_min_new_episodes,
    )
    return {"user_id": access.user_id, "communities": rows, "rebuild": decision.to_dict()}


def parse_envelope(content: str) -> dict[str, Any] | None:
    """An episode's JSON envelope (memory_kind, source_kind, ...) or None for plain text."""
    text = (content or "").lstrip()
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def episodes(
    access: MemoryAccess, *, limit: int = 20, offset: int = 0, client: GraphClient | None = None
) -> dict[str, Any]:
    client = graph_for(access, client, pages={"limit": limit, "offset": offset})
    rows = queries.episode_page(client, access.group_id, limit=limit, offset=offset)
    mentions = queries.episode_mentions(client, access.group_id, [r["uuid"] for r in rows])
    out = []
    for row in rows:
        content = row.pop("content") or ""
        size = len(content.encode("utf-8"))
        envelope = parse_envelope(content)
        body = str(envelope.get("content", "")) if envelope else content
        found = mentions.get(row["uuid"], {})
        out.append(
            {
                **row,
                "memory_kind": envelope.get("memory_kind") if envelope else None,
                "source_kind": envelope.get("source_kind") if envelope else None,
                "enveloped": envelope is not None,
                "content_bytes": size,
                "oversized": size > LARGE_EPISODE_BYTES,
                "preview": body[:300],
                "mentions": found.get("entities", []),
                "mention_count": int(found.get("mentions", 0)),
            }
        )
    return {"user_id": access.user_id, "episodes": out}


def chat_vs_memory(
    access: MemoryAccess,
    *,
    fact_limit: int = 300,
    message_limit: int = 500,
    client: GraphClient | None = None,
) -> dict[str, Any]:
    from yuxi_dash.store.db import session_scope
    from yuxi_dash.store.queries import user_chat_messages

    client = graph_for(
        access, client, pages={"fact limit": fact_limit, "message limit": message_limit}
    )
    # the newest facts: a sort over every fact, so kept until the graph changes
    rows = distribution_parts(client, access.group_id, ["newest_facts"], limit=fact_limit)[
        "newest_facts"
    ]
    with session_scope(access.settings) as session:
        messages = user_chat_messages(session, access.user_id, limit=message_limit)
    user_name = " ".join(p.capitalize() for p in access.user_id.replace("-", "_").split("_"))
    compared = compare_facts(rows, messages, user_name=user_name)
    return {
        "user_id": access.user_id,
        "messages": [m.to_dict() for m in messages],
        "facts": compared,
        "suspects": sum(1 for f in compared if f["suspect"]),
    }


def warm_context(
    access: MemoryAccess, query: str, *, client: GraphClient | None = None
) -> dict[str, Any]:
    client = graph_for(access, client, texts={"the warm-context query": query})
    context = build_warm_context(
        client, access.group_id, query, max_facts=access.settings.context_max_facts
    )
    return {"user_id": access.user_id, **context.to_dict()}
