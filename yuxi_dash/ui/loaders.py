"""Cached loaders: everything the Operations pages read, as plain frames and dicts.

Each loader is `st.cache_data` with `settings.cache_ttl_seconds` as TTL (read
when it runs, not at import: `ui.cache`) and the database URL in its key (so
two databases never share a cache entry), and returns picklable data
(DataFrames, dicts), never ORM objects or sessions. `clear_loaders()` drops
them all; pages call it after any write. Reads that
must be fresh (the compression preview the operator confirms) or that are
audited (opening a tool result's content, reading the audit log) are not
cached: pages call the service for those.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from datetime import datetime
from operator import attrgetter
from typing import Any

import pandas as pd

from yuxi_dash.settings import get_settings
from yuxi_dash.store import overview
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.origin import attached_platform, is_attached, origin_label
from yuxi_dash.ui.cache import settings_cached
from yuxi_dash.usage import SUGGESTION_RATIO

THREAD_COLUMNS = [
    "thread_id",
    "user_id",
    "agent_slug",
    "title",
    "status",
    "summary_pressure_ratio",
    "context_usage_ratio",
    "llm_input_tokens",
    "next_llm_input_tokens",
    "summary_trigger_tokens",
    "context_window",
    "summary_active",
    "busy_reason",
    "capable",
    "last_compression_at",
    "last_activity_at",
    "checkpoint_id",
    "attached",
    "platform",  # the attached platform's label (attached threads only)
    "compression",  # ThreadSummary.compression: supported, unsupported or "attached: <platform>"
    "platform_blocker",  # an attached thread: why it cannot be sent to the platform now
    "compress_route",  # where a compress goes: here, platform or none (`store.origin`)
    "turns_to_100",  # model calls until the threshold (`compression.forecast`); None: unknown
    "seconds_to_100",
]


def _url() -> str:
    return get_settings().database_url


def _frame(rows: list[dict[str, Any]], columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=columns) if rows else pd.DataFrame(columns=columns)


# --- overview -----------------------------------------------------------------


@settings_cached
def _filter_choices(database_url: str) -> dict[str, list[str]]:
    with session_scope(get_settings()) as session:
        return overview.filter_choices(session)


def filter_choices() -> dict[str, list[str]]:
    """Agents, users and statuses present, for the filter widgets."""
    return _filter_choices(_url())


POINT_COLUMNS = [
    "thread_id",
    "user_id",
    "agent_slug",
    "context_usage_ratio",
    "summary_pressure_ratio",
    "next_llm_input_tokens",
    "summary_trigger_tokens",
    "llm_input_tokens",
    "context_window",
    "origin",  # "ours" or "attached: <platform>" (the raw origin is replaced by its label)
]


@settings_cached
def _overview(
    database_url: str,
    agent: str | None,
    user_id: str | None,
    status: str | None,
    active_since: datetime | None,
) -> dict[str, Any]:
    where = overview.ThreadFilter(
        agent=agent, user_id=user_id, status=status, active_since=active_since
    )
    with session_scope(get_settings()) as session:
        population = overview.pressure_population(session, where=where)  # one scan
        points = overview.pressure_points(session, where=where)
        platform = (
            attached_platform(session) if any(is_attached(p.origin) for p in points) else None
        )
    point_of = attrgetter(*POINT_COLUMNS)  # up to MAX_POINTS rows: no dataclasses.asdict per row
    frame = (
        pd.DataFrame([point_of(p) for p in points], columns=POINT_COLUMNS)
        if points
        else pd.DataFrame(columns=POINT_COLUMNS)
    )
    frame["origin"] = [origin_label(origin, platform) for origin in frame["origin"]]
    return {
        "kpis": population.kpis.to_dict(),
        "heatmap": _frame(
            [c.to_dict() for c in population.cells], ["x0", "x1", "y0", "y1", "threads"]
        ),
        "points": frame,
        "points_total": population.at_or_above_points_floor,
        "deleted": population.deleted,
    }


def pressure_overview(
    *,
    agent: str | None = None,
    user_id: str | None = None,
    status: str | None = None,
    active_since: datetime | None = None,
) -> dict[str, Any]:
    """KPIs, heatmap cells and the points above the floor for the filtered population.

    Also "points_total" (threads above the floor, drawn or not) and "deleted"
    (deleted threads the other filters match; None when `status` is given).
    """
    return _overview(_url(), agent, user_id, status, active_since)


@settings_cached
def _crossing_soon(
    database_url: str,
    within_seconds: int,
    agent: str | None,
    user_id: str | None,
    status: str | None,
) -> dict[str, Any]:
    from yuxi_dash.store.models import utcnow
    from yuxi_dash.store.thread_list import crossing_within

    with session_scope(get_settings()) as session:
        found = crossing_within(
            session, within_seconds, now=utcnow(), agent=agent, user_id=user_id, status=status
        )
    return {
        "rows": [
            {**asdict(t), "compression": t.compression, **found.forecasts[t.thread_id]}
            for t in found.threads
        ],
        "forecast": found.forecast,
        "left_out": found.left_out,
        "more": found.more,
    }


def crossing_soon(
    within_seconds: int,
    *,
    agent: str | None = None,
    user_id: str | None = None,
    status: str | None = None,
) -> dict[str, Any]:
    """The threads forecast to cross 100% or 85% within ``within_seconds``, soonest first
    (`store.thread_list.crossing_within`): "rows" (thread rows with their forecast, plain
    dicts), "forecast" (threads forecast), "left_out" (per reason), "more" (capped)."""
    return _crossing_soon(_url(), int(within_seconds), agent, user_id, status)


# --- threads --------------------------------------------------------------------


def _platform_blockers(session: Any, rows: list[dict[str, Any]]) -> None:
    """Each row's `compress_route` and, attached, its `platform_blocker` (`store.origin`)."""
    from yuxi_dash.store.origin import capability

    verdict = capability(session, get_settings(), attached=any(r.get("attached") for r in rows))
    for row in rows:
        row["compress_route"] = verdict.route(attached=bool(row.get("attached")))
    for row in rows:
        row["platform_blocker"] = (
            verdict.blocker(
                str(row["thread_id"]),
                row.get("agent_slug"),
                attached=True,
                platform=row.get("platform"),
            )
            if row.get("attached")
            else None
        )


@settings_cached
def _threads(
    database_url: str, min_pressure: float | None, limit: int, platform_url: str | None
) -> dict[str, Any]:
    from yuxi_dash.store.queries import count_threads, list_threads
    from yuxi_dash.store.thread_list import thread_forecasts

    with session_scope(get_settings()) as session:
        rows = list_threads(session, min_pressure=min_pressure, limit=limit)
        total = count_threads(session, min_pressure=min_pressure)
        forecasts = thread_forecasts(session, rows)  # one read for the listed threads
        records = [
            {**asdict(r), "compression": r.compression, **forecasts[r.thread_id]} for r in rows
        ]
        _platform_blockers(session, records)
    return {
        "rows": _frame(records, THREAD_COLUMNS),
        "total": total,
        "unsupported": sum(r.compression == "unsupported" for r in rows),
        "attached": dict(Counter(r.compression for r in rows if r.attached)),
    }


def threads(*, min_pressure: float | None = SUGGESTION_RATIO, limit: int = 500) -> dict[str, Any]:
    """{"rows": DataFrame, "total": count matching, "unsupported": count, "attached": counts}.

    "rows" are highest pressure first, each with its "compression" label
    (`ThreadSummary.compression`: supported, unsupported or "attached: <platform>");
    "unsupported" counts the rows whose agent does not support compression,
    "attached" the attached rows per label (neither can be compressed here).
    """
    return _threads(_url(), min_pressure, limit, get_settings().platform_url)


@settings_cached
def _compress_blockers(
    database_url: str, platform_url: str | None, rows: tuple[tuple[str, str | None, bool], ...]
) -> dict[str, str]:
    from yuxi_dash.store.origin import capability

    settings = get_settings()
    with session_scope(settings) as session:
        verdict = capability(session, settings, attached=any(row[2] for row in rows))
    found = {t: verdict.blocker(t, agent, attached=attached) for t, agent, attached in rows}
    return {t: reason for t, reason in found.items() if reason}


def compress_blockers(rows: list[tuple[str, str | None, bool]]) -> dict[str, str]:
    """Per (thread, agent slug, attached): why nobody can compress it (`store.origin`);
    a thread that can be compressed is left out."""
    key = tuple((str(t), None if a is None else str(a), bool(at)) for t, a, at in rows)
    return _compress_blockers(_url(), get_settings().platform_url, key)


@settings_cached
def _compress_readiness(
    database_url: str, items: tuple[tuple[str, str | None], ...]
) -> dict[str, dict[str, str | None]]:
    from yuxi_dash.service import compress_readiness as readiness

    found = readiness([thread_id for thread_id, _ in items], get_settings())
    return {t: {"reason": r.reason, "note": r.note} for t, r in found.items()}


def compress_readiness(items: list[tuple[str, str | None]]) -> dict[str, dict[str, str | None]]:
    """Per (thread, checkpoint shown): {"reason", "note"}; reason "insufficient_history"
    when a compress would write nothing (None: it would summarize). Keyed by the checkpoints,
    so a thread that moved is read again."""
    return _compress_readiness(_url(), tuple((str(t), c) for t, c in items))


@settings_cached
def _thread_ids(database_url: str, limit: int) -> list[str]:
    from yuxi_dash.store.queries import list_thread_ids

    with session_scope(get_settings()) as session:
        return list_thread_ids(session, limit=limit)


def thread_ids(limit: int = 2000) -> list[str]:
    """Thread ids, highest pressure first (for pickers)."""
    return _thread_ids(_url(), limit)


@settings_cached
def _thread_detail(database_url: str, thread_id: str, platform_url: str | None) -> dict[str, Any]:
    from yuxi_dash.compression import context_view
    from yuxi_dash.compression.thread_state import message_text
    from yuxi_dash.sources import thread_store
    from yuxi_dash.store.queries import chat_record, get_thread, usage_timeline
    from yuxi_dash.store.thread_list import thread_forecasts

    with session_scope(get_settings()) as session:
        detail = get_thread(session, thread_id, store_for=thread_store)  # attached: the platform's
        timeline = usage_timeline(session, thread_id)
        chat = chat_record(session, thread_id)
        summary = {**asdict(detail.summary), "compression": detail.summary.compression}
        summary.update(thread_forecasts(session, [detail.summary])[thread_id])
        _platform_blockers(session, [summary])
    view = context_view(detail.state)  # as the next call gets it
    visible = [
        {
            "type": item.message.type,
            "name": getattr(item.message, "name", None),
            "text": message_text(item.message),
            "blocks": [  # its other content blocks as the model gets them (Claude's reasoning)
                block
                for block in item.message.content
                if isinstance(block, dict) and block.get("type") != "text"
            ]
            if isinstance(item.message.content, list)
            else [],
            "summary": item.summary,
            "tool_calls": [
                {"name": c.get("name"), "args": c.get("args")}
                for c in getattr(item.message, "tool_calls", None) or []
            ],
        }
        for item in view.messages
    ]
    return {
        "summary": summary,
        "checkpoint_id": detail.checkpoint_id,
        "token_usage": detail.token_usage,
        "agent": detail.agent.to_dict() if detail.agent else None,
        "next_input_tokens": view.total_tokens,  # the compress dialog's "before", same count
        "breakdown": view.breakdown,
        "unmeasured": list(view.unmeasured),
        "hidden_messages": view.hidden_messages,
        "visible": visible,
        "summary_file": detail.state.summary.file_path if detail.state.summary else None,
        "timeline": _frame(
            [p.to_dict() for p in timeline],
            [
                "measured_at",
                "llm_input_tokens",
                "next_llm_input_tokens",
                "context_window",
                "context_usage_ratio",
                "summary_trigger_tokens",
                "summary_pressure_ratio",
                "summary_active",
                "source",
            ],
        ),
        "chat": _frame(
            [m.to_dict() for m in chat], ["thread_id", "sequence", "role", "content", "created_at"]
        ),
    }


def thread_detail(thread_id: str) -> dict[str, Any]:
    """One thread: its row, model-visible context, breakdown, timeline and full chat record."""
    return _thread_detail(_url(), thread_id, get_settings().platform_url)


# --- tool results -----------------------------------------------------------------


TOOL_RESULT_COLUMNS = [
    "id",
    "thread_id",
    "user_id",
    "tool_name",
    "tool_call_id",
    "sha256",
    "path",
    "chars",
    "approx_tokens",
    "created_at",
    "origin",  # "ours" or "attached: <platform>"
]


@settings_cached
def _tool_results(
    database_url: str,
    thread_id: str | None,
    user_id: str | None,
    tool_name: str | None,
    min_chars: int | None,
    limit: int,
    offset: int,
) -> pd.DataFrame:
    from yuxi_dash.tool_results.index import list_tool_results

    with session_scope(get_settings()) as session:
        rows = list_tool_results(
            session,
            thread_id=thread_id,
            user_id=user_id,
            tool_name=tool_name,
            min_chars=min_chars,
            limit=limit,
            offset=offset,
        )
    return _frame([{**r.to_dict(), "origin": r.origin} for r in rows], TOOL_RESULT_COLUMNS)


def tool_results(
    *,
    thread_id: str | None = None,
    user_id: str | None = None,
    tool_name: str | None = None,
    min_chars: int | None = None,
    limit: int = 200,
    offset: int = 0,
) -> pd.DataFrame:
    """Offloaded tool results matching the filters (index rows, not file content)."""
    return _tool_results(_url(), thread_id, user_id, tool_name, min_chars, limit, offset)


@settings_cached
def _verify_statuses(database_url: str, result_ids: tuple[int, ...]) -> dict[int, str]:
    from yuxi_dash.tool_results.index import verify_tool_results

    settings = get_settings()
    with session_scope(settings) as session:
        report = verify_tool_results(session, result_ids=list(result_ids), settings=settings)
    return {r.id: r.status for r in report.results}


def verify_statuses(result_ids: list[int]) -> dict[int, str]:
    """SHA-256 status (ok / mismatch / missing) of these tool results, re-hashed from the files."""
    return _verify_statuses(_url(), tuple(sorted(int(i) for i in result_ids)))


_CACHED = (
    _filter_choices,
    _overview,
    _crossing_soon,
    _threads,
    _thread_ids,
    _compress_blockers,
    _compress_readiness,
    _thread_detail,
    _tool_results,
    _verify_statuses,
)


def clear_loaders() -> None:
    """Forget every cached read of this module (call after any write)."""
    for loader in _CACHED:
        loader.clear()
