"""Corrections of a user's memory, each audited with the exact edges before and after.

`correct(action, user_id, fact_uuid, ...)` (`retract`, `supersede`, `restore`, `reject`),
`undo_correction(audit_id, actor=...)`; `fact_corrections(access, uuid)` reads them. A write:
1. checks input, role, user and gate in one audited block (`correction_rules`);
2. reads the fact through `memory.graph.fact_writer` on the user's own graph;
3. in one transaction holding the fact's lock (`fact_locks`; too long is `fact_busy`): the
   fact read and the action checked again, the audit row (ids only), the graph write, the
   edges read back, the `memory_corrections` row (edges before and after, reason). A failed
   commit puts the edges back;
4. clears the fact's Redis hit counter after a retract or reject.

An undo restores exactly the edges a correction found (a superseding fact is deleted): its
author, or an admin with a reason (`not_your_correction`, `reason_required`). Refused:
`already_undone`, `not_undoable`, `stale_fact`. `batch_audit_id`: the bulk it is part of.
"""

from __future__ import annotations

import logging
import uuid as uuid_lib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from graphiti_core.driver.falkordb_driver import FalkorDriver
from graphiti_core.edges import EntityEdge

from yuxi_dash import validation
from yuxi_dash.access.audit import audited_refusals, record_audit
from yuxi_dash.access.roles import Actor, Role, require_role
from yuxi_dash.errors import (
    AlreadyUndone,
    CorrectionNotFound,
    FactNotFound,
    IndexDrift,
    InvalidInput,
    NotUndoable,
    NotYourCorrection,
    StaleFact,
)
from yuxi_dash.flags import FlagEvaluator
from yuxi_dash.memory.graph import correction_rules as rules
from yuxi_dash.memory.graph.client import GraphClient
from yuxi_dash.memory.graph.fact_writer import FactWriter, delete_edge, load_edge, save_edge
from yuxi_dash.memory.support.fact_locks import fact_lock, open_graph
from yuxi_dash.memory.support.fact_locks import snap as _snap
from yuxi_dash.memory.views import provenance_queries as pq
from yuxi_dash.memory.views.gate import MemoryAccess, audit_target, view_refusals
from yuxi_dash.memory.views.provenance import hits_conn_for
from yuxi_dash.memory.views.ratification import HITS_TTL_SECONDS, hits_key
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store import corrections as rows
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import MemoryCorrection

log = logging.getLogger(__name__)

ACTION_PREFIX = "memory."
UNDO_ACTION = "memory.undo"
HISTORY_LIMIT = 50
_SHOWN = ("audit_id", "at", "actor", "action", "reason", "ticket", "undoes_id")


def _door(
    user_id: str,
    actor: Actor,
    settings: Settings,
    evaluator: FlagEvaluator | None,
    client: GraphClient | None,
    what: str,
) -> tuple[str, GraphClient]:
    """Role, user id, gate, graph: the checks every correction and undo make first."""
    require_role(actor, Role.OPERATOR, action=what)
    return open_graph(user_id, settings, evaluator, client)


def _missing(client: GraphClient, group_id: str, fact: str, user_id: str) -> Exception:
    """Why graphiti-core did not find the fact: not there, or hidden by the index drift."""
    if pq.fact_by_uuid(client, group_id, fact) is not None:
        return IndexDrift(
            "the fact is in the graph but the relationship index does not see it "
            "(index drift): run `yuxi-dash memory repair-indexes USER` first"
        )
    return FactNotFound(f"no fact {fact} in {user_id}'s memory")


@dataclass
class _Plan:
    """What one correction will do, decided under the fact's lock."""

    before: dict[str, dict[str, Any] | None]
    changes: dict[str, EntityEdge | None]
    audit: dict[str, Any]
    row: dict[str, Any]


async def _write(
    driver: FalkorDriver,
    settings: Settings,
    *,
    group_id: str,
    fact: str,
    plan: Callable[[], Awaitable[_Plan]],
    extra: Callable[[Any, int], None] | None = None,
) -> tuple[int, _Plan, dict[str, Any]]:
    """Under the fact's lock, one transaction: plan, audit row, graph write, read back, row."""
    written = False
    decided: _Plan | None = None
    try:
        with fact_lock(settings, group_id, fact) as session:
            decided = await plan()
            audit_id = record_audit(session=session, **decided.audit)
            assert audit_id is not None
            if extra is not None:
                extra(session, audit_id)
            written = True
            for uuid, edge in decided.changes.items():
                if edge is None:
                    await delete_edge(driver, uuid)
                else:
                    await save_edge(driver, edge)
            after = {uuid: _snap(await load_edge(driver, uuid)) for uuid in decided.changes}
            rows.add_correction(
                session, audit_id=audit_id, before=decided.before, after=after, **decided.row
            )
        return audit_id, decided, after
    except BaseException:
        if written and decided is not None:  # the database did not take it: put the graph back
            for uuid, snap in decided.before.items():
                try:
                    if snap is None:
                        await delete_edge(driver, uuid)
                    else:
                        await save_edge(driver, rules.edge_from_snapshot(snap))
                except Exception:  # noqa: BLE001 - the original error is what matters
                    log.error("could not put a fact back after a failed correction")
        raise


def correct(
    action: str,
    user_id: str,
    fact_uuid: str,
    *,
    actor: Actor,
    reason: str,
    ticket: str | None = None,
    text: str | None = None,
    settings: Settings | None = None,
    evaluator: FlagEvaluator | None = None,
    client: GraphClient | None = None,
    now: datetime | None = None,
    batch_audit_id: int | None = None,
) -> dict[str, Any]:
    """Apply one correction (see the module doc; `batch_audit_id`: the bulk it is part of)."""
    settings = settings or get_settings()
    audit_action = ACTION_PREFIX + (action if action in rules.ACTIONS else "correct")
    target = audit_target(user_id)
    with audited_refusals(
        actor=actor.id,
        action=audit_action,
        target=target,
        detail={"via": actor.via, "fact_uuid": fact_uuid, "action": action},
        settings=settings,
    ):
        if action not in rules.ACTIONS:
            raise InvalidInput(f"unknown correction; one of {', '.join(rules.ACTIONS)}")
        fact = rules.fact_uuid(fact_uuid)
        why = rules.reason(reason)
        ref = rules.ticket(ticket)
        group_id, client = _door(user_id, actor, settings, evaluator, client, f"{action} a fact")
        writer = FactWriter(settings, group_id, handle=client.handle)
        correction_id = str(uuid_lib.uuid4())
        conn = hits_conn_for(settings, client)
        try:

            async def job(driver: FalkorDriver) -> tuple[int, _Plan, dict[str, Any]]:
                async def plan() -> _Plan:
                    moment = now or rules.utc_now()  # under the lock: the row's `at` too
                    edge = await load_edge(driver, fact)
                    if edge is None:
                        raise _missing(client, group_id, fact, user_id)
                    changes: dict[str, EntityEdge | None]
                    if action == "retract":
                        changes = {fact: rules.retracted(edge, moment)}
                    elif action == "reject":
                        changes = {fact: rules.rejected(edge, moment)}
                    elif action == "restore":
                        changes = {fact: rules.restored(edge, moment)}
                    else:
                        old, new = rules.superseded(edge, rules.fact_text(text, edge.fact), moment)
                        changes = {fact: old, new.uuid: new}
                    before: dict[str, dict[str, Any] | None] = {fact: _snap(edge)}
                    before.update({u: None for u in changes if u != fact})
                    detail = {
                        "via": actor.via,
                        "fact_uuid": fact,
                        "group_id": group_id,
                        "correction_id": correction_id,
                        "action": action,
                        "ticket": ref,
                        "new_fact_uuid": next((u for u in changes if u != fact), None),
                        "batch_audit_id": batch_audit_id,
                    }
                    return _Plan(
                        before=before,
                        changes=changes,
                        audit={
                            "actor": actor.id,
                            "action": audit_action,
                            "target": target,
                            "outcome": "ok",
                            "detail": detail,
                        },
                        row={
                            "id": correction_id,
                            "at": moment,
                            "actor": actor.id,
                            "user_id": user_id,
                            "group_id": group_id,
                            "fact_uuid": fact,
                            "action": action,
                            "reason": why,
                            "ticket": ref,
                            "hits_before": int(conn.get(hits_key(user_id, fact)) or 0),
                            "batch_audit_id": batch_audit_id,
                        },
                    )

                return await _write(driver, settings, group_id=group_id, fact=fact, plan=plan)

            audit_id, decided, after = writer.run(job)
            before = decided.before
            hits = int(decided.row["hits_before"])
            cleared = action in ("retract", "reject") and hits > 0
            if action in ("retract", "reject"):
                conn.delete(hits_key(user_id, fact))
        finally:
            conn.close()
    new_uuid = next((u for u in after if u != fact), None)
    return {
        "audit_id": audit_id,
        "actor": actor.id,
        "correction_id": correction_id,
        "action": action,
        "user_id": user_id,
        "group_id": group_id,
        "fact_uuid": fact,
        "new_fact_uuid": new_uuid,
        "ticket": ref,
        "hits_before": hits,
        "hits_cleared": cleared,
        "before": {u: rules.comparable(s) for u, s in before.items()},
        "after": {u: rules.comparable(s) for u, s in after.items()},
    }


def retract(user_id: str, fact_uuid: str, **kw: Any) -> dict[str, Any]:
    return correct("retract", user_id, fact_uuid, **kw)


def supersede(user_id: str, fact_uuid: str, **kw: Any) -> dict[str, Any]:
    return correct("supersede", user_id, fact_uuid, **kw)


def restore(user_id: str, fact_uuid: str, **kw: Any) -> dict[str, Any]:
    return correct("restore", user_id, fact_uuid, **kw)


def reject(user_id: str, fact_uuid: str, **kw: Any) -> dict[str, Any]:
    return correct("reject", user_id, fact_uuid, **kw)


def _may_undo_others(actor: Actor) -> None:
    """Undoing another operator's correction needs the admin role (`NotYourCorrection`)."""
    if actor.role < Role.ADMIN:
        raise NotYourCorrection(
            "this correction was made by another operator: only its author, or an admin "
            "with a reason, may undo it"
        )


def undo_correction(
    audit_id: int,
    *,
    actor: Actor,
    reason: str = "",
    settings: Settings | None = None,
    evaluator: FlagEvaluator | None = None,
    client: GraphClient | None = None,
    now: datetime | None = None,
    batch_audit_id: int | None = None,
) -> dict[str, Any]:
    """Put back exactly the edges the correction of audit row `audit_id` found (module doc)."""
    settings = settings or get_settings()
    target = "memory:*"
    detail: dict[str, Any] = {"via": actor.via, "undoes_audit_id": audit_id}
    with audited_refusals(
        actor=actor.id, action=UNDO_ACTION, target=target, detail=detail, settings=settings
    ):
        wanted = validation.db_id(audit_id, "audit id")
        require_role(actor, Role.OPERATOR, action="undo a memory correction")
        with session_scope(settings) as session:
            found = rows.by_audit_id(session, wanted)
            original = rows.correction_dict(found) if found else None
        if original is None:
            raise CorrectionNotFound(f"audit row {wanted} is not a memory correction")
    user_id = original["user_id"]
    target = audit_target(user_id)
    own = original["actor"] == actor.id
    detail = {
        **detail,
        "fact_uuid": original["fact_uuid"],
        "undoes_correction_id": original["id"],
        "undoes_actor": original["actor"],
        "own": own,
    }
    with audited_refusals(
        actor=actor.id, action=UNDO_ACTION, target=target, detail=detail, settings=settings
    ):
        if not own:
            _may_undo_others(actor)
            reason = rules.reason(reason)
        if original["action"] == rules.UNDO:
            raise NotUndoable("an undo cannot be undone; correct the fact again instead")
        if original["undone_by_audit_id"] is not None:
            raise AlreadyUndone(
                f"this correction was undone already (audit row {original['undone_by_audit_id']})"
            )
        group_id, client = _door(
            user_id, actor, settings, evaluator, client, "undo a memory correction"
        )
        writer = FactWriter(settings, group_id, handle=client.handle)
        correction_id = str(uuid_lib.uuid4())
        moment = now or rules.utc_now()
        wanted_before: dict[str, Any] = original["before"]
        left_after: dict[str, Any] = original["after"]
        conn = hits_conn_for(settings, client)
        try:

            async def job(driver: FalkorDriver) -> tuple[int, _Plan, dict[str, Any]]:
                async def plan() -> _Plan:
                    current = {u: _snap(await load_edge(driver, u)) for u in left_after}
                    for uuid, snap in left_after.items():
                        if rules.comparable(current[uuid]) != rules.comparable(snap):
                            raise StaleFact(
                                f"fact {uuid} changed since this correction; nothing was undone"
                            )
                    return _Plan(
                        before=current,
                        changes={
                            u: rules.edge_from_snapshot(s) if s is not None else None
                            for u, s in wanted_before.items()
                        },
                        audit={
                            "actor": actor.id,
                            "action": UNDO_ACTION,
                            "target": target,
                            "outcome": "ok",
                            "detail": {
                                **detail,
                                "group_id": group_id,
                                "correction_id": correction_id,
                                "action": rules.UNDO,
                                "batch_audit_id": batch_audit_id,
                            },
                        },
                        row={
                            "id": correction_id,
                            "actor": actor.id,
                            "user_id": user_id,
                            "group_id": group_id,
                            "fact_uuid": original["fact_uuid"],
                            "action": rules.UNDO,
                            "reason": " ".join(str(reason or "").split())[: rules.MAX_REASON_CHARS],
                            "ticket": original["ticket"],
                            "hits_before": 0,
                            "undoes_id": original["id"],
                            "batch_audit_id": batch_audit_id,
                        },
                    )

                def mark(session: Any, undo_audit_id: int) -> None:
                    if not rows.mark_undone(session, original["id"], undo_audit_id, moment):
                        raise AlreadyUndone("this correction was undone already")

                return await _write(
                    driver,
                    settings,
                    group_id=group_id,
                    fact=original["fact_uuid"],
                    plan=plan,
                    extra=mark,
                )

            audit_id, decided, after = writer.run(job)
            before = decided.before
            hits = int(original["hits_before"] or 0)
            if original["action"] in ("retract", "reject") and hits > 0:
                conn.set(hits_key(user_id, original["fact_uuid"]), hits, ex=HITS_TTL_SECONDS)
        finally:
            conn.close()
    return {
        "audit_id": audit_id,
        "actor": actor.id,
        "correction_id": correction_id,
        "action": rules.UNDO,
        "undoes_audit_id": wanted,
        "undoes_correction_id": original["id"],
        "user_id": user_id,
        "group_id": group_id,
        "fact_uuid": original["fact_uuid"],
        "hits_restored": hits if original["action"] in ("retract", "reject") else 0,
        "before": {u: rules.comparable(s) for u, s in before.items()},
        "after": {u: rules.comparable(s) for u, s in after.items()},
    }


def fact_corrections(
    access: MemoryAccess, fact_uuid: str, *, limit: int = HISTORY_LIMIT
) -> list[dict[str, Any]]:
    """One fact's corrections and undos, newest first, from `memory_corrections` (any session).

    Each row: audit id, time, actor, action, reason, ticket, what undid it, the fact a
    supersede made, and `undoable`: true on the one correction an undo can take back now
    (the newest that is neither an undo nor undone). Takes the view's `MemoryAccess`.
    """
    with view_refusals(access):
        fact = rules.fact_uuid(fact_uuid)
    with session_scope(access.settings) as session:
        found = session.scalars(
            sa.select(MemoryCorrection)
            .where(MemoryCorrection.user_id == access.user_id, MemoryCorrection.fact_uuid == fact)
            .order_by(MemoryCorrection.audit_id.desc())  # audit ids grow with each write
            .limit(limit)
        )
        history = [
            {
                **{k: v for k, v in rows.correction_dict(row).items() if k in _SHOWN},
                "undone_by_audit_id": row.undone_by_audit_id,
                "undone_at": row.undone_at.isoformat() if row.undone_at else None,
                "new_fact_uuid": next((u for u in (row.after or {}) if u != fact), None),
                "undoable": False,
            }
            for row in found
        ]
    live = [h for h in history if h["action"] != rules.UNDO and h["undone_by_audit_id"] is None]
    if live:
        live[0]["undoable"] = True
    return history
