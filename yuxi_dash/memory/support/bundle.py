"""The support bundle: one download for a ticket about a user's memory, streamed.

`write_bundle` writes the user's flags with their reasons, every fact (status, validity,
episode uuids, hit counter), the newest N episodes, the correction history, and each thread's
pressure, last summary and checked tool results, as JSON (docs/support-bundle.md) or Markdown.

Rules:
- Facts are read a page at a time by keyset (`bundle_sources.iter_fact_pages`) and
  written as they come; `bundle_to_file` renames a complete temporary file. `progress`
  gets a `BundleProgress` per page of facts and per section (a fraction that only grows),
  "done" before the ok audit (a callback raising there fails the bundle: no file, audited).
- Access is `open_view(user, "bundle")` (viewer or higher); a gated-off user gets flags,
  threads and corrections, with the gate's message.
- One audit row per bundle, `memory.bundle`, counts only; bad input is refused, audited,
  writes nothing. `as_of` adds the memory then (`as_of` in `memory`), every fact held then.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import redis

from yuxi_dash import validation
from yuxi_dash.access.audit import audited_refusals, record_audit
from yuxi_dash.access.roles import Actor
from yuxi_dash.errors import InvalidInput, MemoryGatedOff, MemoryUnavailable, YuxiDashError
from yuxi_dash.flags import FlagEvaluator
from yuxi_dash.memory.graph import queries
from yuxi_dash.memory.graph.client import GraphClient, get_client, hits_connection
from yuxi_dash.memory.history import as_of as history
from yuxi_dash.memory.history import queries as history_queries
from yuxi_dash.memory.history.timeline import load_timeline, moment_text, parse_moment
from yuxi_dash.memory.support.bundle_render import BundleSink, JsonSink, MarkdownSink
from yuxi_dash.memory.support.bundle_schema import SCHEMA_ID, SCHEMA_VERSION
from yuxi_dash.memory.support.bundle_sources import (
    FACT_PAGE,
    MAX_EPISODES,
    flag_entries,
    iter_corrections,
    iter_fact_pages,
    iter_threads,
    recent_episodes,
)
from yuxi_dash.memory.views.gate import audit_target, gates_for, group_for, open_view
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import session_scope

BUNDLE_ACTION = "memory.bundle"
FORMATS = ("json", "md")
DEFAULT_EPISODES = 20
NOT_INCLUDED = [
    "chat messages (the chat record; the Memory vs chat page shows them)",
    "the contents of offloaded tool results (only their index rows and SHA-256 checks)",
    "embeddings",
    "message-level provenance per fact (each fact lists the uuids of its episodes; "
    "the Facts page shows one fact's full provenance)",
]


@dataclass(frozen=True)
class BundleResult:
    """What one bundle holds (counts), and its audit row."""

    user_id: str
    format: str
    facts: int
    episodes: int
    corrections: int
    threads: int
    tool_results: int
    gated_off: bool
    graph_exists: bool
    audit_id: int | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class BundleProgress:
    """How far a bundle is: the section being written, facts and episodes done of their totals.

    `facts_total` is the graph's fact count read before the facts (facts and, with `as_of`,
    the facts held then); `fraction` counts each fact as one step and each later section
    (episodes, corrections, threads) as one, so it only grows and is 1.0 at "done".
    """

    section: str  # "facts", "as_of_facts", "episodes", "corrections", "threads" or "done"
    facts: int
    facts_total: int
    episodes: int
    episodes_total: int
    fraction: float


ProgressCallback = Callable[[BundleProgress], None]
_LATER_STEPS = 3  # episodes, corrections, threads


class _Progress:
    """Counts a bundle's steps and reports them to the caller's callback, if any."""

    def __init__(self, callback: ProgressCallback | None, episodes_total: int) -> None:
        self.callback = callback
        self.facts = self.facts_total = self.episodes = self.later = 0
        self.episodes_total = episodes_total

    def report(self, section: str) -> None:
        if self.callback is None:
            return
        total = max(self.facts_total, self.facts) + _LATER_STEPS
        fraction = 1.0 if section == "done" else (self.facts + self.later) / total
        self.callback(
            BundleProgress(
                section=section,
                facts=self.facts,
                facts_total=max(self.facts_total, self.facts),
                episodes=self.episodes,
                episodes_total=self.episodes_total,
                fraction=min(1.0, fraction),
            )
        )


def _sink(fmt: str, out: TextIO) -> BundleSink:
    return JsonSink(out) if fmt == "json" else MarkdownSink(out)


def _check(fmt: str, episodes: int) -> None:
    if fmt not in FORMATS:
        raise InvalidInput(f"the bundle format must be one of {', '.join(FORMATS)}")
    validation.non_negative(episodes, "episodes")
    if episodes > MAX_EPISODES:
        raise InvalidInput(f"at most {MAX_EPISODES} episodes fit in a bundle")


def write_bundle(
    user_id: str,
    out: TextIO,
    *,
    actor: Actor,
    fmt: str = "json",
    episodes: int = DEFAULT_EPISODES,
    settings: Settings | None = None,
    evaluator: FlagEvaluator | None = None,
    client: GraphClient | None = None,
    hits: redis.Redis | None = None,
    fact_page: int = FACT_PAGE,
    now: datetime | None = None,
    as_of: Any = None,
    progress: ProgressCallback | None = None,
) -> BundleResult:
    """Write the user's bundle to `out` as it is read; audited (see the module docstring)."""
    settings = settings or get_settings()
    target = audit_target(user_id)
    with audited_refusals(
        actor=actor.id,
        action=BUNDLE_ACTION,
        target=target,
        detail={"via": actor.via},
        settings=settings,
    ):
        _check(fmt, episodes)
        moment = None if as_of is None else parse_moment(as_of, "--as-of")
    gate_message: str | None = None
    try:
        gates = open_view(
            user_id, "bundle", actor=actor, settings=settings, evaluator=evaluator
        ).gates
    except MemoryGatedOff as exc:  # audited as gated_off by open_view; the bundle goes on
        gate_message = exc.message
        gates = gates_for(user_id, settings=settings, evaluator=evaluator)
    group_id = group_for(user_id)
    not_included = list(NOT_INCLUDED)
    counts = {"facts": 0, "episodes": 0, "corrections": 0, "threads": 0, "tool_results": 0}
    graph_exists = False
    sink = _sink(fmt, out)
    steps = _Progress(progress, episodes)
    conn: redis.Redis | None = None
    try:
        sink.header(
            {
                "schema": SCHEMA_ID,
                "schema_version": SCHEMA_VERSION,
                "generated_at": (now or datetime.now(UTC)).isoformat(),
                "generated_by": actor.id,
                "user_id": user_id,
                "group_id": group_id,
            }
        )
        sink.flags(gates.source, flag_entries(gates))
        memory_counts: dict[str, Any] | None = None
        then_memory: dict[str, Any] | None = None
        past: history.Then | None = None
        if gate_message is None:
            client = client or get_client(settings)
            graph_exists = client.graph_exists(group_id)
            if graph_exists:
                memory_counts = queries.counts(client, group_id).to_dict()
                if moment is not None:
                    past, then_memory = _as_of(
                        client, group_id, user_id, settings, moment, episodes
                    )
                try:
                    conn = hits or hits_connection(settings)
                except MemoryUnavailable:
                    not_included.append("hit counters (unavailable: every fact shows 0 hits)")
        sink.memory(
            {
                "gated_off": gate_message is not None,
                "gate_message": gate_message,
                "graph_exists": graph_exists,
                "counts": memory_counts,
                **({"as_of": then_memory} if then_memory is not None else {}),
            }
        )
        steps.facts_total = int((memory_counts or {}).get("relates_to_edges", 0))
        if then_memory is not None:
            steps.facts_total += int(then_memory["counts"]["held"])
        steps.report("facts")
        if graph_exists and client is not None:
            for page in iter_fact_pages(
                client, group_id, user_id=user_id, hits_conn=conn, page_size=fact_page
            ):
                sink.facts(page)
                counts["facts"] += len(page)
                steps.facts += len(page)
                steps.report("facts")
        sink.facts_done(counts["facts"])
        if past is not None and client is not None:
            held = 0
            sink.as_of_facts_start(past.moment.isoformat())
            steps.report("as_of_facts")
            for then_fact in history.iter_facts_as_of(client, group_id, past, page=fact_page):
                sink.as_of_fact(then_fact)
                held += 1
                steps.facts += 1
                if held % fact_page == 0:
                    steps.report("as_of_facts")
            sink.as_of_facts_done(held)
        steps.report("episodes")
        recent = (
            recent_episodes(client, group_id, limit=episodes) if graph_exists and client else []
        )
        counts["episodes"] = steps.episodes = len(recent)
        sink.episodes(recent, episodes)
        steps.later += 1
        steps.report("corrections")
        with session_scope(settings) as session:
            for correction in iter_corrections(session, user_id):
                sink.correction(correction)
                counts["corrections"] += 1
            sink.corrections_done(counts["corrections"])
            steps.later += 1
            steps.report("threads")
            for thread in iter_threads(session, user_id, settings):
                sink.thread(thread)
                counts["threads"] += 1
                counts["tool_results"] += len(thread["tool_results"])
        sink.threads_done(counts["threads"])
        sink.finish(not_included)
        steps.later += 1
        steps.report("done")  # before the ok audit: a callback that raises here fails the bundle
    except BaseException as exc:  # a page's rerun or stop (via `progress`) is a failed bundle too
        record_audit(
            actor=actor.id,
            action=BUNDLE_ACTION,
            target=target,
            outcome="failed",
            detail={
                "via": actor.via,
                "format": fmt,
                "code": exc.code if isinstance(exc, YuxiDashError) else type(exc).__name__,
            },
            settings=settings,
        )
        raise
    finally:
        if conn is not None and hits is None:
            conn.close()
    audit_id = record_audit(
        actor=actor.id,
        action=BUNDLE_ACTION,
        target=target,
        outcome="ok",
        detail={
            "via": actor.via,
            "format": fmt,
            **counts,
            "gated_off": gate_message is not None,
            "graph_exists": graph_exists,
            **({"as_of": moment.isoformat()} if moment is not None else {}),
        },
        settings=settings,
    )
    return BundleResult(
        user_id=user_id,
        format=fmt,
        gated_off=gate_message is not None,
        graph_exists=graph_exists,
        audit_id=audit_id,
        **counts,
    )


def _as_of(
    client: GraphClient,
    group_id: str,
    user_id: str,
    settings: Settings,
    moment: datetime,
    episodes: int,
) -> tuple[history.Then, dict[str, Any]]:
    """`as_of` in `memory`: the counts then and the episodes written by then (the bundle's own
    look: gated and audited as the `bundle` view); the facts are streamed later."""
    past = history.then(client, group_id, moment, load_timeline(settings, user_id, since=moment))
    counts = history.fact_counts(client, group_id, past)
    written = client.ro_rows(
        group_id,
        history_queries.EPISODES_AS_OF,
        {"at": moment_text(moment), "limit": max(1, episodes), "offset": 0},
    )
    return past, {
        "moment": moment.isoformat(),
        "counts": {
            "held": counts["held"],
            "valid": counts["valid"],
            "retired": counts["retired"],
            "deleted_since": len(past.gone_since()),
        },
        "episodes": [
            {**row, "created_at": str(row["created_at"]) if row["created_at"] else None}
            for row in written[:episodes]
        ],
        "corrections_after": len(past.timeline.after(moment)),
        "corrections_complete": past.timeline.complete,
    }


def bundle_to_file(user_id: str, path: Path, **kwargs: Any) -> BundleResult:
    """`write_bundle` into `path`, via a temporary file beside it renamed when complete."""
    path = Path(path)
    fd, partial = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            result = write_bundle(user_id, out, **kwargs)
        os.replace(partial, path)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
    return result
