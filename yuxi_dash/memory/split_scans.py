"""Reads of every fact split into source node-id ranges run at once, merged into one result.

A distribution part (`memory.distributions`) reads every fact of the graph: a few
hundred milliseconds on 200,000 facts, spent on one of the server's threads. Run as
`splits` statements, each over the facts whose source node id falls in one range
(`queries.*_IN_RANGE`: FalkorDB seeks the id range and walks only those nodes'
edges), the scan runs on as many of the server's threads at once. On the 200,000-fact
bench graph two ranges took 0.53x-0.57x of one statement's time on an idle 2-core
server (bench/memory.py --alternatives); on a server whose cores are all busy they
cost about the same as one statement (0.95x-1.11x measured), never much more.

The merged rows are the single statement's rows:

- ``breakdown`` and ``names``: counts summed per group (a group's facts may start in
  several ranges), then the single statement's ORDER BY and LIMIT;
- ``same_triple``: a triple's copies all share their source node, so each range
  returns whole groups; the ranges' top rows are merged under the same ORDER BY;
- ``newest_facts``: each range's newest, merged newest first.

Ordering follows Cypher's: strings by code point (as FalkorDB compares UTF-8),
then booleans, then numbers, then null (last ascending, first descending); lists and
maps, which these statements never sort on, come first, ordered by their text. Rows
tied on every ORDER BY key may come in another order than the server's (the server's
own order among them is not defined either).

The ranges cover every id: the first starts at 0 and the last has no upper end, so a
node id beyond the node count (ids are reused after deletes, not compacted) is still
read. Parts not listed in `SPLIT_PARTS` (the same fact text, whose copies do not share
a source; mirrored pairs, grouped by name across nodes) are never split.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from yuxi_dash.memory import queries
from yuxi_dash.memory.client import GraphClient, Row
from yuxi_dash.resources import SCAN_WORKERS, get_resources

# A smaller graph is read in one statement: its scan is short, a thread hand-off is not free.
SPLIT_MIN_FACTS = 20_000
MAX_WORKERS = 8  # range statements in flight from this process at once (others queue)
_NO_END = 2**62  # the last range's upper bound: above any node id FalkorDB hands out

Merge = Callable[[list[list[Row]], int], list[Row]]


def cypher_order(value: Any) -> tuple[int, Any]:
    """A sort key ordering values as Cypher's ORDER BY does (ascending)."""
    if value is None:
        return (4, 0)
    if isinstance(value, bool):
        return (2, value)
    if isinstance(value, int | float):
        return (3, value)
    if isinstance(value, str):
        return (1, value)
    return (0, repr(value))


def node_ranges(nodes: int, splits: int) -> list[tuple[int, int]]:
    """Up to ``splits`` [lo, hi) node-id ranges covering every id: 0 up, the last one open.

    Never an empty range: FalkorDB 4.16 drops the connection on ``id(a) >= 0 AND
    id(a) < 0`` (the server process dies), so a graph with fewer nodes than ``splits``
    gets fewer ranges.
    """
    splits = max(1, splits)
    bounds = [max(0, nodes) * index // splits for index in range(splits)] + [_NO_END]
    return [(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True) if lo < hi]


def _merge_breakdown(ranges: list[list[Row]], _limit: int) -> list[Row]:
    facts: dict[tuple[Any, ...], int] = {}
    for rows in ranges:
        for row in rows:
            group = (row["status"], row["source_kind"], row["unexpired"])
            facts[group] = facts.get(group, 0) + row["facts"]
    return [
        {"status": status, "source_kind": kind, "unexpired": unexpired, "facts": count}
        for (status, kind, unexpired), count in facts.items()
    ]


def _merge_names(ranges: list[list[Row]], limit: int) -> list[Row]:
    facts: dict[tuple[int, Any], tuple[Any, int]] = {}  # keyed so True and 1 stay apart
    for rows in ranges:
        for row in rows:
            key = cypher_order(row["name"])
            facts[key] = (row["name"], facts.get(key, (None, 0))[1] + row["facts"])
    ordered = sorted(facts.items(), key=lambda item: ((-item[1][1],), item[0]))
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


def _workers() -> ThreadPoolExecutor:
    """The process's range-statement threads (created on first use; shut down at exit)."""
    return get_resources().acquire(
        SCAN_WORKERS,
        "process",
        lambda: ThreadPoolExecutor(MAX_WORKERS, thread_name_prefix="yuxi-dash-scan"),
        lambda pool: pool.shutdown(wait=True, cancel_futures=True),
    )


def split_rows(
    client: GraphClient, group_id: str, part: str, limit: int, *, nodes: int, splits: int
) -> list[Row]:
    """``part``'s rows read as ``splits`` node-id ranges at once (``nodes``: the graph's node
    count, which only balances the ranges), merged into the single statement's rows.

    The first range runs in this thread, the others on the process's scan threads. Every
    range finishes before this returns; the first error any range raised is raised.
    """
    statement, limited, merge = SPLIT_PARTS[part]
    ranges = node_ranges(nodes, splits)
    extra = {"limit": limit} if limited else {}
    pending: list[Future[list[Row]]] = [
        _workers().submit(client.ro_rows, group_id, statement, {"lo": lo, "hi": hi, **extra})
        for lo, hi in ranges[1:]
    ]
    results: list[list[Row]] = []
    error: BaseException | None = None
    try:
        lo, hi = ranges[0]
        results.append(client.ro_rows(group_id, statement, {"lo": lo, "hi": hi, **extra}))
    except BaseException as exc:  # the other ranges still finish before this is raised
        error = exc
    for future in pending:
        try:
            results.append(future.result())
        except BaseException as exc:
            error = error or exc
    if error is not None:
        raise error
    return merge(results, limit)
