"""Which episode's pass retired a fact graphiti-core expired: the one matcher for every view.

graphiti-core records no cause. It ingests a user's episodes one at a time: the episode
node, then its facts (new ones, or old ones it adds the episode to), then the expiries.
For a fact expired at T: of the episodes written in [T - WINDOW, T], the latest with a
fact whose valid_at is the retired fact's invalid_at (the contradiction step's mark),
else the latest. Its facts: every fact listing it in `episodes` (the marked ones when
any). None when no episode was written in the window. The retirements view and the diff
both call `retiring_episodes`, so they name the same episode.
Reads: read-only, parameterized, no group_id filter; times compared through `toString`
(FalkorDB's range index returns wrong rows for `<`/`<=` on string times; the text window
is a second wider, the match compares times in Python); facts read label-free a slice of
source nodes at a time by internal id, never the relationship index (HAZARDS 1 and 8).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from yuxi_dash.memory.graph.client import GraphClient, Row

WINDOW = timedelta(minutes=15)  # an episode's pass: its new facts, then the retirements
SLACK = timedelta(seconds=1)  # the query's text window is this much wider on each side
SLICE = 5000  # source nodes per fact statement (internal ids lo <= id < hi)
EPISODES_PER_QUERY = 5000  # each chunk is one more pass over every fact: keep them few
WINDOWS_PER_QUERY = 200
MAX_EPISODES_LISTED = 20  # a fact's episodes returned (graphiti appends one per mention)
MARK_BASIS = "valid_at equals the retired fact's invalid_at"
LATEST_BASIS = "the episode being ingested when it was retired"

MAX_NODE_ID = "MATCH (n) RETURN max(id(n)) AS c"
_NEVER = datetime.min.replace(tzinfo=UTC)

# The episodes written inside any of the windows ([from, to] ISO text).
EPISODES_IN_WINDOWS = """
MATCH (ep:Episodic)
WHERE any(w IN $windows WHERE toString(ep.created_at) >= w[0]
                          AND toString(ep.created_at) <= w[1])
RETURN ep.uuid AS uuid, ep.name AS name, ep.created_at AS created_at
"""

# The facts leaving one slice of source nodes that list any of the episodes: only what
# the match and the flag read (a page reads the text and names of the rows it shows).
FACTS_OF_EPISODES = """
MATCH (a)-[e:RELATES_TO]->(b)
WHERE id(a) >= $lo AND id(a) < $hi
  AND any(x IN e.episodes WHERE toString(x) IN $wanted)
RETURN e.uuid AS uuid, e.name AS name, a.uuid AS source_uuid, b.uuid AS target_uuid,
       e.created_at AS created_at, e.valid_at AS valid_at,
       [x IN e.episodes WHERE toString(x) IN $wanted | toString(x)] AS listed
"""


def time_of(value: Any) -> datetime | None:
    """A stored time (ISO text or datetime) as an aware UTC datetime; None when unset."""
    if value in (None, ""):
        return None
    if isinstance(value, datetime):
        moment = value
    else:
        try:
            moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


@dataclass(frozen=True)
class Retired:
    """One retired fact to match: its uuid, when it was expired, its invalid_at if any."""

    uuid: str
    expired_at: datetime
    invalid_at: datetime | None = None


@dataclass
class RetiringEpisode:
    """The episode whose pass retired a fact, why it was chosen, and its facts."""

    episode: Row  # uuid, name, created_at
    basis: str
    facts: list[Row] = field(default_factory=list)  # oldest first, never the retired fact
    # each fact: uuid, name, source_uuid, target_uuid, created_at, valid_at

    @property
    def uuid(self) -> str:
        return str(self.episode["uuid"])


def windows(moments: Sequence[datetime]) -> list[list[str]]:
    """[from, to] UTC ISO windows, [T - WINDOW, T] widened by SLACK, overlapping ones merged."""
    merged: list[list[datetime]] = []
    for moment in sorted(m.astimezone(UTC) for m in moments):
        start, end = moment - WINDOW - SLACK, moment + SLACK
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [[a.isoformat(), b.isoformat()] for a, b in merged]


def sliced_rows(
    client: GraphClient,
    group_id: str,
    cypher: str,
    params: dict[str, Any],
    *,
    size: int | None = None,
) -> list[Row]:
    """Every row of a statement over source-node slices (`$lo`, `$hi`, `$episodes`)."""
    size = size or SLICE
    top = client.ro_value(group_id, MAX_NODE_ID)
    if top is None:
        return []
    rows: list[Row] = []
    for lo in range(0, int(top) + 1, size):
        rows.extend(
            client.ro_rows(
                group_id,
                cypher,
                {**params, "lo": lo, "hi": lo + size, "episodes": MAX_EPISODES_LISTED},
            )
        )
    return rows


def _episodes_near(client: GraphClient, group_id: str, moments: list[datetime]) -> list[Row]:
    """The episodes written in any window, oldest first, each with `_at` (its time)."""
    found: dict[str, Row] = {}
    spans = windows(moments)
    for start in range(0, len(spans), WINDOWS_PER_QUERY):
        chunk = spans[start : start + WINDOWS_PER_QUERY]
        for row in client.ro_rows(group_id, EPISODES_IN_WINDOWS, {"windows": chunk}):
            at = time_of(row.get("created_at"))
            if at is not None:
                found.setdefault(str(row["uuid"]), {**row, "_at": at})
    return sorted(found.values(), key=lambda r: (r["_at"], str(r["uuid"])))


def _facts_of(client: GraphClient, group_id: str, episodes: list[str]) -> dict[str, list[Row]]:
    """episode uuid -> the facts listing it, oldest first."""
    by_episode: dict[str, list[Row]] = defaultdict(list)
    for start in range(0, len(episodes), EPISODES_PER_QUERY):
        wanted = episodes[start : start + EPISODES_PER_QUERY]
        for row in sliced_rows(client, group_id, FACTS_OF_EPISODES, {"wanted": wanted}):
            row["_valid_at"] = time_of(row.get("valid_at"))
            row["_created_at"] = time_of(row.get("created_at"))
            for episode in row.pop("listed") or []:
                by_episode[str(episode)].append(row)
    for rows in by_episode.values():
        rows.sort(key=lambda r: (r["_created_at"] or _NEVER, str(r["uuid"])))
    return by_episode


def _pick(
    retired: Retired,
    near: list[Row],
    facts: dict[str, list[Row]],
    stamps: list[datetime] | None = None,
) -> RetiringEpisode | None:
    """The rule of the module doc for one retired fact.

    `near`: episodes oldest first (`stamps`: their times, computed when not given);
    `facts`: each episode's facts, oldest first.
    """
    moment = retired.expired_at.astimezone(UTC)
    stamps = stamps if stamps is not None else [ep["_at"] for ep in near]
    candidates = near[bisect_left(stamps, moment - WINDOW) : bisect_right(stamps, moment)]
    if not candidates:
        return None

    def own(ep: Row) -> list[Row]:
        return [r for r in facts.get(str(ep["uuid"]), []) if str(r["uuid"]) != retired.uuid]

    ended = retired.invalid_at
    if ended is not None:
        for ep in reversed(candidates):
            marked = [r for r in own(ep) if r["_valid_at"] == ended]
            if marked:
                return RetiringEpisode(_shown(ep), MARK_BASIS, marked)
    latest = candidates[-1]
    return RetiringEpisode(_shown(latest), LATEST_BASIS, own(latest))


def _shown(episode: Row) -> Row:
    return {k: episode.get(k) for k in ("uuid", "name", "created_at")}


def retiring_episodes(
    client: GraphClient,
    group_id: str,
    retired: Sequence[Retired],
    *,
    with_facts: bool = True,
) -> dict[str, RetiringEpisode]:
    """fact uuid -> the episode whose pass retired it, for each fact a match was found for.

    One read of the episodes near the expiries, then one sliced read of their facts. Without
    facts (the memory diff: one fast read) the mark is not weighed: the latest episode in the
    window, with no facts.
    """
    if not retired:
        return {}
    near = _episodes_near(client, group_id, [r.expired_at for r in retired])
    if not near:
        return {}
    facts = _facts_of(client, group_id, [str(ep["uuid"]) for ep in near]) if with_facts else {}
    stamps = [ep["_at"] for ep in near]
    found: dict[str, RetiringEpisode] = {}
    for fact in retired:
        match = _pick(fact, near, facts, stamps)
        if match is not None:
            found[fact.uuid] = match
    return found
