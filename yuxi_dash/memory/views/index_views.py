"""The relationship-index views of memory: per-user health and probe, the scan, the repair.

`index_health` counts every fact both ways (index path vs label-free path);
`index_probe` is the sub-millisecond check of node 0 only; `index_health_scan`
checks every user graph (gated-off users skipped, not read) with one audit row
per scan; `repair_indexes` is admin only and drops and rebuilds every
relationship index of a user's graph, audited with the drift before and after.
"""

from __future__ import annotations

from typing import Any

from yuxi_dash import validation
from yuxi_dash.access.audit import audited_refusals, record_audit
from yuxi_dash.access.roles import Actor, Role, require_role
from yuxi_dash.flags import FlagEvaluator
from yuxi_dash.memory.graph.client import GraphClient, get_client
from yuxi_dash.memory.graph.groups import derive_group_id
from yuxi_dash.memory.graph.index_health import (
    check_index_health,
    probe_index_health,
    rebuild_relationship_indexes,
)
from yuxi_dash.memory.views.gate import (
    REPAIR_ACTION,
    MemoryAccess,
    audit_target,
    gates_for,
    graph_for,
    list_memory_users,
    open_view,
)
from yuxi_dash.settings import Settings, get_settings


def index_health(access: MemoryAccess, *, client: GraphClient | None = None) -> dict[str, Any]:
    client = graph_for(access, client)
    return {"user_id": access.user_id, **check_index_health(client, access.group_id).to_dict()}


def index_probe(access: MemoryAccess, *, client: GraphClient | None = None) -> dict[str, Any]:
    """The sub-millisecond index check (node 0 only); `index_health` is the full count."""
    client = graph_for(access, client)
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
    with audited_refusals(
        actor=actor.id,
        action="memory.index_health_scan",
        target="memory:*",
        detail={"via": actor.via},
        settings=settings,
    ):
        require_role(actor, Role.OPERATOR, action="scan every user's memory indexes")
        validation.non_negative(limit, "limit")
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
            target=audit_target(user_id),
            outcome="forbidden",
            settings=settings,
        )
        raise
    access = open_view(user_id, "index_health", actor=actor, settings=settings, evaluator=evaluator)
    client = graph_for(access, client)
    before = check_index_health(client, access.group_id)
    try:
        statements = rebuild_relationship_indexes(client, access.group_id)
    except Exception as exc:
        record_audit(
            actor=actor.id,
            action=REPAIR_ACTION,
            target=audit_target(user_id),
            outcome="failed",
            detail={"drift_before": before.drift, "error": type(exc).__name__},
            settings=settings,
        )
        raise
    after = check_index_health(client, access.group_id)
    record_audit(
        actor=actor.id,
        action=REPAIR_ACTION,
        target=audit_target(user_id),
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
