"""Reads of every fact split into source node-id ranges run at once, merged into one result.

A distribution part (`memory.freshness.distributions`) run as `splits` statements, each
over the facts whose source node id falls in one range (`queries.*_IN_RANGE`),
uses that many of the server's threads. The merged rows are the one statement's
rows when no write lands meanwhile (the caller checks the graph's version).

Merging: ``breakdown`` and ``names`` sum counts per group, then apply the one
statement's ORDER BY and LIMIT; ``same_triple`` merges whole groups (a triple's
copies share their source); ``newest_facts`` merges newest first. Ordering
follows Cypher's (strings by code point, then booleans, numbers, NaN, null).

The ranges cover every id: the first starts at 0, the last has no upper end,
and every range has ``0 <= lo < hi`` (FalkorDB dies on an upper bound <= 0).
Parts not in `SPLIT_PARTS` are never split.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from yuxi_dash.memory.graph import queries
from yuxi_dash.memory.graph.client import GraphClient, Row
from yuxi_dash.resources import SCAN_WORKERS, get_resources

# A smaller graph is read in one statement: its scan is short, a thread hand-off is not free.
SPLIT_MIN_FACTS = 20_000
# Scan threads per process: each view runs its first range itself and hands the rest to a
# free one (never queued behind other views' ranges: with none free, it runs them itself).
MAX_WORKERS = 8
_NO_END = 2**62  # the last range's upper bound: above any node id FalkorDB hands out

Merge = Callable[[list[list[Row]], int], list[Row]]


def cypher_order(value: Any) -> tuple[int, Any]:
    """A sort key ordering values as Cypher's ORDER BY does (ascending); also the grouping
    key where Cypher groups (True and 1 apart, 1 and 1.0 together, every NaN together)."""
    if value is None:
        return (5, 0)
    if isinstance(value, bool):
        return (2, value)
    if isinstance(value, float) and value != value:
        return (4, 0)  # NaN: after every number, before null
    if isinstance(value, int | float):
        return (3, value)
    if isinstance(value, str):
        return (1, value)
    return (0, repr(value))


def node_ranges(nodes: int, splits: int) -> list[tuple[int, int]]:
    """Up to ``splits`` [lo, hi) node-id ranges covering every id: 0 up, the last one open.

    Never an empty range: FalkorDB 4.16 dies (the connection drops, the server process
    exits) on an upper bound of 0 or less (``id(a) >= 0 AND id(a) < 0``, ``>= 1 AND < 0``)
    and reads negative bounds wrongly, so a graph with fewer nodes than ``splits`` gets
    fewer ranges and every range has 0 <= lo < hi.
    """
    splits = max(1, splits)
    bounds = [max(0, nodes) * index // splits for index in range(splits)] + [_NO_END]
    return [(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True) if lo < hi]


_BREAKDOWN_GROUP = ("status", "source_kind", "unexpired")


def _merge_breakdown(ranges: list[list[Row]], _limit: int) -> list[Row]:
    groups: dict[tuple[Any, ...], Row] = {}  # keyed as Cypher groups (True and 1 apart)
    for rows in ranges:
        for row in rows:
            key = tuple(cypher_order(row[column]) for column in _BREAKDOWN_GROUP)
            kept = groups.get(key)
            if kept is None:
                groups[key] = {**{c: row[c] for c in _BREAKDOWN_GROUP}, "facts": row["facts"]}
            else:
                kept["facts"] += row["facts"]
    return list(groups.values())


def _merge_names(ranges: list[list[Row]], limit: int) -> list[Row]:
    facts: dict[tuple[int, Any], tuple[Any, int]] = {}  # keyed as Cypher groups
    for rows in ranges:
        for row in rows:
            key = cypher_order(row["name"])
            facts[key] = (row["name"], facts.get(key, (None, 0))[1] + row["facts"])
    ordered = sorted(facts.items(), key=lambda item: (-item[1][1], item[0]))  # facts DESC, name
    return [{"name": name, "facts": count} for _key, (name, count) in ordered[:limit]]


def _merge_triples(ranges: list[list[Row]], limit: int) -> list[Row]:
    rows = [row for part in ranges for row in part]
    rows.sort(
        key=lambda r: (
            -r["copies"],
            cypher_order(r["source"]),
            cypher_order(r["name"]),
            cypher_order(r["target"]),  # ties: the server's order is not defined; ours is
        )
    )
    return rows[:limit]


def _merge_newest(ranges: list[list[Row]], limit: int) -> list[Row]:
    rows = [row for part in ranges for row in part]
    rows.sort(key=lambda r: cypher_order(r["uuid"]))  # then created_at DESC, stable:
    rows.sort(key=lambda r: cypher_order(r["created_at"]), reverse=True)
    return rows[:limit]


# part -> (the range statement, whether it takes the limit, how the ranges' rows merge)
SPLIT_PARTS: dict[str, tuple[str, bool, Merge]] = {
    "breakdown": (queries.FACT_BREAKDOWN_IN_RANGE, False, _merge_breakdown),
    "names": (queries.FACT_NAMES_IN_RANGE, False, _merge_names),
    "same_triple": (queries.DUPLICATE_TRIPLES_IN_RANGE, True, _merge_triples),
    "newest_facts": (queries.NEWEST_FACTS_IN_RANGE, True, _merge_newest),
}


_T = TypeVar("_T")


class ScanThreads:
    """Threads for range statements, and how many of them are free.

    A range is handed over only to a free thread: with every thread busy (other
    views' ranges) it runs in the caller's thread instead, so a view never waits
    in a queue behind other users' scans, only for its own ranges.
    """

    def __init__(self, workers: int = MAX_WORKERS) -> None:
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="yuxi-dash-scan")
        self._free = threading.Semaphore(workers)

    def try_submit(self, fn: Callable[..., _T], *args: Any) -> Future[_T] | None:
        """``fn(*args)`` on a free thread; None when none is free or the threads are shut
        down (then run it in the caller's thread)."""
        if not self._free.acquire(blocking=False):
            return None

        def run() -> _T:
            try:
                return fn(*args)
            finally:
                self._free.release()  # before the result is seen: the thread is free by then

        try:
            return self.pool.submit(run)
        except RuntimeError:  # shut down (the process is closing)
            self._free.release()
            return None

    def shutdown(self) -> None:
        self.pool.shutdown(wait=True)


def _workers() -> ScanThreads:
    """The process's range-statement threads (created on first use; shut down at exit)."""
    return get_resources().acquire(SCAN_WORKERS, "process", ScanThreads, ScanThreads.shutdown)


def split_rows(
    client: GraphClient, group_id: str, part: str, limit: int, *, nodes: int, splits: int
) -> list[Row]:
    """``part``'s rows read as ``splits`` node-id ranges at once (``nodes``: the graph's node
    count, which only balances the ranges), merged into the single statement's rows.

    The rows are the single statement's when no write lands while the ranges run (each
    range is its own read: a fact moved meanwhile can be seen twice or not at all); the
    caller checks the graph's version around it (`memory.freshness.distributions`). The first range
    runs in this thread, the others on the process's free scan threads (in this thread,
    one after the other, when none is free or they are shut down). Every range finishes
    before this returns; the first error any range raised is raised.
    """
    statement, limited, merge = SPLIT_PARTS[part]
    ranges = node_ranges(nodes, splits)
    extra = {"limit": limit} if limited else {}

    def read(lo: int, hi: int) -> list[Row]:
        if not 0 <= lo < hi:  # FalkorDB 4.16 dies on an upper bound <= 0 (node_ranges)
            raise ValueError(f"not a node-id range: [{lo}, {hi})")
        return client.ro_rows(group_id, statement, {"lo": lo, "hi": hi, **extra})

    pending: list[tuple[tuple[int, int], Future[list[Row]] | None]] = []
    workers = _workers()
    for bounds in ranges[1:]:
        pending.append((bounds, workers.try_submit(read, *bounds)))
    results: list[list[Row]] = []
    error: BaseException | None = None
    try:
        results.append(read(*ranges[0]))
    except BaseException as exc:  # the other ranges still finish before this is raised
        error = exc
    for bounds, future in pending:
        try:
            results.append(read(*bounds) if future is None else future.result())
        except BaseException as exc:
            error = error or exc
    if error is not None:
        raise error
    return merge(results, limit)
