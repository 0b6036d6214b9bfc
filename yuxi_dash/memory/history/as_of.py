"""Memory as of a moment: the facts, entities, episodes, counts and warm context held then.

- Each view takes the `MemoryAccess` that only `memory.views.gate.open_view` hands out (view
  `as_of`: gated and audited like every look at a user's memory) and reads through
  `graph_for`; the moment is checked in the view's audited block (`parse_moment`).
- Facts held at the moment (see `memory.history.timeline`), each valid in the world then
  or not; a fact our corrections changed later is shown as it was. "Held then" counts
  every fact held then, those an undo deleted since too (`deleted_since` lists them;
  `listed`: those the graph still has, paged in `facts`).
- Entity names and summaries are not versioned by graphiti-core: they are today's.
- The warm context at a moment: the facts that existed then in BM25 order over today's
  fulltext index, and the last five episodes written by then; the agent's embedder and
  reranker ranking is not replayed (the view says so).
Every statement is read-only, parameterized and timed out (`GraphClient.ro_rows`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from graphiti_core.driver.falkordb.fulltext import build_falkor_fulltext_query

from yuxi_dash.memory.graph.client import GraphClient, Row
from yuxi_dash.memory.history import queries as hq
from yuxi_dash.memory.history.timeline import (
    FactState,
    Timeline,
    fact_state,
    held_uuids,
    load_timeline,
    moment_text,
    parse_moment,
)
from yuxi_dash.memory.views.gate import MemoryAccess, graph_for, view_refusals
from yuxi_dash.memory.views.warm_context import RECENT_EPISODE_COUNT, format_temporal_context

AS_OF_VIEW = "as_of"
MAX_PAGE = 500
RANKING_NOTE = (
    "Ranking: the agent's hybrid search also ranks with the embedder (semantic search) and "
    "the reranker model; that cannot be replayed here. These are the BM25 matches over "
    "today's fulltext index, best first, kept to the facts the memory held by then."
)


def check_moment(access: MemoryAccess, value: Any, name: str = "the as-of moment") -> datetime:
    """The moment, or one audited `invalid_input` refusal under the view."""
    with view_refusals(access):
        return parse_moment(value, name)


def _page(limit: int, offset: int) -> dict[str, int]:
    return {"limit": max(1, min(int(limit), MAX_PAGE)), "offset": max(0, int(offset))}


@dataclass
class Then:
    """What a look at one moment needs: the corrections, and each corrected fact then."""

    moment: datetime
    timeline: Timeline
    overrides: dict[str, dict[str, Any] | None]
    current: dict[str, Row]  # the corrected facts as the graph holds them now
    states: dict[str, FactState | None]

    @property
    def at(self) -> str:
        return moment_text(self.moment)

    def lists(self) -> dict[str, Any]:
        """`$present` / `$absent`: the corrected facts held then, and not held then."""
        present, absent = held_uuids(self.states.items())
        return {"present": present, "absent": absent}

    def state(self, row: Row) -> FactState:
        """A fact row of a history query as it was then."""
        uuid = row["uuid"]
        if uuid in self.overrides:
            found = self.states.get(uuid)
            if found is not None:
                return found
        made = fact_state(row, self.moment, {}, self.timeline, uuid)
        assert made is not None
        return made

    def gone_since(self) -> list[FactState]:
        """Corrected facts held then that the graph no longer has (an undo deleted them)."""
        return [
            s
            for uuid, s in self.states.items()
            if s is not None and s.held and uuid not in self.current
        ]


def corrected_now(
    client: GraphClient, group_id: str, timeline: Timeline, uuids: list[str]
) -> dict[str, Row]:
    """The corrected facts as the graph holds them now (found from their source entity)."""
    sources = timeline.sources()
    pairs = [{"source": sources[u], "uuid": u} for u in uuids if u in sources]
    if not pairs:
        return {}
    rows = client.ro_rows(group_id, hq.FACTS_BY_SOURCE_AND_UUID, {"pairs": pairs})
    return {row["uuid"]: row for row in rows}


def then(client: GraphClient, group_id: str, moment: datetime, timeline: Timeline) -> Then:
    overrides = timeline.overrides(moment)
    current = corrected_now(client, group_id, timeline, list(overrides))
    states = {
        uuid: fact_state(current.get(uuid), moment, overrides, timeline, uuid) for uuid in overrides
    }
    return Then(moment, timeline, overrides, current, states)


def _open(
    access: MemoryAccess, at: Any, client: GraphClient | None, pages: dict[str, int]
) -> tuple[GraphClient, Then]:
    client = graph_for(access, client, pages=pages)
    moment = check_moment(access, at)
    return client, then(
        client,
        access.group_id,
        moment,
        load_timeline(access.settings, access.user_id, since=moment),
    )


def _header(access: MemoryAccess, past: Then) -> dict[str, Any]:
    return {
        "user_id": access.user_id,
        "as_of": past.moment.isoformat(),
        "corrections_after": len(past.timeline.after(past.moment)),  # the first MAX_CORRECTIONS
        "corrections_complete": past.timeline.complete,
    }


def fact_counts(client: GraphClient, group_id: str, past: Then) -> dict[str, int]:
    """Facts held then, held and valid then, retired by then (corrected facts as they were)."""
    rows = client.ro_rows(
        group_id, hq.FACT_COUNTS_AS_OF, {"at": past.at, "corrected": list(past.overrides)}
    )
    row = rows[0] if rows else {}
    return corrected_counts(
        {key: int(row.get(key) or 0) for key in ("held", "valid", "retired")}, past
    )


def corrected_counts(counts: dict[str, int], past: Then) -> dict[str, int]:
    """The graph's counts (corrected facts left out) plus the corrected facts as they were."""
    for state in past.states.values():
        if state is None or not state.existed:
            continue
        if state.held:
            counts["held"] += 1
            counts["valid"] += int(state.valid_then)
        else:
            counts["retired"] += 1
    return counts


def read_facts_as_of(
    client: GraphClient, group_id: str, past: Then, *, limit: int, offset: int
) -> dict[str, Any]:
    """The facts held then (one page), their counts, and those deleted since: one pass."""
    params = {
        "at": past.at,
        "corrected": list(past.overrides),
        "present": past.lists()["present"],
        **_page(limit, offset),
    }
    found = client.ro_rows(group_id, hq.FACTS_AS_OF, params)
    row = found[0] if found else {}
    rows: list[Row] = list(row.get("facts") or [])
    counts = corrected_counts(
        {key: int(row.get(key) or 0) for key in ("held", "valid", "retired")}, past
    )
    gone = past.gone_since()
    return {
        "total": counts["held"],
        "listed": counts["held"] - len(gone),
        "valid_then": counts["valid"],
        "retired_by_then": counts["retired"],
        "facts": [past.state(row).shown() for row in rows],
        "deleted_since": [s.shown() for s in gone],
    }


def iter_facts_as_of(
    client: GraphClient, group_id: str, past: Then, *, page: int = 5000
) -> Iterator[dict[str, Any]]:
    """Every fact held then, shown as on the pages: the graph's in uuid order, a page at a
    time, then those deleted since (the support bundle streams them)."""
    after = ""
    params = {"at": past.at, **past.lists()}
    while True:
        rows = client.ro_rows(
            group_id, hq.FACTS_AS_OF_AFTER, {**params, "after": after, "limit": page}
        )
        for row in rows:
            yield past.state(row).shown()
        if len(rows) < page:
            break
        after = str(rows[-1]["uuid"])
    for state in past.gone_since():
        yield state.shown()


def facts_as_of(
    access: MemoryAccess,
    at: Any,
    *,
    limit: int = 200,
    offset: int = 0,
    client: GraphClient | None = None,
) -> dict[str, Any]:
    """The facts the memory held at the moment, newest first, one page."""
    client, past = _open(access, at, client, {"limit": limit, "offset": offset})
    found = read_facts_as_of(client, access.group_id, past, limit=limit, offset=offset)
    return {**_header(access, past), **found}


def entities_as_of(
    access: MemoryAccess,
    at: Any,
    *,
    search: str = "",
    limit: int = 50,
    offset: int = 0,
    client: GraphClient | None = None,
) -> dict[str, Any]:
    """The entities written by the moment (names and summaries are today's)."""
    client = graph_for(
        access, client, texts={"search": search}, pages={"limit": limit, "offset": offset}
    )
    moment = check_moment(access, at)
    params = {"at": moment_text(moment), "search": search.strip().lower()}
    rows = client.ro_rows(access.group_id, hq.ENTITY_PAGE_AS_OF, {**params, **_page(limit, offset)})
    for row in rows:
        row["labels"] = [label for label in row["labels"] if label != "Entity"]
    total = int(client.ro_value(access.group_id, hq.ENTITY_COUNT_AS_OF, params) or 0)
    return {
        "user_id": access.user_id,
        "as_of": moment.isoformat(),
        "total": total,
        "entities": rows,
    }


def entity_facts_as_of(
    access: MemoryAccess,
    at: Any,
    entity_uuid: str,
    *,
    limit: int = 200,
    offset: int = 0,
    client: GraphClient | None = None,
) -> dict[str, Any]:
    """One entity's facts held at the moment, as source or target, oldest first."""
    client = graph_for(
        access, client, texts={"entity uuid": entity_uuid}, pages={"limit": limit, "offset": offset}
    )
    moment = check_moment(access, at)
    timeline = load_timeline(access.settings, access.user_id, since=moment)
    past = then(client, access.group_id, moment, timeline)
    params = {"at": past.at, "uuid": entity_uuid, **past.lists()}
    rows = client.ro_rows(
        access.group_id, hq.ENTITY_FACTS_AS_OF, {**params, **_page(limit, offset)}
    )
    total = int(client.ro_value(access.group_id, hq.ENTITY_FACT_COUNT_AS_OF, params) or 0)
    return {**_header(access, past), "total": total, "facts": [past.state(r).shown() for r in rows]}


def episodes_as_of(
    access: MemoryAccess,
    at: Any,
    *,
    limit: int = 20,
    offset: int = 0,
    client: GraphClient | None = None,
) -> dict[str, Any]:
    """The episodes written up to the moment, newest first (content cut at 500 characters)."""
    client = graph_for(access, client, pages={"limit": limit, "offset": offset})
    moment = check_moment(access, at)
    params = {"at": moment_text(moment)}
    rows = client.ro_rows(access.group_id, hq.EPISODES_AS_OF, {**params, **_page(limit, offset)})
    total = int(client.ro_value(access.group_id, hq.EPISODE_COUNT_AS_OF, params) or 0)
    return {
        "user_id": access.user_id,
        "as_of": moment.isoformat(),
        "total": total,
        "episodes": rows,
    }


def stats_as_of(
    access: MemoryAccess, at: Any, *, client: GraphClient | None = None
) -> dict[str, Any]:
    """Counts at the moment: entities and episodes written, facts held, valid, retired."""
    client, past = _open(access, at, client, {})
    at_text = {"at": past.at, "search": ""}
    counts = fact_counts(client, access.group_id, past)
    return {
        **_header(access, past),
        "group_id": access.group_id,
        "entities": int(client.ro_value(access.group_id, hq.ENTITY_COUNT_AS_OF, at_text) or 0),
        "episodes": int(
            client.ro_value(access.group_id, hq.EPISODE_COUNT_AS_OF, {"at": past.at}) or 0
        ),
        "held_facts": counts["held"],
        "valid_facts": counts["valid"],
        "retired_facts": counts["retired"],
        "corrections_by_then": past.timeline.made_by(past.moment),
    }


def _warm_fact(state: FactState) -> dict[str, Any]:
    row = state.row
    return {
        "uuid": row.get("uuid"),
        "name": row.get("name"),
        "fact": row.get("fact") or "",
        "valid_at": state.shown()["valid_at"],
        "invalid_at": state.believed_invalid_at,
        "held": state.held,
        "valid_then": state.valid_then,
        "not_live": state.not_live_then,
        "corrected_since": state.corrected_since,
    }


def warm_context_as_of(
    access: MemoryAccess,
    query: str,
    at: Any,
    *,
    client: GraphClient | None = None,
) -> dict[str, Any]:
    """The `<temporal_context>` block the agent would have been handed at a session start at
    the moment (see the module doc for what is and is not replayed)."""
    client = graph_for(access, client, texts={"the warm-context query": query})
    moment = check_moment(access, at)
    timeline = load_timeline(access.settings, access.user_id, since=moment)
    past = then(client, access.group_id, moment, timeline)
    unborn = [u for u, s in past.states.items() if s is None or not s.existed]
    fulltext = build_falkor_fulltext_query(query, [access.group_id])
    rows: list[Row] = []
    if query.strip() and fulltext:
        rows = client.ro_rows(
            access.group_id,
            hq.FACT_FULLTEXT_AS_OF,
            {
                "query": fulltext,
                "group_ids": [access.group_id],
                "at": past.at,
                "unborn": unborn,
                "limit": max(1, int(access.settings.context_max_facts)),
            },
        )
    facts = [_warm_fact(past.state(row)) for row in rows]
    episodes = [
        {"created_at": row["created_at"], "content": row["content"]}
        for row in client.ro_rows(
            access.group_id,
            hq.EPISODES_AS_OF,
            {"at": past.at, "limit": RECENT_EPISODE_COUNT, "offset": 0},
        )
    ]
    return {
        **_header(access, past),
        "query": query,
        "method": "bm25_fulltext",
        "note": RANKING_NOTE,
        "facts": facts,
        "episodes": episodes,
        "block": format_temporal_context(facts, episodes),
    }
