"""One audited bulk correction: retract a user's assistant-only facts created before a moment.

Operators only (checked here); each refusal is one typed error and one audit row, no change.
- `preview_bulk_retract`: an audited look (`assistant_only` view): the facts, their count and
  the preview token naming that exact set.
- `bulk_retract`: reads the set again (`preview_stale`, `fact_not_found`, `bulk_too_large`),
  writes a parent row (`memory.bulk_retract`), then each fact through `corrections.retract`
  (`batch_audit_id`: the parent). On a failure those done are undone; if that fails too,
  `bulk_incomplete` names the parent, whose `memory undo` finishes it. Ingestion takes no
  fact lock: an episode added to a fact during the writes is not seen (an undo puts it back).
- `undo_bulk_retract`: its author, or an admin with a reason. Under every fact's lock at once
  (`fact_locks.hold_facts`) a fact back in its pre-bulk state is skipped, one changed otherwise
  refuses it all (`stale_fact`); then one transaction: the `memory.bulk_undo` row and each
  undo naming it. A failed write puts every fact back (`bulk_incomplete` if one cannot be).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from graphiti_core.driver.falkordb_driver import FalkorDriver

from yuxi_dash import validation
from yuxi_dash.access.audit import audited_refusals, complete_audit, record_audit
from yuxi_dash.access.roles import Actor, Role, require_role
from yuxi_dash.errors import (
    AlreadyUndone,
    BulkIncomplete,
    BulkTooLarge,
    CorrectionNotFound,
    FactNotFound,
    InvalidInput,
    NotYourCorrection,
    PreviewStale,
    StaleFact,
    YuxiDashError,
)
from yuxi_dash.flags import FlagEvaluator
from yuxi_dash.memory.graph import correction_rules as rules
from yuxi_dash.memory.graph.client import GraphClient
from yuxi_dash.memory.graph.fact_writer import FactWriter, load_edge, save_edge
from yuxi_dash.memory.quality.assistant_only import (
    assistant_only_facts,
    created_before,
    measure,
    parse_moment,
    preview_token,
)
from yuxi_dash.memory.quality.assistant_only_actions import (
    BULK_ACTION,
    BULK_UNDO_ACTION,
    PREVIEW_ACTION,
    VIEW,
)
from yuxi_dash.memory.support import corrections
from yuxi_dash.memory.support.fact_locks import current_edges, hold_facts, open_graph, snap
from yuxi_dash.memory.views.gate import audit_target, open_view
from yuxi_dash.memory.views.provenance import hits_conn_for
from yuxi_dash.memory.views.ratification import hits_key
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store import corrections as rows
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AuditEntry, MemoryCorrection

log = logging.getLogger(__name__)

MAX_BULK = 500


def preview_bulk_retract(
    user_id: str,
    before: str,
    *,
    actor: Actor,
    settings: Settings | None = None,
    evaluator: FlagEvaluator | None = None,
    client: GraphClient | None = None,
) -> dict[str, Any]:
    """What `bulk_retract` would change now: the facts, their count and the preview token."""
    settings = settings or get_settings()
    with audited_refusals(
        actor=actor.id,
        action=PREVIEW_ACTION,
        target=audit_target(user_id),
        detail={"via": actor.via},
        settings=settings,
    ):
        require_role(actor, Role.OPERATOR, action="preview a bulk retract")
        moment = parse_moment(before)
    access = open_view(user_id, VIEW, actor=actor, settings=settings, evaluator=evaluator)
    data = assistant_only_facts(access, before=moment.isoformat(), limit=MAX_BULK, client=client)
    return {
        "user_id": user_id,
        "before": data["before"],
        "count": data["total"],
        "too_large": data["total"] > MAX_BULK,
        "max_bulk": MAX_BULK,
        "facts": data["facts"],
        "preview_token": data["preview_token"],
        "assistant_only_share": data["assistant_only_share"],
    }


def _roll_back(done: list[int], actor: Actor, **kw: Any) -> int:
    """Undo the retracts of a bulk that failed half-way, newest first; how many were undone."""
    undone = 0
    for audit_id in reversed(done):
        try:
            corrections.undo_correction(audit_id, actor=actor, **kw)
            undone += 1
        except Exception:  # noqa: BLE001 - the first error is the one raised
            log.error("could not undo one retract of a failed bulk retract")
    return undone


def bulk_retract(
    user_id: str,
    before: str,
    *,
    actor: Actor,
    reason: str,
    token: str,
    ticket: str | None = None,
    settings: Settings | None = None,
    evaluator: FlagEvaluator | None = None,
    client: GraphClient | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Retract the previewed set of assistant-only facts (see the module doc)."""
    settings = settings or get_settings()
    target = audit_target(user_id)
    with audited_refusals(
        actor=actor.id,
        action=BULK_ACTION,
        target=target,
        detail={"via": actor.via},
        settings=settings,
    ):
        require_role(actor, Role.OPERATOR, action="retract a user's assistant-only facts")
        moment = parse_moment(before)
        why = rules.reason(reason)
        ref = rules.ticket(ticket)
        wanted = validation.text(token, "the preview token", limit=64).strip()
        if not wanted:
            raise InvalidInput("preview the bulk retract first: its token ties it to what you saw")
        group_id, client = open_graph(user_id, settings, evaluator, client)
        uuids = [f["uuid"] for f in created_before(measure(client, group_id).facts, moment)]
        if preview_token(user_id, moment, uuids) != wanted:
            raise PreviewStale(
                "the assistant-only facts changed since the preview; preview again, nothing "
                "was retracted"
            )
        if not uuids:
            raise FactNotFound(f"{user_id} has no assistant-only facts created before {moment}")
        if len(uuids) > MAX_BULK:
            raise BulkTooLarge(
                f"{len(uuids)} facts; at most {MAX_BULK} at once: choose an earlier moment"
            )
    parent = record_audit(
        actor=actor.id,
        action=BULK_ACTION,
        target=target,
        outcome="pending",
        detail={
            "via": actor.via,
            "group_id": group_id,
            "before": moment.isoformat(),
            "facts": len(uuids),
            "preview_token": wanted,
            "ticket": ref,
        },
        settings=settings,
    )
    assert parent is not None
    moment_now = now or rules.utc_now()
    same = {"settings": settings, "evaluator": evaluator, "client": client}
    done: list[int] = []
    try:
        for uuid in uuids:
            result = corrections.retract(
                user_id,
                uuid,
                actor=actor,
                reason=why,
                ticket=ref,
                now=moment_now,
                batch_audit_id=parent,
                **same,
            )
            done.append(int(result["audit_id"]))
    except Exception as exc:
        rolled_back = _roll_back(done, actor, **same)
        code = exc.code if isinstance(exc, YuxiDashError) else type(exc).__name__
        outcome = {"code": code, "retracted": len(done), "rolled_back": rolled_back}
        complete_audit(parent, outcome="failed", detail=outcome, settings=settings)
        if rolled_back < len(done):
            raise BulkIncomplete(
                f"the bulk retract failed ({code}) and {len(done) - rolled_back} retract(s) "
                f"could not be undone: `yuxi-dash memory undo {parent}` finishes it"
            ) from exc
        raise
    complete_audit(parent, outcome="ok", detail={"retracted": len(done)}, settings=settings)
    return {
        "audit_id": parent,
        "actor": actor.id,
        "user_id": user_id,
        "group_id": group_id,
        "before": moment.isoformat(),
        "count": len(done),
        "fact_uuids": uuids,
        "correction_audit_ids": done,
        "ticket": ref,
    }


def is_bulk(audit_id: int, *, settings: Settings | None = None) -> bool:
    """Whether audit row `audit_id` is a bulk retract's parent row."""
    with session_scope(settings or get_settings()) as session:
        entry = session.get(AuditEntry, int(audit_id))
        return entry is not None and entry.action == BULK_ACTION


def _batch(settings: Settings, audit_id: int) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """(the parent audit row, the bulk's corrections in order) as plain data."""
    with session_scope(settings) as session:
        entry = session.get(AuditEntry, audit_id)
        if entry is None or entry.action != BULK_ACTION:
            return None, []
        parent = {"actor": entry.actor, "target": entry.target, "outcome": entry.outcome}
        found = session.scalars(
            sa.select(MemoryCorrection)
            .where(MemoryCorrection.batch_audit_id == audit_id)
            .order_by(MemoryCorrection.audit_id)
        )
        return parent, [rows.correction_dict(row) for row in found]


def _put_back(
    settings: Settings, group_id: str, client: GraphClient, wanted: dict[str, dict[str, Any] | None]
) -> list[str]:
    """Write back every fact whose edge is no longer `wanted`'s; the facts that failed."""

    async def job(driver: FalkorDriver) -> list[str]:
        failed = []
        for uuid, want in wanted.items():
            try:
                if want is not None and rules.comparable(
                    snap(await load_edge(driver, uuid))
                ) != rules.comparable(want):
                    await save_edge(driver, rules.edge_from_snapshot(want))
            except Exception:  # noqa: BLE001 - the first error is the one raised
                failed.append(uuid)
        return failed

    try:
        return FactWriter(settings, group_id, handle=client.handle).run(job)
    except Exception:  # noqa: BLE001 - the graph is out of reach: nothing was put back
        return list(wanted)


def _same(now: dict[str, Any], wanted: dict[str, Any]) -> bool:
    return all(rules.comparable(now[u]) == rules.comparable(s) for u, s in wanted.items())


def _undo_held(
    wanted: int,
    left: list[dict[str, Any]],
    *,
    actor: Actor,
    reason: str,
    detail: dict[str, Any],
    user_id: str,
    group_id: str,
    settings: Settings,
    evaluator: FlagEvaluator | None,
    client: GraphClient,
) -> dict[str, Any]:
    """Check and undo every retract of `left` under all their locks (the module doc)."""
    facts = sorted({uuid for row in left for uuid in row["after"]})
    with hold_facts(settings, group_id, facts) as session:
        now = current_edges(settings, group_id, client, facts)
        todo = [row for row in left if not _same(now, row["before"])]
        skipped = len(left) - len(todo)
        changed = [row["fact_uuid"] for row in todo if not _same(now, row["after"])]
        if changed:
            raise StaleFact(
                f"{len(changed)} fact(s) changed since the bulk retract; nothing was undone"
            )
        undo_parent = record_audit(
            session=session,
            actor=actor.id,
            action=BULK_UNDO_ACTION,
            target=audit_target(user_id),
            outcome="ok",  # one transaction with the undos: all of them, or no row
            detail={**detail, "group_id": group_id, "facts": len(todo), "skipped": skipped},
        )
        assert undo_parent is not None
        undone: list[int] = []
        try:
            for row in todo:
                result = corrections.undo_correction(
                    row["audit_id"],
                    actor=actor,
                    reason=reason,
                    settings=settings,
                    evaluator=evaluator,
                    client=client,
                    batch_audit_id=undo_parent,
                )
                undone.append(int(result["audit_id"]))
        except Exception as exc:
            failed = _put_back(settings, group_id, client, now)
            conn = hits_conn_for(settings, client)
            try:  # the undos restored hit counters; the facts are retracted again
                for row in todo:
                    conn.delete(hits_key(user_id, row["fact_uuid"]))
            finally:
                conn.close()
            if failed:
                raise BulkIncomplete(
                    f"the undo failed and {len(failed)} fact(s) could not be put back: "
                    f"run `yuxi-dash memory undo {wanted}` again to finish it"
                ) from exc
            raise
    return {
        "audit_id": undo_parent,
        "actor": actor.id,
        "undoes_audit_id": wanted,
        "user_id": user_id,
        "group_id": group_id,
        "count": len(undone),
        "skipped": skipped,
        "fact_uuids": [r["fact_uuid"] for r in todo],
        "undo_audit_ids": undone,
    }


def undo_bulk_retract(
    audit_id: int,
    *,
    actor: Actor,
    reason: str = "",
    settings: Settings | None = None,
    evaluator: FlagEvaluator | None = None,
    client: GraphClient | None = None,
) -> dict[str, Any]:
    """Undo every retract of the bulk of parent audit row `audit_id` (see the module doc)."""
    settings = settings or get_settings()
    detail: dict[str, Any] = {"via": actor.via, "undoes_audit_id": audit_id}
    with audited_refusals(
        actor=actor.id, action=BULK_UNDO_ACTION, target="memory:*", detail=detail, settings=settings
    ):
        wanted = validation.db_id(audit_id, "audit id")
        require_role(actor, Role.OPERATOR, action="undo a bulk retract")
        parent, batch = _batch(settings, wanted)
        if parent is None:
            raise CorrectionNotFound(f"audit row {wanted} is not a bulk retract")
    user_id = str(parent["target"]).removeprefix("memory:")
    own = parent["actor"] == actor.id
    detail = {**detail, "undoes_actor": parent["actor"], "own": own}
    with audited_refusals(
        actor=actor.id,
        action=BULK_UNDO_ACTION,
        target=audit_target(user_id),
        detail=detail,
        settings=settings,
    ):
        if not own:
            if actor.role < Role.ADMIN:
                raise NotYourCorrection(
                    "this bulk retract was made by another operator: only its author, or an "
                    "admin with a reason, may undo it"
                )
            reason = rules.reason(reason)
        left = [r for r in batch if r["undone_by_audit_id"] is None]
        if not left:
            raise AlreadyUndone(f"nothing of bulk retract {wanted} is left to undo")
        group_id, client = open_graph(user_id, settings, evaluator, client)
        try:
            return _undo_held(
                wanted,
                left,
                actor=actor,
                reason=reason,
                detail=detail,
                user_id=user_id,
                group_id=group_id,
                settings=settings,
                evaluator=evaluator,
                client=client,
            )
        except YuxiDashError:
            raise  # audited by the block
        except Exception as exc:
            record_audit(
                actor=actor.id,
                action=BULK_UNDO_ACTION,
                target=audit_target(user_id),
                outcome="failed",
                detail={**detail, "code": type(exc).__name__},
                settings=settings,
            )
            raise
