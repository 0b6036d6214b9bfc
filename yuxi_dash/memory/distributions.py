"""The memory views' distributions, computed once per graph state and kept process-wide.

The distributions (facts by status x source kind x live, facts per relation
name, the same triple, the same fact text, mirrored pairs; and the newest facts
the memory-vs-chat comparison reads, sorted across all facts) each read every fact
label-free: a few hundred milliseconds on 200,000 facts, and no index may help
(the relationship index drifts after a FalkorDB restart, docs/operations.md).
One pass computing all three at once measured no better than the separate
passes (0.8x-1.1x of them on the bench graph, before even reading the
triples' end names), and would make the overview and ratification, which need
only the breakdown, pay for the duplicates too; running the parts
concurrently measured 0.6x-0.8x (slower) on a busy 2-core machine. So:

- Cold: each part the view needs is one read-only statement from
  `memory.queries`, run as before, so the rows are exactly those statements'.
- Warm: each part is kept in the process's `SummaryCache` (owned by
  `yuxi_dash.resources`) under (server, graph, part, limit), with the graph's
  change fingerprint read *before* it was computed. A view reads the current
  fingerprint (one INFO and two O(1) counts, well under a millisecond) and
  uses the kept rows only when it is the same; a write during a computation
  therefore leaves rows under the older fingerprint, which the next view sees
  as stale.

The fingerprint. Nothing O(1) in a graph's content changes when a fact is
updated in place (graphiti-core invalidates a fact by SET on the same edge:
same count, no new created_at), and the newest created_at is itself a full
scan. So the fingerprint is the server's own write counter: `run_id` (new on
every start), `rdb_saves` and `rdb_last_save_time` (new on every save) and
`rdb_changes_since_last_save` (FalkorDB adds one for every GRAPH.QUERY that
changed a graph; reads, ours included, leave it alone), plus the graph's node
and RELATES_TO counts (O(1), label-free). Within one server run the counter
only grows between saves and every save moves `rdb_saves`, so no write leaves
the fingerprint as it was. The price: a write to any graph on the server makes
every graph's parts stale, so on a busy server more views pay the cold plan;
none is ever served stale rows. A server that refuses INFO (an ACL) gets no
caching at all: every view computes (logged once, by error type only).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from yuxi_dash.errors import MemoryUnavailable
from yuxi_dash.memory import queries
from yuxi_dash.memory.client import GraphClient, Row
from yuxi_dash.resources import MEMORY_SUMMARIES, get_resources

log = logging.getLogger("yuxi_dash.memory.distributions")

# Each part and its statement; parts other than the breakdown take a `limit`.
PARTS: dict[str, str] = {
    "breakdown": queries.FACT_BREAKDOWN,
    "names": queries.FACT_NAME_DISTRIBUTION,
    "same_triple": queries.DUPLICATE_TRIPLES,
    "same_fact_text": queries.DUPLICATE_FACT_TEXT,
    "mirrored": queries.MIRRORED_PAIRS,
    # Not a distribution, but the same kind of cost: the newest facts (memory vs chat) sort
    # every fact by created_at.
    "newest_facts": queries.FACTS_PAGE,
}
UNLIMITED_PARTS = frozenset({"breakdown"})
COUNT_NODES = "MATCH (n) RETURN count(n) AS c"
MAX_ENTRIES = 512  # parts kept per process (a part is at most MAX_PAGE small rows)


@dataclass(frozen=True)
class Fingerprint:
    """What changes whenever the graph may have: the server's write counter and O(1) counts."""

    run_id: str
    saves: int
    last_save: int
    changes: int
    nodes: int
    facts: int


class SummaryCache:
    """Parts by key, each with the fingerprint it was computed under; least recently used out."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._entries: OrderedDict[Hashable, tuple[Fingerprint, list[Row]]] = OrderedDict()
        self._lock = threading.Lock()
        self._max = max_entries
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable, fingerprint: Fingerprint) -> list[Row] | None:
        """A copy of the rows kept under `key`, only when kept under this same fingerprint."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] != fingerprint:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return [dict(row) for row in entry[1]]

    def put(self, key: Hashable, fingerprint: Fingerprint, rows: list[Row]) -> None:
        with self._lock:
            self._entries[key] = (fingerprint, [dict(row) for row in rows])
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


def get_cache() -> SummaryCache:
    """The process's summary cache (created on first use; cleared at exit)."""
    return get_resources().acquire(MEMORY_SUMMARIES, "process", SummaryCache, SummaryCache.clear)


_refused_logged = False


def _server_info(client: GraphClient) -> dict[str, Any] | None:
    global _refused_logged
    try:
        info = client.db.connection.execute_command("INFO", "server", "persistence")
    except redis.ResponseError as exc:  # an ACL without INFO: no caching
        if not _refused_logged:
            log.warning(
                "INFO refused (%s); memory distributions are not cached", type(exc).__name__
            )
            _refused_logged = True
        return None
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        raise MemoryUnavailable(f"FalkorDB is unavailable ({type(exc).__name__})") from exc
    return info if isinstance(info, dict) else None


def fingerprint(client: GraphClient, group_id: str) -> Fingerprint | None:
    """The graph's change fingerprint, or None when the server will not tell (no caching)."""
    info = _server_info(client)
    if info is None:
        return None
    try:
        run_id = str(info["run_id"])
        saves = int(info.get("rdb_saves", 0))
        last_save = int(info["rdb_last_save_time"])
        changes = int(info["rdb_changes_since_last_save"])
    except (KeyError, TypeError, ValueError):
        return None
    return Fingerprint(
        run_id=run_id,
        saves=saves,
        last_save=last_save,
        changes=changes,
        nodes=queries.counts_one(client, group_id, COUNT_NODES),
        facts=queries.counts_one(client, group_id, queries.COUNT_RELATES_TO),
    )


def _server_key(client: GraphClient) -> tuple[Any, ...]:
    kwargs = client.db.connection.connection_pool.connection_kwargs
    return (kwargs.get("path"), kwargs.get("host"), kwargs.get("port"))


def _compute(client: GraphClient, group_id: str, part: str, limit: int) -> list[Row]:
    if part in UNLIMITED_PARTS:
        return client.ro_rows(group_id, PARTS[part])
    params: dict[str, Any] = {"limit": limit}
    if part == "newest_facts":
        params["offset"] = 0
    return client.ro_rows(group_id, PARTS[part], params)


def parts(
    client: GraphClient,
    group_id: str,
    names: Sequence[str],
    *,
    limit: int = 50,
    cache: SummaryCache | None = None,
) -> dict[str, list[Row]]:
    """The named parts' rows: kept ones when the fingerprint still matches, the rest computed
    (and kept)."""
    unknown = [name for name in names if name not in PARTS]
    if unknown:
        raise ValueError(f"unknown distribution part(s): {unknown}")
    limit = max(1, min(int(limit), queries.MAX_PAGE))
    cache = cache if cache is not None else get_cache()
    current = fingerprint(client, group_id)  # before computing: a write meanwhile makes it stale
    server = _server_key(client)

    def key(part: str) -> tuple[Any, ...]:
        return (server, group_id, part, None if part in UNLIMITED_PARTS else limit)

    out: dict[str, list[Row]] = {}
    missing: list[str] = []
    for part in dict.fromkeys(names):
        rows = cache.get(key(part), current) if current is not None else None
        if rows is None:
            missing.append(part)
        else:
            out[part] = rows
    for part in missing:
        out[part] = _compute(client, group_id, part, limit)
    if current is not None:
        for part in missing:
            cache.put(key(part), current, out[part])
    return {part: out[part] for part in names}


def counts(
    client: GraphClient, group_id: str, *, cache: SummaryCache | None = None
) -> queries.MemoryCounts:
    """`queries.counts` with the status x source kind x live breakdown from `parts`."""
    breakdown = parts(client, group_id, ["breakdown"], cache=cache)["breakdown"]
    return queries.counts(client, group_id, breakdown=breakdown)


def relations(
    client: GraphClient, group_id: str, *, limit: int = 50, cache: SummaryCache | None = None
) -> dict[str, Any]:
    """The Facts page: facts per relation name and the three kinds of likely duplicate."""
    found = parts(
        client,
        group_id,
        ["names", "same_triple", "same_fact_text", "mirrored"],
        limit=limit,
        cache=cache,
    )
    return {
        "names": found["names"],
        "duplicates": {
            "same_triple": found["same_triple"],
            "same_fact_text": found["same_fact_text"],
            "mirrored": found["mirrored"],
        },
    }
