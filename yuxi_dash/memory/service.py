"""The audited, gated entry points for every memory view (pages and CLI call these).

`open_view` is the door: it validates the user id (`derive_group_id`),
evaluates the LaunchDarkly gates, and writes an audit row for the attempt —
outcome `ok` or `gated_off`. A gated-off user raises `MemoryGatedOff` before
any client is created, so no graph query runs; community views also need
`graphiti-communities-enabled`. Every data function takes the `MemoryAccess`
that only `open_view` hands out, so no view can skip the gate or the audit.
The index repair is admin-only and audited with the drift before and after.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from yuxi_dash.audit import record_audit
from yuxi_dash.auth import Actor, Role, require_role
from yuxi_dash.errors import InvalidInput, MemoryGatedOff, UserNotFound
from yuxi_dash.flags import FlagEvaluator, MemoryGates, evaluate_gates
from yuxi_dash.memory import queries
from yuxi_dash.memory.chat_compare import compare_facts
from yuxi_dash.memory.client import GraphClient, get_client, hits_connection
from yuxi_dash.memory.communities import rebuild_decision
from yuxi_dash.memory.groups import derive_group_id, user_id_from_group
from yuxi_dash.memory.index_health import (
    check_index_health,
    probe_index_health,
    rebuild_relationship_indexes,
)
from yuxi_dash.memory.ratification import assess, read_hits
from yuxi_dash.memory.warm_context import build_warm_context
from yuxi_dash.settings import Settings, get_settings

LARGE_EPISODE_BYTES = 64 * 1024
VIEW_ACTION = "memory.view"
REPAIR_ACTION = "memory.repair_indexes"
VIEWS = frozenset(
    {
        "overview",
        "stats",
        "entities",
        "facts",
        "relations",
        "ratification",
        "communities",
        "episodes",
        "chat",
        "warm_context",
        "index_health",
    }
)
COMMUNITY_VIEWS = frozenset({"communities"})


@dataclass(frozen=True)
class MemoryAccess:
    """Proof that the gate was checked and the view audited for this user and actor."""

    user_id: str
    group_id: str
    view: str
    actor: Actor
    gates: MemoryGates
    settings: Settings = field(repr=False)


def group_for(user_id: str) -> str:
    try:
        return derive_group_id(user_id)
    except ValueError as exc:
        raise InvalidInput(f"not a valid user id: {exc}") from exc


def _target(user_id: str) -> str:
    return f"memory:{user_id}"


def gates_for(
    user_id: str,
    *,
    settings: Settings | None = None,
    evaluator: FlagEvaluator | None = None,
) -> MemoryGates:
    """Both gates for a user (no graph query, no audit: flag values are not memory)."""
    group_for(user_id)
    # The LaunchDarkly context is the memory user (key = user id, kind user, role "user").
    return evaluate_gates(
        user_id, settings=settings or get_settings(), evaluator=evaluator, role="user"
    )


def gate_message(gates: MemoryGates, *, communities: bool = False) -> str:
    flag = gates.communities if communities and gates.memory_on else gates.memory
    return (
        f"memory {'communities are' if flag is gates.communities else 'is'} gated off for "
        f"{gates.user_id}: {flag.key} = {str(flag.value).lower()} ({flag.reason})"
    )


def open_view(
    user_id: str,
    view: str,
    *,
    actor: Actor,
    settings: Settings | None = None,
    evaluator: FlagEvaluator | None = None,
) -> MemoryAccess:
    """Gate, then audit, then hand out access; raises MemoryGatedOff when a gate is off."""
    settings = settings or get_settings()
    if view not in VIEWS:
        raise InvalidInput(f"unknown memory view {view!r}")
    require_role(actor, Role.VIEWER, action="view a user's memory")
    group_id = group_for(user_id)
    gates = gates_for(user_id, settings=settings, evaluator=evaluator)
    detail = {"view": view, "via": actor.via, "gate_source": gates.source}
    blocked_by_communities = (
        view in COMMUNITY_VIEWS and gates.memory_on and not gates.communities_on
    )
    if not gates.memory_on or blocked_by_communities:
        flag = gates.communities if blocked_by_communities else gates.memory
        record_audit(
            actor=actor.id,
            action=VIEW_ACTION,
            target=_target(user_id),
            outcome="gated_off",
            detail={**detail, "flag": flag.key, "reason": flag.reason},
            settings=settings,
        )
        raise MemoryGatedOff(gate_message(gates, communities=blocked_by_communities))
    record_audit(
        actor=actor.id,
        action=VIEW_ACTION,
        target=_target(user_id),
        outcome="ok",
        detail=detail,
        settings=settings,
    )
    return MemoryAccess(user_id, group_id, view, actor, gates, settings)


def _graph(access: MemoryAccess, client: GraphClient | None) -> GraphClient:
    client = client or get_client(access.settings)
    if not client.graph_exists(access.group_id):
        raise UserNotFound(f"no memory graph for user {access.user_id}")
    return client


# --- user graphs (no user's memory is read: only graph names) --------------
def list_memory_users(
    *, search: str = "", limit: int = 200, client: GraphClient | None = None
) -> tuple[list[str], int]:
    """User ids that have a graph, filtered by a substring, and how many matched."""
    client = client or get_client()
    needle = search.strip().lower()
    users = [u for g in client.list_graphs() if (u := user_id_from_group(g)) is not None]
    matched = [u for u in users if needle in u.lower()] if needle else users
    return matched[:limit], len(matched)


# --- views -----------------------------------------------------------------
def stats(access: MemoryAccess, *, client: GraphClient | None = None) -> dict[str, Any]:
    client = _graph(access, client)
    counts = queries.counts(client, access.group_id)
    return {"user_id": access.user_id, "group_id": access.group_id, **counts.to_dict()}


def index_health(access: MemoryAccess, *, client: GraphClient | None = None) -> dict[str, Any]:
    client = _graph(access, client)
    return {"user_id": access.user_id, **check_index_health(client, access.group_id).to_dict()}


def index_probe(access: MemoryAccess, *, client: GraphClient | None = None) -> dict[str, Any]:
    """The sub-millisecond index check (node 0 only); `index_health` is the full count."""
    client = _graph(access, client)
    return {"user_id": access.user_id, **probe_index_health(client, access.group_id).to_dict()}


def index_health_scan(
    *,
    actor: Actor,
    limit: int = 500,
    settings: Settings | None = None,
    evaluator: FlagEvaluator | None = None,
    client: GraphClient | None = None,
) -> list[dict[str, Any]]:
    """Index health of every user graph (up to `limit`); gated-off users are skipped, not read.

    One audit row per scan (outcome ok, with how many graphs were checked and drifted).
    """
    settings = settings or get_settings()
    require_role(actor, Role.OPERATOR, action="scan every user's memory indexes")
    client = client or get_client(settings)
    users, _ = list_memory_users(limit=limit, client=client)
    results: list[dict[str, Any]] = []
    for user_id in users:
        gates = gates_for(user_id, settings=settings, evaluator=evaluator)
        if not gates.memory_on:
            results.append({"user_id": user_id, "gated_off": True, "reason": gates.memory.reason})
            continue
        health = check_index_health(client, derive_group_id(user_id))
        results.append({"user_id": user_id, "gated_off": False, **health.to_dict()})
    checked = [r for r in results if not r["gated_off"]]
    record_audit(
        actor=actor.id,
        action="memory.index_health_scan",
        target="memory:*",
        outcome="ok",
        detail={
            "graphs": len(results),
            "checked": len(checked),
            "drifted": sum(1 for r in checked if r["drift"]),
        },
        settings=settings,
    )
    results.sort(key=lambda r: (-(r.get("drift") or 0), r["user_id"]))
    return results


def repair_indexes(
    user_id: str,
    *,
    actor: Actor,
    settings: Settings | None = None,
    evaluator: FlagEvaluator | None = None,
    client: GraphClient | None = None,
) -> dict[str, Any]:
    """Admin only: drop and rebuild every relationship index of the user's graph; audited."""
    settings = settings or get_settings()
    try:
        require_role(actor, Role.ADMIN, action="repair memory indexes")
    except Exception:
        record_audit(
            actor=actor.id,
            action=REPAIR_ACTION,
            target=_target(user_id),
            outcome="forbidden",
            settings=settings,
        )
        raise
    access = open_view(user_id, "index_health", actor=actor, settings=settings, evaluator=evaluator)
    client = _graph(access, client)
    before = check_index_health(client, access.group_id)
    try:
        statements = rebuild_relationship_indexes(client, access.group_id)
    except Exception as exc:
        record_audit(
            actor=actor.id,
            action=REPAIR_ACTION,
            target=_target(user_id),
            outcome="failed",
            detail={"drift_before": before.drift, "error": type(exc).__name__},
            settings=settings,
        )
        raise
    after = check_index_health(client, access.group_id)
    record_audit(
        actor=actor.id,
        action=REPAIR_ACTION,
        target=_target(user_id),
        outcome="ok",
        detail={
            "drift_before": before.drift,
            "drift_after": after.drift,
            "statements": len(statements),
        },
        settings=settings,
    )
    return {
        "user_id": user_id,
        "before": before.to_dict(),
        "after": after.to_dict(),
        "statements": statements,
    }


def entities(
    access: MemoryAccess,
    *,
    search: str = "",
    limit: int = 50,
    offset: int = 0,
    client: GraphClient | None = None,
) -> dict[str, Any]:
    client = _graph(access, client)
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
    client = _graph(access, client)
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
    client = _graph(access, client)
    rows = queries.facts_page(client, access.group_id, limit=limit, offset=offset)
    return {"user_id": access.user_id, "facts": rows}


def relations(
    access: MemoryAccess, *, limit: int = 50, client: GraphClient | None = None
) -> dict[str, Any]:
    client = _graph(access, client)
    return {
        "user_id": access.user_id,
        "names": queries.fact_name_distribution(client, access.group_id, limit=limit),
        "duplicates": queries.duplicates(client, access.group_id, limit=limit),
    }


def ratification(
    access: MemoryAccess,
    *,
    limit: int = 200,
    offset: int = 0,
    client: GraphClient | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    client = _graph(access, client)
    counts = queries.counts(client, access.group_id)
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
    client = _graph(access, client)
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
    client = _graph(access, client)
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

    client = _graph(access, client)
    rows = queries.facts_page(client, access.group_id, limit=fact_limit)
    with session_scope(access.settings) as session:
        messages = user_chat_messages(session, access.user_id, limit=message_limit)
    user_name = " ".join(p.capitalize() for p in access.user_id.replace("-", "_").split("_"))
    compared = compare_facts(rows, messages, user_name=user_name)
    return {
        "user_id": access.user_id,
        "messages": [m.to_dict() if hasattr(m, "to_dict") else dict(m) for m in messages],
        "facts": compared,
        "suspects": sum(1 for f in compared if f["suspect"]),
    }


def warm_context(
    access: MemoryAccess, query: str, *, client: GraphClient | None = None
) -> dict[str, Any]:
    if len(query) > 500:
        raise InvalidInput("the warm-context query is limited to 500 characters")
    client = _graph(access, client)
    context = build_warm_context(
        client, access.group_id, query, max_facts=access.settings.context_max_facts
    )
    return {"user_id": access.user_id, **context.to_dict()}
