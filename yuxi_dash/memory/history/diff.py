"""What changed in a user's memory between two moments, and who or what changed it.

`memory_diff(access, start, end)` (view `diff`, gated and audited) compares the facts held
at `start` and at `end` (held: see `memory.history.timeline`):
- added: held at the end, not at the start; retired: held at the start, not at the end;
  came and went: written and retired in between (held at neither moment);
  changed: held at both, with another text, name, validity or status (our corrections
  change a fact in place; so does the platform's ratification, tentative -> active).
- who: a correction of ours in between (its audit row, actor, action, reason); else for
  a fact added, the episode that wrote it (the fact's first episode); for a fact
  graphiti-core retired, the latest episode of the 15 minutes up to the expiry (`inferred`;
  `memory.views.retiring_episode`'s window read, without its facts); for a ratification,
  the platform (`by` kind `ratification`).
Facts our corrections touched after `start` are decided from the correction rows, the others
in one label-free, read-only pass. Lists are cut at `limit` each; the counts are whole.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from yuxi_dash.errors import InvalidInput
from yuxi_dash.memory.graph.client import GraphClient, Row
from yuxi_dash.memory.history import queries as hq
from yuxi_dash.memory.history.as_of import MAX_PAGE, check_moment, corrected_now
from yuxi_dash.memory.history.timeline import (
    FactState,
    Timeline,
    fact_state,
    iso,
    load_timeline,
    moment_text,
    when,
)
from yuxi_dash.memory.views.gate import MemoryAccess, graph_for, view_refusals
from yuxi_dash.memory.views.retiring_episode import Retired, retiring_episodes

DIFF_VIEW = "diff"
CHANGES = ("added", "retired", "changed", "came_and_went")
_COMPARED = ("fact", "name", "valid_at", "invalid_at", "status_then")


def _episode(row: Row | None, *, inferred: bool) -> dict[str, Any] | None:
    if row is None:
        return None
    return {
        "kind": "episode",
        "uuid": row.get("uuid"),
        "name": row.get("name"),
        "created_at": iso(row.get("created_at")),
        "inferred": inferred,
    }


def episodes_named(client: GraphClient, group_id: str, uuids: list[str]) -> dict[str, Row]:
    if not uuids:
        return {}
    rows = client.ro_rows(group_id, hq.EPISODES_BY_UUID, {"uuids": sorted(set(uuids))})
    return {row["uuid"]: row for row in rows}


def who(by: dict[str, Any] | None) -> str:
    """Who or what made a change, in a few words (CLI and pages)."""
    if not by:
        return "not recorded"
    if "added_by" in by:
        return f"added by {who(by['added_by'])}; retired by {who(by['retired_by'])}"
    if by.get("kind") == "correction":
        return f"our {by['action']} by {by['actor']} (audit row {by['audit_id']})"
    if by.get("kind") == "ratification":
        return "the platform's ratification (a hit made it active)"
    guess = ", inferred: the episode being ingested then" if by.get("inferred") else ""
    return f"episode: {by.get('name') or by.get('uuid')}{guess}"


def _entry(state: FactState, change: str, by: dict[str, Any] | None) -> dict[str, Any]:
    return {"change": change, **state.shown(), "by": by}


def _changed_fields(a: FactState, b: FactState) -> dict[str, Any]:
    shown_a, shown_b = a.shown(), b.shown()
    return {
        key: {"from": shown_a.get(key), "to": shown_b.get(key)}
        for key in _COMPARED
        if shown_a.get(key) != shown_b.get(key)
    }


def _corrected(
    client: GraphClient,
    group_id: str,
    start: datetime,
    end: datetime,
    timeline: Timeline,
) -> list[tuple[str, FactState, dict[str, Any]]]:
    """The facts our corrections touched after `start`, sorted into the four changes: each
    (change, state shown, entry); an entry's `by` is None when no correction of ours made
    the change in between (the caller names the episode)."""
    at_start = timeline.overrides(start)
    at_end = timeline.overrides(end)
    current = corrected_now(client, group_id, timeline, list(at_start))
    out: list[tuple[str, FactState, dict[str, Any]]] = []
    for uuid in at_start:
        a = fact_state(current.get(uuid), start, at_start, timeline, uuid)
        b = fact_state(current.get(uuid), end, at_end, timeline, uuid)
        did = [c for c in timeline.by_fact.get(uuid, ()) if start < c.at <= end]
        by = did[-1].shown() if did else None
        held_a = a is not None and a.held
        held_b = b is not None and b.held
        if b is not None and held_b and not held_a:
            out.append(("added", b, _entry(b, "added", by)))
        elif a is not None and held_a and not held_b:
            entry = _entry(a, "retired", by)
            ended = b.ended_at if b is not None else None
            if ended is None and did:
                ended = did[-1].at  # deleted by then: the correction's time
            entry["retired_at"] = ended.isoformat() if ended else None
            out.append(("retired", b if b is not None and b.ended_at else a, entry))
        elif a is not None and b is not None and held_a and held_b:
            fields = _changed_fields(a, b)
            if fields:
                out.append(("changed", b, {**_entry(b, "changed", by), "fields": fields}))
        elif b is not None and b.existed and (b.created_at or start) > start:
            out.append(("came_and_went", b, _entry(b, "came_and_went", by)))
    return out


def memory_diff(
    access: MemoryAccess,
    start: Any,
    end: Any,
    *,
    limit: int = 200,
    client: GraphClient | None = None,
) -> dict[str, Any]:
    """Facts added, retired, changed (and come and gone) between two moments, with who."""
    client = graph_for(access, client, pages={"limit": limit})
    a = check_moment(access, start, "--from")
    b = check_moment(access, end, "--to")
    with view_refusals(access):
        if a >= b:
            raise InvalidInput("--from must be before --to")
    timeline = load_timeline(access.settings, access.user_id, since=a)
    found = read_diff(client, access.group_id, a, b, timeline, limit=limit)
    return {"user_id": access.user_id, **found}


def _episodes_by(
    client: GraphClient, group_id: str, items: list[tuple[str, FactState, dict[str, Any]]]
) -> None:
    """Name the episode behind each change no correction of ours made (`by` still None)."""
    todo = [(key, state, entry) for key, state, entry in items if entry["by"] is None]
    first = {id(entry): (state.row.get("episodes") or [None])[0] for _, state, entry in todo}
    named = episodes_named(
        client,
        group_id,
        [
            u
            for (key, _, entry) in todo
            if key in ("added", "came_and_went") and (u := first[id(entry)])
        ],
    )
    retiring = retiring_episodes(
        client,
        group_id,
        [
            Retired(str(state.row["uuid"]), ended, when(state.row.get("invalid_at")))
            for key, state, _ in todo
            if key in ("retired", "came_and_went") and (ended := state.ended_at)
        ],
        with_facts=False,
    )
    for key, state, entry in todo:
        if key == "changed":
            entry["by"] = {"kind": "ratification"} if state.row.get("ratified_at") else None
            continue
        uuid = first[id(entry)]
        added_by = _episode(named.get(uuid) if uuid else None, inferred=False)
        if key == "added":
            entry["by"] = added_by
            continue
        match = retiring.get(str(state.row["uuid"]))
        retired_by = _episode(match.episode if match else None, inferred=True)
        entry["by"] = (
            retired_by if key == "retired" else {"added_by": added_by, "retired_by": retired_by}
        )


def read_diff(
    client: GraphClient,
    group_id: str,
    a: datetime,
    b: datetime,
    timeline: Timeline,
    *,
    limit: int = 200,
) -> dict[str, Any]:
    """The diff between `a` and `b` (a before b) on the user's graph (see the module doc);
    `timeline` holds at least the corrections made after `a`."""
    limit = max(1, min(int(limit), MAX_PAGE))
    corrected = list(timeline.overrides(a))
    params = {"a": moment_text(a), "b": moment_text(b), "corrected": corrected}
    found = client.ro_rows(group_id, hq.DIFF, {**params, "limit": limit})
    by_change = {row["change"]: row for row in found}
    counts = {key: int((by_change.get(key) or {}).get("total") or 0) for key in CHANGES}
    items: list[tuple[str, FactState, dict[str, Any]]] = []
    for key in CHANGES:
        for row in (by_change.get(key) or {}).get("facts") or []:
            moment = a if key == "retired" else b
            if key == "came_and_went":
                moment = when(row["created_at"]) or a
            state = fact_state(row, moment, {}, timeline, row["uuid"])
            assert state is not None
            entry = _entry(state, key, None)
            if key == "retired":
                ended = state.ended_at
                entry["retired_at"] = ended.isoformat() if ended else None
            if key == "changed":
                before = fact_state(row, a, {}, timeline, row["uuid"])
                assert before is not None
                entry["fields"] = _changed_fields(before, state)
            items.append((key, state, entry))
    mine = _corrected(client, group_id, a, b, timeline)
    for key, _, _ in mine:
        counts[key] += 1
    items.extend(mine)
    _episodes_by(client, group_id, items)
    out: dict[str, list[dict[str, Any]]] = {change: [] for change in CHANGES}
    for key, _, entry in items:
        out[key].append(entry)
    out["added"].sort(key=lambda e: (e["created_at"] or "", e["uuid"] or ""))
    out["retired"].sort(key=lambda e: (e["retired_at"] or "", e["uuid"] or ""))
    return {
        "from": a.isoformat(),
        "to": b.isoformat(),
        "counts": counts,
        **{key: entries[:limit] for key, entries in out.items()},
        "corrections_between": [c.shown() for c in timeline.between(a, b)],
        "corrections_complete": timeline.complete,
        "limit": limit,
    }
