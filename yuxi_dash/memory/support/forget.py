"""Forget everything about a user, verified: graph, hit counters, corrections, shared copies.

`forget_user` is admin only (checked here) and needs a typed confirmation equal to the user
id. It counts what the graph holds, then deletes:
1. the whole graph, communities included (GRAPH.DELETE: one graph per user, `derive_group_id`);
2. every hit counter under ``mem:hits:{user_id}:`` (SCAN MATCH on the escaped prefix, never
   KEYS);
3. the user's `memory_corrections` rows (they copy facts; their audit rows stay);
4. the shared distribution copies (`SharedStore.forget`, with YUXI_DASH_REDIS_URL);
then verifies none is left before the outcome is `ok` (else `failed`, `ForgetIncomplete`).
One audit row, `memory.forget`, with the counts. Refusals are typed, audited and change
nothing. The memory flag is not consulted (erasure is a right); chat records, thread state,
tool results and the audit log stay.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import redis
import sqlalchemy as sa

from yuxi_dash.access.audit import record_audit
from yuxi_dash.access.roles import Actor, Role, require_role
from yuxi_dash.errors import ConfirmationMismatch, ForgetIncomplete, YuxiDashError
from yuxi_dash.memory.cache.distributions import get_cache, get_shared_store
from yuxi_dash.memory.graph import queries
from yuxi_dash.memory.graph.client import GraphClient, get_client, glob_escape, hits_connection
from yuxi_dash.memory.views.gate import audit_target, group_for
from yuxi_dash.memory.views.ratification import hits_key
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import MemoryCorrection

FORGET_ACTION = "memory.forget"
SCAN_COUNT = 1000
DELETE_BATCH = 500
LEFT_ALONE = ("chat records", "thread state and summaries", "offloaded tool results", "audit log")
CONFIRMATION_TEXT = (
    "This deletes {user}'s memory graph (entities, facts, episodes, communities), their "
    "ratification hit counters and their memory corrections (which keep copies of facts), "
    "then checks that nothing is left. Chat records, thread "
    "state and offloaded tool results are not memory and are left alone. "
    "Type the user id to confirm."
)

COUNT_EDGES = "MATCH ()-[e]->() RETURN count(e) AS c"


@dataclass(frozen=True)
class ForgetReport:
    """What was deleted, what the check found afterwards, and the audit row."""

    user_id: str
    group_id: str
    deleted: dict[str, int]
    verified: bool
    remaining: dict[str, int]
    audit_id: int | None
    left_alone: tuple[str, ...] = field(default=LEFT_ALONE)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["left_alone"] = list(self.left_alone)
        return data


def confirmation_text(user_id: str) -> str:
    """What the page and the CLI say before a forget."""
    return CONFIRMATION_TEXT.format(user=user_id)


def hits_prefix(user_id: str) -> str:
    """The prefix of every hit counter of this user: ``mem:hits:{user_id}:``."""
    return hits_key(user_id, "")


def hit_keys(conn: redis.Redis, user_id: str) -> list[bytes | str]:
    """Every key under the user's hit-counter prefix (SCAN MATCH, never KEYS)."""
    pattern = glob_escape(hits_prefix(user_id)) + "*"
    return list(conn.scan_iter(match=pattern, count=SCAN_COUNT))


def delete_hit_keys(conn: redis.Redis, user_id: str) -> int:
    """Delete every key under the user's prefix, in batches; how many were deleted."""
    deleted = 0
    batch: list[bytes | str] = []
    for key in conn.scan_iter(match=glob_escape(hits_prefix(user_id)) + "*", count=SCAN_COUNT):
        batch.append(key)
        if len(batch) >= DELETE_BATCH:
            deleted += int(conn.delete(*batch))
            batch = []
    if batch:
        deleted += int(conn.delete(*batch))
    return deleted


def _corrections(user_id: str) -> sa.Select[Any]:
    return (
        sa.select(sa.func.count())
        .select_from(MemoryCorrection)
        .where(MemoryCorrection.user_id == user_id)
    )


def count_corrections(settings: Settings, user_id: str) -> int:
    with session_scope(settings) as session:
        return int(session.scalar(_corrections(user_id)) or 0)


def delete_corrections(settings: Settings, user_id: str) -> int:
    """Delete the user's memory_corrections rows; how many were deleted."""
    with session_scope(settings) as session:
        deleted = int(session.scalar(_corrections(user_id)) or 0)
        session.execute(sa.delete(MemoryCorrection).where(MemoryCorrection.user_id == user_id))
    return deleted


def graph_counts(client: GraphClient, group_id: str) -> dict[str, int]:
    """What the user's graph holds (all zero when there is no graph)."""
    names = ("nodes", "edges", "entities", "episodes", "communities", "facts", "mentions")
    if not client.graph_exists(group_id):
        return dict.fromkeys((*names, "community_members"), 0)
    statements = (
        queries.COUNT_NODES,
        COUNT_EDGES,
        queries.COUNT_ENTITIES,
        queries.COUNT_EPISODES,
        queries.COUNT_COMMUNITIES,
        queries.COUNT_RELATES_TO,
        queries.COUNT_MENTIONS,
    )
    counted = {
        name: queries.counts_one(client, group_id, statement)
        for name, statement in zip(names, statements, strict=True)
    }
    counted["community_members"] = queries.counts_one(client, group_id, queries.COUNT_HAS_MEMBER)
    return counted


def _refuse(actor: Actor, user_id: str, exc: YuxiDashError, settings: Settings) -> None:
    record_audit(
        actor=actor.id,
        action=FORGET_ACTION,
        target=audit_target(user_id),
        outcome="refused",
        detail={"via": actor.via, "code": exc.code},
        settings=settings,
    )


def check_forget(user_id: str, confirmation: str, *, actor: Actor) -> str:
    """The refusals, in order: role, user id, confirmation. Returns the group id."""
    require_role(actor, Role.ADMIN, action="forget a user's memory")
    group_id = group_for(user_id)
    if not isinstance(confirmation, str) or confirmation != user_id:
        raise ConfirmationMismatch(
            "the confirmation must be the user id exactly; nothing was deleted"
        )
    return group_id


def forget_user(
    user_id: str,
    confirmation: str,
    *,
    actor: Actor,
    settings: Settings | None = None,
    client: GraphClient | None = None,
    hits: redis.Redis | None = None,
) -> ForgetReport:
    """Delete the user's graph and hit counters, verify nothing is left, audit the counts."""
    settings = settings or get_settings()
    try:
        group_id = check_forget(user_id, confirmation, actor=actor)
        client = client or get_client(settings)
        conn = hits or hits_connection(settings)
    except YuxiDashError as exc:
        _refuse(actor, user_id, exc, settings)
        raise
    try:
        deleted = graph_counts(client, group_id)
        client.delete_graph(group_id)
        deleted["redis_keys"] = delete_hit_keys(conn, user_id)
        deleted["corrections"] = delete_corrections(settings, user_id)
        get_cache().forget(group_id)  # this process's copies; other processes never serve theirs
        shared = get_shared_store(settings.redis_url)
        deleted["shared_parts"] = shared.forget(group_id) if shared is not None else 0
        remaining = {
            "graph": int(client.graph_exists(group_id) or group_id in client.list_graphs()),
            "redis_keys": len(hit_keys(conn, user_id)),
            "corrections": count_corrections(settings, user_id),
            "shared_parts": len(shared.keys(group_id)) if shared is not None else 0,
        }
    except Exception as exc:
        code = exc.code if isinstance(exc, YuxiDashError) else type(exc).__name__
        record_audit(
            actor=actor.id,
            action=FORGET_ACTION,
            target=audit_target(user_id),
            outcome="failed",
            detail={"via": actor.via, "code": code},
            settings=settings,
        )
        raise
    finally:
        if hits is None:
            conn.close()
    verified = not any(remaining.values())
    audit_id = record_audit(
        actor=actor.id,
        action=FORGET_ACTION,
        target=audit_target(user_id),
        outcome="ok" if verified else "failed",
        detail={
            "via": actor.via,
            "deleted": deleted,
            "verified": verified,
            "remaining": remaining,
        },
        settings=settings,
    )
    if not verified:
        raise ForgetIncomplete(
            f"after deleting, {remaining['graph']} graph(s), {remaining['redis_keys']} "
            f"hit counter(s), {remaining['corrections']} correction(s) and "
            f"{remaining['shared_parts']} shared distribution(s) are still there "
            f"for {user_id} (audit row {audit_id})"
        )
    return ForgetReport(user_id, group_id, deleted, verified, remaining, audit_id)
