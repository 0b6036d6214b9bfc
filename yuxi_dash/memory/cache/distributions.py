"""The memory views' distributions, computed once per graph state and kept process-wide.

Each part (facts by status x source kind x live, per relation name, the same triple, the
same fact text, mirrored pairs, the newest facts) reads every fact label-free in one
read-only statement of `memory.graph.queries`; no index may serve it (docs/operations.md).
A view's missing parts run at once, at most PARALLEL_PARTS statements in the whole process
(one semaphore), so N views never take every server thread. The caching rules:
- Kept: in the process's `SummaryCache` under (server, graph, part, limit) with the mark read
  *before* computing: the graph's version while `memory.cache.graph_changes`' watcher
  vouches, else that graph's own `GraphMark`. Rows are reused only while the mark is unchanged.
- Together: views of one part share one computation (its gate, held before a statement slot).
- Shared: with `YUXI_DASH_REDIS_URL`, also in `SharedStore` (SHARED_TTL_SECONDS), under the
  fingerprint only, never on the FalkorDB server itself; `memory.support.forget` deletes them.
- A server that refuses INFO gets no caching: every view computes.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import astuple
from typing import Any

import redis

from yuxi_dash.memory.cache.graph_changes import (
    Fingerprint,
    GraphMark,
    Kept,
    change_marks,
    server_key,
)
from yuxi_dash.memory.graph import queries
from yuxi_dash.memory.graph.client import GraphClient, Row, glob_escape
from yuxi_dash.resources import MEMORY_SUMMARIES, SHARED_SUMMARIES, get_resources

log = logging.getLogger("yuxi_dash.memory.cache.distributions")

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
# parts' statements running at once in this process, every view together (1: one at a time)
PARALLEL_PARTS = 2
MAX_ENTRIES = 512  # parts kept per process (a part is at most MAX_PAGE small rows)
SHARED_PREFIX = "yuxi-dash:memory-parts:v1"
SHARED_TTL_SECONDS = 15 * 60  # bounds how long a copy outlives a forgotten graph
SHARED_TIMEOUT_SECONDS = 0.5  # a slow shared store must not hold a view
SHARED_PAUSE_SECONDS = 30.0  # after a shared-store error, compute without it for this long
# SET the part (KEYS[2]) unless its graph was forgotten meanwhile (KEYS[1], the tombstone)
_PUT_UNLESS_FORGOTTEN = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[2])
end
return false
"""


_slots_lock = threading.Lock()
_slots: tuple[int, threading.BoundedSemaphore] | None = None


def statement_slots() -> threading.BoundedSemaphore:
    """The process-wide semaphore of PARALLEL_PARTS slots held around each part's statement
    (made again when PARALLEL_PARTS changes: a holder releases the one it took)."""
    global _slots
    with _slots_lock:
        if _slots is None or _slots[0] != PARALLEL_PARTS:
            _slots = (PARALLEL_PARTS, threading.BoundedSemaphore(max(1, PARALLEL_PARTS)))
        return _slots[1]


class _Gate:
    """One part's computation in this process (held while its statement runs)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()


class SummaryCache:
    """Parts by key, each with the fingerprint it was computed under; least recently used out.

    `gate(key)` is the lock views hold while computing that part, so views arriving together
    after a write share one scan instead of each running it (a gate lives while it is used).
    """

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._entries: OrderedDict[Hashable, tuple[Kept, list[Row]]] = OrderedDict()
        self._lock = threading.Lock()
        self._gates: weakref.WeakValueDictionary[Hashable, _Gate] = weakref.WeakValueDictionary()
        self._max = max_entries
        self.hits = 0
        self.misses = 0

    def get(
        self, key: Hashable, fingerprint: Kept, *, count: bool = True, or_under: Kept | None = None
    ) -> list[Row] | None:
        """A copy of the rows kept under `key`, only when kept under this same fingerprint, or
        under `or_under` or a `GraphMark` read with it (then kept under `fingerprint` from now
        on: no write anywhere on the server since they were computed)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or (
                entry[0] != fingerprint and (or_under is None or not _under(entry[0], or_under))
            ):
                self.misses += count
                return None
            if entry[0] != fingerprint:
                self._entries[key] = (fingerprint, entry[1])
            self._entries.move_to_end(key)
            self.hits += count
            return [dict(row) for row in entry[1]]

    def gate(self, key: Hashable) -> _Gate:
        with self._lock:
            gate = self._gates.get(key)
            if gate is None:
                gate = self._gates[key] = _Gate()
            return gate

    def put(self, key: Hashable, fingerprint: Kept, rows: list[Row]) -> None:
        with self._lock:
            self._entries[key] = (fingerprint, [dict(row) for row in rows])
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def forget(self, group_id: str) -> int:
        """Drop every part kept for `group_id` (keys are (server, group, part, limit))."""
        with self._lock:
            gone = [
                key for key in self._entries if isinstance(key, tuple) and key[1:2] == (group_id,)
            ]
            for key in gone:
                del self._entries[key]
            return len(gone)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


def _under(kept: Kept, mark: Kept) -> bool:
    """Whether rows kept under `kept` were computed under `mark` (a `GraphMark`: with the
    server at the fingerprint `mark`)."""
    return kept == mark or (isinstance(kept, GraphMark) and kept.server == mark)


class SharedStore:
    """Parts in a Redis shared by every dashboard process, each beside the fingerprint it was
    computed under, so a new replica or a restarted dashboard is served without a scan while
    the graph server has not changed.

    One key per (graph, server run, part, limit) under `prefix`, expiring after `ttl`
    seconds; a value is served only when its fingerprint equals the caller's current one
    (a value under another fingerprint is left to be overwritten by the next computation
    or to expire). Every Redis error is a miss (logged once per error type); after one, the
    store is skipped for SHARED_PAUSE_SECONDS so a dead Redis cannot slow every view.
    """

    def __init__(
        self,
        conn: redis.Redis,
        *,
        prefix: str = SHARED_PREFIX,
        ttl: int = SHARED_TTL_SECONDS,
    ) -> None:
        self.conn = conn
        self.prefix = prefix
        self.ttl = ttl
        self._paused_until = 0.0
        self._server_run_id: str | None = None
        self._checked_for: str | None = None  # the graph server run the check above was for
        self._put = conn.register_script(_PUT_UNLESS_FORGOTTEN)
        self._logged: set[str] = set()

    @property
    def paused(self) -> bool:
        """True for SHARED_PAUSE_SECONDS after an error: views compute without the store."""
        return time.monotonic() < self._paused_until

    def key(self, group_id: str, run_id: str, part: str, limit: int | None) -> str:
        return f"{self.prefix}:{group_id}:{run_id}:{part}:{'-' if limit is None else limit}"

    def usable_for(self, fingerprint: Fingerprint) -> bool:
        """False while paused, and when the store *is* the graph server (a write there would
        move the very fingerprint it is kept under)."""
        if self.paused:
            return False
        if self._checked_for != fingerprint.run_id:  # asked again after the graph server restarts
            try:
                info = self.conn.info("server")
            except (redis.RedisError, OSError) as exc:
                self._failed(exc)
                return False
            self._server_run_id = str(info.get("run_id", ""))
            self._checked_for = fingerprint.run_id
        return self._server_run_id != fingerprint.run_id

    def get_many(self, keys: list[str], fingerprint: Fingerprint) -> list[list[Row] | None]:
        """The rows kept under each key, or None where there are none under `fingerprint`."""
        if not keys:
            return []
        try:
            values = self.conn.mget(keys)
        except (redis.RedisError, OSError) as exc:
            self._failed(exc)
            return [None] * len(keys)
        return [self._decode(value, fingerprint) for value in values]

    def put_many(
        self, group_id: str, items: list[tuple[str, list[Row]]], fingerprint: Fingerprint
    ) -> None:
        """Keep each part's rows under `fingerprint` (one round trip); rows that would not come
        back from JSON exactly as they are are not shared."""
        stamp = list(astuple(fingerprint))
        payloads = []
        for key, rows in items:
            payload = json.dumps({"fingerprint": stamp, "rows": rows}, separators=(",", ":"))
            if json.loads(payload)["rows"] == rows:
                payloads.append((key, payload))
        if not payloads:
            return
        try:
            pipe = self.conn.pipeline(transaction=False)
            for key, payload in payloads:
                self._put(
                    keys=[self.tombstone(group_id), key], args=[payload, self.ttl], client=pipe
                )
            pipe.execute()
        except (redis.RedisError, OSError) as exc:
            self._failed(exc)

    def keys(self, group_id: str) -> list[Any]:
        """Every key kept for `group_id` (SCAN on the escaped prefix, never KEYS)."""
        pattern = glob_escape(f"{self.prefix}:{group_id}:") + "*"
        return list(self.conn.scan_iter(match=pattern, count=500))

    def forget(self, group_id: str) -> int:
        """Delete every part kept for `group_id` (`memory.support.forget`); how many keys went.

        A tombstone first, for as long as a part lives: a view that read the graph
        before it was deleted and finishes after cannot keep its copy here (the
        write is conditional on the tombstone's absence, in one script).
        """
        self.conn.set(self.tombstone(group_id), 1, ex=self.ttl)
        keys = self.keys(group_id)
        return int(self.conn.delete(*keys)) if keys else 0

    def tombstone(self, group_id: str) -> str:
        """The key that marks `group_id` forgotten (no part of it is kept while it lives)."""
        return f"{self.prefix}-forgotten:{group_id}"

    @staticmethod
    def _decode(value: Any, fingerprint: Fingerprint) -> list[Row] | None:
        if value is None:
            return None
        try:
            kept = json.loads(value)
            if Fingerprint(*kept["fingerprint"]) != fingerprint:
                return None
            rows = kept["rows"]
        except (ValueError, TypeError, KeyError):
            return None
        return rows if isinstance(rows, list) else None

    def _failed(self, exc: BaseException) -> None:
        self._paused_until = time.monotonic() + SHARED_PAUSE_SECONDS
        name = type(exc).__name__
        if name not in self._logged:
            self._logged.add(name)
            log.warning("the shared memory-parts store failed (%s); computing without it", name)

    def close(self) -> None:
        self.conn.close()


def get_shared_store(redis_url: str | None) -> SharedStore | None:
    """The process's shared store at `redis_url` (YUXI_DASH_REDIS_URL), None when unset."""
    if not redis_url:
        return None

    def connect() -> SharedStore:
        # retry=None: never re-send a command that timed out (docs/operations.md)
        return SharedStore(
            redis.Redis.from_url(
                redis_url,
                socket_timeout=SHARED_TIMEOUT_SECONDS,
                socket_connect_timeout=SHARED_TIMEOUT_SECONDS,
                retry=None,
            )
        )

    return get_resources().acquire(SHARED_SUMMARIES, redis_url, connect, SharedStore.close)


def get_cache() -> SummaryCache:
    """The process's summary cache (created on first use; cleared at exit)."""
    return get_resources().acquire(MEMORY_SUMMARIES, "process", SummaryCache, SummaryCache.clear)


def one_statement_rows(client: GraphClient, group_id: str, part: str, limit: int) -> list[Row]:
    """The part's rows read by its one statement in `PARTS` (never kept)."""
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
    shared: SharedStore | None = None,
    share: bool = True,
) -> dict[str, list[Row]]:
    """The named parts' rows: kept ones when the fingerprint still matches (this process's
    cache first, then the shared store), the rest computed (and kept in both).

    `shared` defaults to the store at the client's `redis_url`; `share=False` uses none."""
    unknown = [name for name in names if name not in PARTS]
    if unknown:
        raise ValueError(f"unknown distribution part(s): {unknown}")
    limit = max(1, min(int(limit), queries.MAX_PAGE))
    cache = cache if cache is not None else get_cache()
    # before computing: a write meanwhile makes them stale (the graph's version first)
    current, local = change_marks(client, group_id)
    server = server_key(client)

    def key(part: str) -> tuple[Any, ...]:
        return (server, group_id, part, None if part in UNLIMITED_PARTS else limit)

    out: dict[str, list[Row]] = {}
    missing: list[str] = []
    for part in dict.fromkeys(names):
        # rows kept before the watcher was live are under the server-wide fingerprint: still
        # true while it is unchanged (no write anywhere on the server since)
        rows = cache.get(key(part), local, or_under=current) if local is not None else None
        if rows is None:
            missing.append(part)
        else:
            out[part] = rows
    store = None
    if share and current is not None and missing:
        store = shared if shared is not None else get_shared_store(client.settings.redis_url)
        if store is not None and not store.usable_for(current):
            store = None
    shared_keys: dict[str, str] = {}
    if store is not None and current is not None:
        shared_keys = {p: store.key(group_id, current.run_id, p, key(p)[-1]) for p in missing}
        kept = store.get_many([shared_keys[p] for p in missing], current)
        for part, rows in zip(list(missing), kept, strict=True):
            if rows is not None and local is not None:
                out[part] = rows
                cache.put(key(part), local, rows)
                missing.remove(part)

    def read(part: str) -> list[Row]:
        with statement_slots():
            return one_statement_rows(client, group_id, part, limit)

    def compute(part: str) -> tuple[list[Row], bool]:
        """(the part's rows, whether this call computed and kept them)."""
        if local is None:
            return read(part), False
        gate = cache.gate(key(part))  # held while used (weak values)
        with gate.lock:
            rows = cache.get(key(part), local, count=False)
            if rows is not None:  # a view ahead of us kept them
                return rows, False
            rows = read(part)
            cache.put(key(part), local, rows)
            return rows, True

    workers = min(len(missing), max(1, PARALLEL_PARTS))
    if workers > 1:
        pool = ThreadPoolExecutor(workers, thread_name_prefix="memory-parts")
        try:
            futures = [pool.submit(compute, part) for part in missing]
            for future in wait(futures, return_when=FIRST_EXCEPTION).done:
                future.result()  # the first error raises (the parts still running keep theirs)
            results = [future.result() for future in futures]
        finally:
            pool.shutdown(wait=False, cancel_futures=True)  # on an error: drop the not started
    else:
        results = [compute(part) for part in missing]
    computed = [part for part, (_, fresh) in zip(missing, results, strict=True) if fresh]
    for part, (rows, _) in zip(missing, results, strict=True):
        out[part] = rows
    if store is not None and current is not None and computed:
        store.put_many(group_id, [(shared_keys[part], out[part]) for part in computed], current)
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
