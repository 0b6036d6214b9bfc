"""Cached reads of the compression records: one thread's, one by id, and the fleet's figures.

Each is `ui.cache.settings_cached` (the configured TTL, the database URL in its key) and
returns picklable data (dicts, DataFrames), as `ui.loaders` does; `clear()` drops them
(the compress dialog calls it with `ui.loaders.clear_loaders` after a write). The fleet
figures are counted by the database (`store.compression_quality`), never here.
`record_at` is not cached: the compress dialog reads the record it has just written.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pandas as pd

from yuxi_dash.settings import get_settings
from yuxi_dash.store import compression_quality as quality
from yuxi_dash.store.compressions import count_compressions, list_compressions
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.origin import attached_platform, named_attached
from yuxi_dash.ui.cache import settings_cached
from yuxi_dash.wording import attached_label

DAY_COLUMNS = ["day", "trigger", "compressions", "tokens_saved"]
AGENT_COLUMNS = [
    "agent_slug",
    "compressions",
    "tokens_saved",
    "cited_total",
    "cited_visible",
    "cited_lost",
]
WORST_COLUMNS = [
    "id",
    "thread_id",
    "at",
    "agent_slug",
    "trigger",
    "actor",
    "origin",
    "before_tokens",
    "after_tokens",
    "cited_total",
    "cited_visible",
    "cited_lost",
    "cited_hidden",
]


def _url() -> str:
    return get_settings().database_url


def origin_text(name: str, platform: str | None) -> str:
    """A record's origin name as the pages say it: "ours" or "attached: <platform>"."""
    return attached_label(platform) if named_attached(name) else "ours"


def _platform(session: Any, names: list[str]) -> str | None:
    return attached_platform(session) if any(named_attached(n) for n in names) else None


@settings_cached
def _thread_compressions(
    database_url: str, thread_id: str, limit: int, offset: int
) -> dict[str, Any]:
    with session_scope(get_settings()) as session:
        views = list_compressions(session, thread_id, limit=limit, offset=offset)
        total = count_compressions(session, thread_id)
        platform = _platform(session, [v.origin for v in views])
    return {"total": total, "rows": [v.to_dict() for v in views], "platform": platform}


def thread_compressions(thread_id: str, *, limit: int = 10, offset: int = 0) -> dict[str, Any]:
    """{"total", "rows": record dicts newest first, "platform": the attached label or None}."""
    return _thread_compressions(_url(), thread_id, limit, offset)


@settings_cached
def _compression(database_url: str, compression_id: int) -> dict[str, Any] | None:
    with session_scope(get_settings()) as session:
        view = quality.compression_by_id(session, compression_id)
    return None if view is None else view.to_dict()


def compression(compression_id: int) -> dict[str, Any] | None:
    """One record as a dict (a link names it), or None."""
    return _compression(_url(), int(compression_id))


def record_at(thread_id: str, checkpoint_id: str | None) -> dict[str, Any] | None:
    """The record of the compression that wrote ``checkpoint_id`` (fresh, not cached)."""
    if not checkpoint_id:
        return None
    with session_scope(get_settings()) as session:
        views = list_compressions(session, thread_id, limit=5)
    return next((v.to_dict() for v in views if v.checkpoint_id == checkpoint_id), None)


@settings_cached
def _quality(
    database_url: str,
    agent: str | None,
    trigger: str | None,
    origin: str | None,
    since: datetime | None,
) -> dict[str, Any]:
    where = quality.QualityFilter(agent=agent, trigger=trigger, origin=origin, since=since)
    with session_scope(get_settings()) as session:
        totals = quality.totals(session, where)
        days = quality.per_day(session, where) if totals.compressions else []
        agents, agents_total = quality.per_agent(session, where) if totals.compressions else ([], 0)
        worst = quality.worst(session, where) if totals.compressions else []
        platform = _platform(session, [w.origin for w in worst])
    worst_rows = [{**w.to_dict(), "cited_hidden": w.cited_hidden} for w in worst]
    for row in worst_rows:
        row["origin"] = origin_text(row["origin"], platform)
    return {
        "totals": {**totals.to_dict(), "cited_kept_share": totals.cited_kept_share},
        "days": _frame([d.to_dict() for d in days], DAY_COLUMNS),
        "agents": _frame([a.to_dict() for a in agents], AGENT_COLUMNS),
        "agents_total": agents_total,
        "worst": _frame(worst_rows, WORST_COLUMNS),
    }


def _frame(rows: list[dict[str, Any]], columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=columns) if rows else pd.DataFrame(columns=columns)


def compression_quality(
    *,
    agent: str | None = None,
    trigger: str | None = None,
    origin: str | None = None,
    since: datetime | None = None,
) -> dict[str, Any]:
    """The fleet's figures under the filters: "totals", "days", "agents" (the top agents),
    "agents_total", and "worst" (the compressions that lost or hid the most cited items)."""
    return _quality(_url(), agent, trigger, origin, since)


@settings_cached
def _agents(database_url: str) -> list[str]:
    with session_scope(get_settings()) as session:
        return quality.agents(session)


def quality_agents() -> list[str]:
    """Every agent some record names (the Agent filter); empty: no compression recorded."""
    return _agents(_url())


_CACHED = (_thread_compressions, _compression, _quality, _agents)


def clear() -> None:
    """Forget every cached read of this module (call after any write)."""
    for loader in _CACHED:
        loader.clear()
