"""What a support bundle reads, one source at a time, as iterators that never hold it all.

- `iter_fact_pages`: every fact of the user's graph, a page at a time by keyset on
  the fact uuid (`FACTS_AFTER`: label-free traversal; the uuid is wrapped in
  `coalesce` so FalkorDB does not take the relationship index, which loses
  node 0's facts after a restart), with the hit counters of each page (one MGET),
  read with the cyclic collector paused (`collector_paused`).
- `recent_episodes`: the newest N episodes, content clipped.
- `iter_corrections`: the user's `memory_corrections` rows oldest first, with their
  audit row's action and outcome; embeddings are dropped from the before/after snapshots.
- `iter_threads`: each of the user's threads with its current pressure, its
  last summary (from its checkpointer) and its offloaded tool results with the
  SHA-256 check of each file.

Reads only; the gate and the audit are the caller's (`memory.support.bundle`).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import redis
import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash.compression.thread_state import message_text
from yuxi_dash.errors import YuxiDashError
from yuxi_dash.flags import MemoryGates
from yuxi_dash.memory.graph import queries
from yuxi_dash.memory.graph.client import GraphClient
from yuxi_dash.memory.views.gated_views import parse_envelope
from yuxi_dash.memory.views.ratification import read_hits
from yuxi_dash.settings import Settings
from yuxi_dash.sources import thread_store
from yuxi_dash.store.models import AuditEntry, Conversation, MemoryCorrection
from yuxi_dash.store.queries import get_thread, list_threads
from yuxi_dash.tool_results.index import list_tool_results, verify_tool_results
from yuxi_dash.wording import reason_text

FACT_PAGE = 20_000  # 10 pages for 200,000 facts: each page re-scans the edges to sort its slice
EPISODE_CONTENT_CHARS = 4000
MAX_EPISODES = 100
THREAD_PAGE = 200

FACTS_AFTER = """
MATCH (s)-[e:RELATES_TO]->(t)
WHERE coalesce(e.uuid, '') > $after
WITH s, e, t ORDER BY e.uuid LIMIT $limit
RETURN e.uuid AS uuid, s.name AS source, s.uuid AS source_uuid, e.name AS name,
       t.name AS target, t.uuid AS target_uuid, e.fact AS fact, e.status AS status,
       e.source_kind AS source_kind, e.created_at AS created_at, e.valid_at AS valid_at,
       e.invalid_at AS invalid_at, e.expired_at AS expired_at,
       e.forgotten_at AS forgotten_at, e.episodes AS episodes
"""


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _stamp(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def flag_entries(gates: MemoryGates) -> list[dict[str, Any]]:
    """Both flags with LaunchDarkly's reason code and the same reason in words."""
    return [
        {
            "key": flag.key,
            "value": bool(flag.value),
            "reason": flag.reason,
            "reason_text": reason_text(flag.reason),
        }
        for flag in (gates.memory, gates.communities)
    ]


def fact_entry(row: dict[str, Any], hits: int) -> dict[str, Any]:
    status = row.get("status")
    live = (
        row.get("expired_at") is None
        and row.get("forgotten_at") is None
        and (status or "") in queries.LIVE_STATUSES
    )
    episodes = row.get("episodes") or []
    return {
        "uuid": str(row["uuid"]),
        "source": _text(row.get("source")),
        "source_uuid": _text(row.get("source_uuid")),
        "name": _text(row.get("name")),
        "target": _text(row.get("target")),
        "target_uuid": _text(row.get("target_uuid")),
        "fact": _text(row.get("fact")),
        "status": _text(status),
        "source_kind": _text(row.get("source_kind")),
        "created_at": _text(row.get("created_at")),
        "valid_at": _text(row.get("valid_at")),
        "invalid_at": _text(row.get("invalid_at")),
        "expired_at": _text(row.get("expired_at")),
        "live": live,
        "hits": hits,
        "provenance": {"episodes": [str(e) for e in episodes]},
    }


_pause_lock = threading.Lock()
_pauses = 0  # page reads under way with the collector paused
_restore_collector = False  # whether it was on when the first of them began


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for one page read, then restore it.

    A page of 20,000 facts arrives as about 300,000 short-lived lists and dicts with no
    cycles. They set off full collections that walk the whole process heap (35 in a bundle
    of 200,000 facts, 1.75-2.1x its time: bench/memory_bundle.py --no-gc-pause); reference
    counting still frees every one of them.
    The pause is process-wide: pages read at once (two bundles on one server) share it, and
    the collector comes back when the last of them ends, if it was on when the first began.
    """
    global _pauses, _restore_collector
    with _pause_lock:
        if _pauses == 0:
            _restore_collector = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pauses -= 1
            if _pauses == 0 and _restore_collector:
                gc.enable()


def iter_fact_pages(
    client: GraphClient,
    group_id: str,
    *,
    user_id: str,
    hits_conn: redis.Redis | None,
    page_size: int = FACT_PAGE,
) -> Iterator[list[dict[str, Any]]]:
    """Every fact, uuid order, a page of `page_size` at a time; only one page is held at once."""
    after = ""
    while True:
        with collector_paused():
            rows = client.ro_rows(group_id, FACTS_AFTER, {"after": after, "limit": page_size})
            uuids = [str(r["uuid"]) for r in rows]
            hits = read_hits(hits_conn, user_id, uuids) if hits_conn is not None and rows else {}
            page = [
                fact_entry(row, hits.get(uuid, 0)) for row, uuid in zip(rows, uuids, strict=True)
            ]
            del rows
        if page:
            yield page
        if len(page) < page_size:
            return
        after = uuids[-1]


def recent_episodes(client: GraphClient, group_id: str, *, limit: int) -> list[dict[str, Any]]:
    """The newest `limit` episodes (at most MAX_EPISODES), content clipped."""
    out = []
    for row in queries.episode_page(client, group_id, limit=min(limit, MAX_EPISODES)):
        content = str(row.get("content") or "")
        envelope = parse_envelope(content)
        out.append(
            {
                "uuid": str(row["uuid"]),
                "name": _text(row.get("name")),
                "source": _text(row.get("source")),
                "source_description": _text(row.get("source_description")),
                "created_at": _text(row.get("created_at")),
                "valid_at": _text(row.get("valid_at")),
                "memory_kind": _text(envelope.get("memory_kind")) if envelope else None,
                "source_kind": _text(envelope.get("source_kind")) if envelope else None,
                "content_bytes": len(content.encode("utf-8")),
                "content": content[:EPISODE_CONTENT_CHARS],
                "content_truncated": len(content) > EPISODE_CONTENT_CHARS,
            }
        )
    return out


def _without_embeddings(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            str(k): _without_embeddings(v)
            for k, v in value.items()
            if not str(k).endswith("embedding")
        }
    if isinstance(value, list):
        return [_without_embeddings(v) for v in value]
    return value


def iter_corrections(session: Session, user_id: str) -> Iterator[dict[str, Any]]:
    """The user's corrections (and undos), oldest first, with their audit row's action."""
    query = (
        sa.select(MemoryCorrection, AuditEntry.action, AuditEntry.outcome)
        .outerjoin(AuditEntry, AuditEntry.id == MemoryCorrection.audit_id)
        .where(MemoryCorrection.user_id == user_id)
        .order_by(MemoryCorrection.at, MemoryCorrection.id)
        .execution_options(yield_per=200)
    )
    for row, audit_action, audit_outcome in session.execute(query):
        yield {
            "id": row.id,
            "audit_id": int(row.audit_id),
            "at": _stamp(row.at) or "",
            "actor": row.actor,
            "action": row.action,
            "fact_uuid": row.fact_uuid,
            "reason": row.reason or "",
            "ticket": row.ticket,
            "audit_action": audit_action,
            "audit_outcome": audit_outcome,
            "undoes_id": row.undoes_id,
            "undone_at": _stamp(row.undone_at),
            "undone_by_audit_id": row.undone_by_audit_id,
            "before": _without_embeddings(dict(row.before or {})),
            "after": _without_embeddings(dict(row.after or {})),
        }


def _last_summary(
    session: Session, thread_id: str, settings: Settings
) -> tuple[dict[str, Any] | None, str | None]:
    store_for: Callable[[Conversation], Any] = lambda conv: thread_store(conv, settings)  # noqa: E731
    try:
        detail = get_thread(session, thread_id, store_for=store_for)
    except YuxiDashError as exc:
        return None, exc.code
    summary = detail.state.summary
    if summary is None:
        return None, None
    return {
        "cutoff_index": summary.cutoff_index,
        "created_at_index": summary.created_at_index,
        "file_path": summary.file_path,
        "text": message_text(summary.summary_message),
    }, None


def _tool_results(session: Session, thread_id: str, settings: Settings) -> list[dict[str, Any]]:
    checked = {
        r.id: r.status for r in verify_tool_results(session, thread_id=thread_id, settings=settings)
    }
    out: list[dict[str, Any]] = []
    offset = 0
    while True:
        page = list_tool_results(session, thread_id=thread_id, limit=500, offset=offset)
        for info in page:
            out.append(
                {
                    "id": info.id,
                    "tool_name": info.tool_name,
                    "tool_call_id": info.tool_call_id,
                    "path": info.path,
                    "sha256": info.sha256,
                    "chars": info.chars,
                    "created_at": _stamp(info.created_at) or "",
                    "sha256_status": checked.get(info.id, "missing"),
                }
            )
        if len(page) < 500:
            return out
        offset += len(page)


def iter_threads(session: Session, user_id: str, settings: Settings) -> Iterator[dict[str, Any]]:
    """Each of the user's threads (deleted ones too), highest pressure first."""
    offset = 0
    while True:
        page = list_threads(
            session, user_id=user_id, include_deleted=True, limit=THREAD_PAGE, offset=offset
        )
        for thread in page:
            summary, error = _last_summary(session, thread.thread_id, settings)
            yield {
                "thread_id": thread.thread_id,
                "agent_slug": thread.agent_slug,
                "title": thread.title,
                "status": thread.status,
                "attached": bool(thread.attached),
                "summary_pressure_ratio": float(thread.summary_pressure_ratio),
                "context_usage_ratio": float(thread.context_usage_ratio),
                "llm_input_tokens": int(thread.llm_input_tokens),
                "next_llm_input_tokens": int(thread.next_llm_input_tokens),
                "summary_trigger_tokens": int(thread.summary_trigger_tokens),
                "context_window": int(thread.context_window),
                "summary_active": bool(thread.summary_active),
                "last_compression_at": _stamp(thread.last_compression_at),
                "last_activity_at": _stamp(thread.last_activity_at),
                "last_summary": summary,
                "summary_error": error,
                "tool_results": _tool_results(session, thread.thread_id, settings),
            }
        if len(page) < THREAD_PAGE:
            return
        offset += len(page)
