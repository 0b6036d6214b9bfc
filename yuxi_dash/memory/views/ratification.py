"""Ratification: what the next pass would do with each tentative fact.

Hits live in Redis at ``mem:hits:{user_id}:{edge_uuid}`` (30-day TTL) — on
YUXI_DASH_REDIS_URL, or on the FalkorDB server itself when that is unset.
Rules: tentative with hits >= 1 -> promote (status active, ratified_at);
0 hits and older than 30 days -> supersede; otherwise leave. This module only
reads and decides; the dashboard never runs the pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import redis

HITS_TTL_SECONDS = 30 * 24 * 3600
SUPERSEDE_AFTER = timedelta(days=30)
Action = Literal["promote", "supersede", "leave"]


def hits_key(user_id: str, edge_uuid: str) -> str:
    return f"mem:hits:{user_id}:{edge_uuid}"


def hits_store(redis_url: str | None) -> str:
    """Where the hit counters are read from, in words (`hits_connection` decides the same
    way); the URL itself is never shown, it may hold a password."""
    if redis_url:
        return "the Redis server at YUXI_DASH_REDIS_URL"
    return "the FalkorDB server itself (YUXI_DASH_REDIS_URL is unset)"


def read_hits(conn: redis.Redis, user_id: str, edge_uuids: Sequence[str]) -> dict[str, int]:
    """Hit counts for the given facts (missing key -> 0), one MGET."""
    if not edge_uuids:
        return {}
    values = conn.mget([hits_key(user_id, uuid) for uuid in edge_uuids])
    return {
        uuid: int(value) if value is not None else 0
        for uuid, value in zip(edge_uuids, values, strict=True)
    }


def parse_time(value: Any) -> datetime | None:
    """Graphiti stores datetimes as ISO strings on FalkorDB."""
    if value in (None, ""):
        return None
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def next_action(hits: int, created_at: datetime | None, now: datetime) -> tuple[Action, str]:
    """The next pass's decision for one tentative fact, with the reason."""
    if hits >= 1:
        return "promote", f"{hits} hit(s): becomes active with ratified_at"
    if created_at is not None and now - created_at > SUPERSEDE_AFTER:
        return "supersede", "no hits and older than 30 days"
    if created_at is None:
        return "leave", "no hits; age unknown"
    return "leave", "no hits yet; younger than 30 days"


@dataclass(frozen=True)
class TentativeFact:
    uuid: str
    source: str
    name: str
    target: str
    fact: str
    created_at: str | None
    age_days: float | None
    source_kind: str | None
    hits: int
    action: Action
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def assess(
    rows: Sequence[dict[str, Any]], hits: dict[str, int], *, now: datetime | None = None
) -> list[TentativeFact]:
    now = now or datetime.now(UTC)
    out = []
    for row in rows:
        created = parse_time(row.get("created_at"))
        count = hits.get(row["uuid"], 0)
        action, reason = next_action(count, created, now)
        out.append(
            TentativeFact(
                uuid=row["uuid"],
                source=row.get("source") or "",
                name=row.get("name") or "",
                target=row.get("target") or "",
                fact=row.get("fact") or "",
                created_at=row.get("created_at"),
                age_days=round((now - created).total_seconds() / 86400, 1) if created else None,
                source_kind=row.get("source_kind"),
                hits=count,
                action=action,
                reason=reason,
            )
        )
    return out
