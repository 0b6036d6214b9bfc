"""Retirements that look wrong: each retired fact beside what retired it, and a flag.

`retirements(access, ...)` takes the `MemoryAccess` of `open_view(user, "retirements")`;
`retirement_counts(actor=...)` counts every user (operators; gated-off users skipped,
never read; one audited look per user read; a failed read is a row with its error code).
Retired: expired_at or invalid_at set, or an invalidated status. `kind`, first match wins:
1. "correction": our live retract/reject/supersede left the fact's current expired_at
   (of `memory_corrections` only that field is read); its audit id, never suspicious;
2. "graphiti": the episode `memory.views.retiring_episode` names (the diff's matcher too)
   and its facts; **suspicious** when none shares a source or target node or the
   relation name with the retired fact;
3. "own_episode": graphiti wrote the fact already ended in that pass;
4. "unmatched": no episode; a listed row gets what `memory.views.provenance_queries`
   finds (its successor, or the newer fact on the same triple).
`no_restore` says why a row must not be restored.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from yuxi_dash.access.roles import Actor
from yuxi_dash.flags import FlagEvaluator
from yuxi_dash.memory.graph.client import GraphClient, Row
from yuxi_dash.memory.graph.correction_rules import INVALIDATED_STATUSES
from yuxi_dash.memory.quality import retirement_queries as rq
from yuxi_dash.memory.views import provenance_queries as pq
from yuxi_dash.memory.views import retiring_episode
from yuxi_dash.memory.views.gate import (
    MemoryAccess,
    graph_for,
    look_at_every_user,
)
from yuxi_dash.memory.views.ratification import parse_time
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import MemoryCorrection

VIEW = "retirements"
SCAN_ACTION = "memory.retirements_scan"
RETIRING_ACTIONS = ("retract", "reject", "supersede")
MAX_RETIRING_SHOWN = 10
MAX_LIMIT = 500
CORRECTION_CHUNK = 500  # fact uuids per correction statement
KINDS = ("correction", "graphiti", "own_episode", "unmatched")
_NEVER = datetime.min.replace(tzinfo=UTC)
_FACT_KEYS = ("uuid", "source", "name", "target", "fact", "created_at", "valid_at")


# --- our corrections ------------------------------------------------------------
def _expired_after(dialect: str) -> Any:
    """SQL for `after[fact_uuid].expired_at` (the one field read: never the whole snapshot)."""
    after, fact = MemoryCorrection.after, MemoryCorrection.fact_uuid
    if dialect == "postgresql":
        return sa.func.json_extract_path_text(after, fact, "expired_at")
    path = sa.literal('$."', sa.String) + fact + sa.literal('".expired_at', sa.String)
    return sa.func.json_extract(after, path)


def _corrections(
    settings: Settings, user_id: str, facts: list[str]
) -> dict[str, list[dict[str, Any]]]:
    """The live retracts, rejects and supersedes of these facts, by fact, newest first.

    Reads only the given facts' rows (CORRECTION_CHUNK uuids per statement) and, of each
    row's snapshot, only the expired_at it left.
    """
    by_fact: dict[str, list[dict[str, Any]]] = defaultdict(list)
    unique = list(dict.fromkeys(facts))
    with session_scope(settings) as session:
        expired = _expired_after(session.get_bind().dialect.name).label("expired_at")
        columns = (
            MemoryCorrection.fact_uuid,
            MemoryCorrection.audit_id,
            MemoryCorrection.action,
            MemoryCorrection.actor,
            MemoryCorrection.at,
            MemoryCorrection.ticket,
            expired,
        )
        for start in range(0, len(unique), CORRECTION_CHUNK):
            found = session.execute(
                sa.select(*columns)
                .where(
                    MemoryCorrection.user_id == user_id,
                    MemoryCorrection.fact_uuid.in_(unique[start : start + CORRECTION_CHUNK]),
                    MemoryCorrection.action.in_(RETIRING_ACTIONS),
                    MemoryCorrection.undone_by_audit_id.is_(None),
                )
                .order_by(MemoryCorrection.audit_id.desc())
            )
            for fact, audit_id, action, actor, at, ticket, expired_at in found:
                by_fact[fact].append(
                    {
                        "audit_id": audit_id,
                        "action": action,
                        "actor": actor,
                        "at": at.isoformat() if at else None,
                        "ticket": ticket,
                        "expired_at": parse_time(expired_at),
                    }
                )
    return by_fact


def _our_correction(fact: Row, rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The correction that left the fact as it is now (same expired_at), if any."""
    expired = parse_time(fact.get("expired_at"))
    if expired is None:
        return None
    for row in rows:
        if row["expired_at"] == expired:
            return {k: v for k, v in row.items() if k != "expired_at"}
    return None


# --- graphiti's pass ------------------------------------------------------------
def _shared(retired: Row, other: Row) -> list[str]:
    """What the other fact shares with the retired one: entity names, the relation name."""
    ends = {retired.get("source_uuid"): retired.get("source")}
    ends[retired.get("target_uuid")] = retired.get("target")
    out = [
        f"entity {ends[node]}"
        for node in dict.fromkeys((other.get("source_uuid"), other.get("target_uuid")))
        if node is not None and node in ends
    ]
    if other.get("name") and other.get("name") == retired.get("name"):
        out.append(f"relation {other['name']}")
    return out


def _written_with_it(retired: Row, episode: str) -> bool:
    """Whether the retired fact was itself written in that pass (graphiti ended it on arrival)."""
    created = parse_time(retired.get("created_at"))
    moment = parse_time(retired.get("expired_at"))
    listed = {str(e) for e in retired.get("episodes") or []}
    return (
        episode in listed
        and created is not None
        and moment is not None
        and moment - retiring_episode.WINDOW <= created <= moment + retiring_episode.SLACK
    )


def _fact_view(row: Row, retired: Row | None = None) -> dict[str, Any]:
    view = {k: row.get(k) for k in _FACT_KEYS}
    if retired is not None:
        view["shared"] = _shared(retired, row)
    return view


def classify(
    client: GraphClient, group_id: str, settings: Settings, user_id: str
) -> list[dict[str, Any]]:
    """Every retired fact of the graph with who retired it and the flag (module doc)."""
    retired = rq.retired_facts(client, group_id, sorted(INVALIDATED_STATUSES))
    expired = [str(f["uuid"]) for f in retired if f.get("expired_at")]
    ours = _corrections(settings, user_id, expired)
    rows: list[dict[str, Any]] = []
    pending: list[Row] = []
    for fact in retired:
        correction = _our_correction(fact, ours.get(str(fact["uuid"]), []))
        if correction is not None:
            rows.append(_row(fact, "correction", correction=correction))
        else:
            pending.append(fact)
    asked = [
        retiring_episode.Retired(str(f["uuid"]), moment, parse_time(f.get("invalid_at")))
        for f in pending
        if (moment := parse_time(f.get("expired_at"))) is not None
    ]
    found = retiring_episode.retiring_episodes(client, group_id, asked)
    for fact in pending:
        match = found.get(str(fact["uuid"]))
        if match is None:
            rows.append(_row(fact, "unmatched"))
        elif _written_with_it(fact, match.uuid):
            rows.append(_row(fact, "own_episode", found=match))
        else:
            rows.append(_row(fact, "graphiti", found=match))
    rows.sort(key=lambda r: (parse_time(r["retired_at"]) or _NEVER, str(r["uuid"])), reverse=True)
    return rows


def _row(
    fact: Row,
    kind: str,
    *,
    correction: dict[str, Any] | None = None,
    found: retiring_episode.RetiringEpisode | None = None,
) -> dict[str, Any]:
    retiring = [_fact_view(r, fact) for r in (found.facts if found else [])]
    suspicious = kind == "graphiti" and bool(retiring) and not any(r["shared"] for r in retiring)
    return {
        **{k: fact.get(k) for k in ("uuid", "source", "name", "target", "fact", "status")},
        **{k: fact.get(k) for k in ("created_at", "valid_at", "invalid_at", "expired_at")},
        "retired_at": fact.get("expired_at") or fact.get("invalid_at"),
        "superseded_by": fact.get("superseded_by"),
        "kind": kind,
        "suspicious": suspicious,
        "correction": correction,
        "episode_uuid": found.uuid if found else None,
        "episode": None,
        "basis": found.basis if found else None,
        "retiring_count": len(retiring),
        "retiring_facts": retiring[:MAX_RETIRING_SHOWN],
        "no_restore": _no_restore(fact, kind),
        "_ends": (fact.get("source_uuid"), fact.get("target_uuid")),
    }


def _no_restore(fact: Row, kind: str) -> str | None:
    """Why Restore is not offered on this row (None: it is).

    `restore` clears expired_at and invalid_at: wrong for an end the fact was written with,
    and for our own correction, which is taken back with its undo (a supersede's new fact
    would stay live beside the restored one).
    """
    if kind == "correction":
        return "retired by our correction: undo that correction instead"
    if kind == "own_episode":
        return "written already ended: its end date is part of what was said"
    if not fact.get("expired_at") and fact.get("invalid_at"):
        return "ended by its own date (invalid_at), not retired by a pass"
    return None


# --- the page's extra reads -------------------------------------------------------
def _episodes(client: GraphClient, group_id: str, uuids: list[str]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    unique = list(dict.fromkeys(uuids))
    for start in range(0, len(unique), pq.MAX_EPISODES):
        for uuid, row in pq.episodes_by_uuid(
            client, group_id, unique[start : start + pq.MAX_EPISODES]
        ).items():
            found[uuid] = {
                "uuid": uuid,
                "name": row.get("name"),
                "source_description": row.get("source_description"),
                "created_at": row.get("created_at"),
                "content": str(row.get("content") or "")[:300],
            }
    return found


def _provenance_match(client: GraphClient, group_id: str, page: list[dict[str, Any]]) -> None:
    """The page's unmatched rows: what the provenance view finds (successor, same triple)."""
    unmatched = [row for row in page if row["kind"] == "unmatched"]
    successors = pq.fact_summaries(
        client, group_id, [str(r["superseded_by"]) for r in unmatched if r.get("superseded_by")]
    )
    for row in unmatched:
        by = successors.get(str(row.get("superseded_by")))
        basis = "named by its superseded_by"
        source, target = row["_ends"]
        if by is None and row.get("invalid_at") and source and target:
            newer = pq.invalidated_by(
                client,
                group_id,
                fact_uuid=str(row["uuid"]),
                source=str(source),
                target=str(target),
                name=str(row.get("name") or ""),
                invalid_at=str(row["invalid_at"]),
            )
            by = newer[0] if newer else None
            basis = "newer fact on the same source, name and target"
        if by is None:
            continue
        episodes = list(by.get("episodes") or [])
        row["retiring_facts"] = [
            {**{k: by.get(k) for k in _FACT_KEYS}, "shared": ["the same source, name and target"]}
        ]
        row["retiring_count"] = 1
        row["basis"] = basis
        row["episode_uuid"] = str(episodes[0]) if episodes else None


def retirements(
    access: MemoryAccess,
    *,
    suspicious_only: bool = False,
    limit: int = 50,
    offset: int = 0,
    client: GraphClient | None = None,
) -> dict[str, Any]:
    """One user's retired facts, newest first, each with who retired it (module doc)."""
    client = graph_for(access, client, pages={"limit": limit, "offset": offset})
    limit = min(limit, MAX_LIMIT)
    rows = classify(client, access.group_id, access.settings, access.user_id)
    counts = {kind: sum(1 for r in rows if r["kind"] == kind) for kind in KINDS}
    counts["suspicious"] = sum(1 for r in rows if r["suspicious"])
    chosen = [r for r in rows if r["suspicious"]] if suspicious_only else rows
    page = chosen[offset : offset + limit]
    _provenance_match(client, access.group_id, page)
    episodes = _episodes(
        client, access.group_id, [r["episode_uuid"] for r in page if r["episode_uuid"]]
    )
    for row in page:
        row["episode"] = episodes.get(row["episode_uuid"]) if row["episode_uuid"] else None
    wanted = [r["uuid"] for r in page] + [f["uuid"] for r in page for f in r["retiring_facts"]]
    texts = rq.fact_texts(client, access.group_id, [str(u) for u in wanted])
    for row in page:
        row["fact"] = (texts.get(str(row["uuid"])) or {}).get("fact")
        for fact in row["retiring_facts"]:
            found = texts.get(str(fact["uuid"])) or {}
            fact.update({k: found.get(k, fact.get(k)) for k in ("source", "target", "fact")})
    return {
        "user_id": access.user_id,
        "group_id": access.group_id,
        "suspicious_only": suspicious_only,
        "retired": len(rows),
        "counts": counts,
        "matching": len(chosen),
        "offset": offset,
        "limit": limit,
        "rows": [{k: v for k, v in r.items() if k != "_ends"} for r in page],
    }


# --- the fleet count --------------------------------------------------------------
def retirement_counts(
    *,
    actor: Actor,
    limit: int = 500,
    settings: Settings | None = None,
    evaluator: FlagEvaluator | None = None,
    client: GraphClient | None = None,
) -> list[dict[str, Any]]:
    """Per user graph (up to `limit`): retired facts, suspicious ones, ours; most suspicious first.

    Operators and admins only (it reads every user's memory, as the index health scan does).
    A gated-off user is skipped and never read (no audit row: nothing was looked at); every
    user read goes through `open_view(user, "retirements")`, one audit row each.
    """
    settings = settings or get_settings()

    def count(access: MemoryAccess, graph: GraphClient) -> dict[str, Any]:
        graph_for(access, graph)
        rows = classify(graph, access.group_id, settings, access.user_id)
        return {
            "retired": len(rows),
            "suspicious": sum(1 for r in rows if r["suspicious"]),
            "by_correction": sum(1 for r in rows if r["kind"] == "correction"),
            "by_graphiti": sum(1 for r in rows if r["kind"] == "graphiti"),
        }

    results, _ = look_at_every_user(
        VIEW,
        count,
        actor=actor,
        action=SCAN_ACTION,
        purpose="count every user's retirements",
        limit=limit,
        settings=settings,
        evaluator=evaluator,
        client=client,
    )
    results.sort(key=lambda r: (r["gated_off"], -(r.get("suspicious") or 0), r["user_id"]))
    return results
