"""The one owner of the process's long-lived resources, and the order they are closed in.

A process (the dashboard, a CLI command, a test run) holds things that outlive a call:
engines, our checkpoint stores, graph clients, FalkorDB servers it started, flag evaluators,
the audit log's background writer, the distribution cache and its shared store, the
graph-change watchers. Each is created here lazily on first use,
under a key of the settings that matter for it, and registered with its closing function.

Rules:
- `close_all()` closes newest first (a client before its server; the audit writer drains
  while its engine is open), logs a failing close by type only and goes on; a second call
  does nothing. It runs once at exit (`atexit`); `close_kind` closes one kind (tests).
- Modules keep thin accessors (`store.db.get_engine`, `memory.graph.client.get_client`,
  ...) that delegate here. Importing this module creates nothing.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

log = logging.getLogger("yuxi_dash.resources")

T = TypeVar("T")


@dataclass(frozen=True)
class Kind(Generic[T]):
    """One kind of resource; the type parameter is what `acquire` returns for it."""

    name: str


# The kinds this package owns. Their types are named for the reader only, so this
# module imports none of the libraries behind them.
SQL_ENGINES: Kind[Any] = Kind("sql-engine")  # sqlalchemy.Engine per (url, lock timeout)
CHECKPOINT_STORES: Kind[Any] = Kind("checkpoint-store")  # store.checkpointer.CheckpointStore
FALKORDB_CHILDREN: Kind[Any] = Kind("falkordb-child")  # subprocess.Popen of a server we started
GRAPH_CLIENTS: Kind[Any] = Kind("graph-client")  # memory.graph.client.GraphClient per server
FLAG_EVALUATORS: Kind[Any] = Kind("flag-evaluator")  # flags.FlagEvaluator per flag source
AUDIT_WRITER: Kind[Any] = Kind("audit-writer")  # the background audit writer thread
# memory.cache.distributions.SummaryCache: per-graph distributions keyed by a change
# fingerprint
MEMORY_SUMMARIES: Kind[Any] = Kind("memory-summaries")
# memory.cache.distributions.SharedStore: the same parts in a Redis shared by dashboard
# processes
SHARED_SUMMARIES: Kind[Any] = Kind("memory-summaries-shared")
# memory.cache.graph_changes.GraphChangeWatcher: per-graph change counters from one
# FalkorDB server
GRAPH_CHANGES: Kind[Any] = Kind("graph-changes")


@dataclass
class _Entry:
    kind: Kind[Any]
    key: Hashable
    value: Any
    close: Callable[[Any], None]


class ResourceManager:
    """Creates each resource once per key, on first use, and closes them newest first.

    Thread-safe: the registry has one lock, held only for bookkeeping; creating a
    resource holds a lock of its own key, so a slow creation (migrations, a flag
    source's first fetch) never blocks another kind, and two threads asking for
    the same key get the one resource. Closing happens outside every lock, so a
    closing resource may still use another (the audit writer its engine).
    """

    def __init__(self, *, register_at_exit: bool = True) -> None:
        self._entries: OrderedDict[tuple[str, Hashable], _Entry] = OrderedDict()
        self._creating: dict[tuple[str, Hashable], threading.Lock] = {}
        self._lock = threading.RLock()
        self._register = register_at_exit
        self._at_exit = False

    def acquire(
        self, kind: Kind[T], key: Hashable, create: Callable[[], T], close: Callable[[T], None]
    ) -> T:
        """The resource of `kind` under `key`, created by `create()` on first use.

        `close(resource)` is what `close_all` / `close_kind` / `release` will call.
        When `create` raises, nothing is registered and the next call tries again.
        """
        slot = (kind.name, key)
        with self._lock:
            entry = self._entries.get(slot)
            if entry is not None:
                return cast(T, entry.value)
            gate = self._creating.setdefault(slot, threading.Lock())
        with gate:
            with self._lock:
                entry = self._entries.get(slot)
                if entry is not None:
                    return cast(T, entry.value)
            try:
                value = create()
                with self._lock:
                    self._entries[slot] = _Entry(kind, key, value, cast(Any, close))
                    self._register_at_exit()
            finally:
                with self._lock:
                    if self._creating.get(slot) is gate:
                        del self._creating[slot]
        return value

    def peek(self, kind: Kind[T], key: Hashable) -> T | None:
        """The resource under `key` if it exists; never creates one."""
        with self._lock:
            entry = self._entries.get((kind.name, key))
            return None if entry is None else cast(T, entry.value)

    def keys(self, kind: Kind[Any]) -> list[Hashable]:
        """The keys of every live resource of `kind`, oldest first."""
        with self._lock:
            return [entry.key for entry in self._entries.values() if entry.kind.name == kind.name]

    def take(self, kind: Kind[T], key: Hashable) -> T | None:
        """Forget the resource under `key` without closing it (the caller now owns it)."""
        with self._lock:
            entry = self._entries.pop((kind.name, key), None)
        return None if entry is None else cast(T, entry.value)

    def release(self, kind: Kind[Any], key: Hashable) -> bool:
        """Close the resource under `key` now; False when there was none."""
        with self._lock:
            entry = self._entries.pop((kind.name, key), None)
        if entry is None:
            return False
        self._close(entry)
        return True

    def close_kind(self, kind: Kind[Any]) -> int:
        """Close every resource of `kind`, newest first; returns how many were closed."""
        return self._close_newest(lambda entry: entry.kind.name == kind.name)

    def close_all(self) -> int:
        """Close every resource, newest first; returns how many (0 the second time)."""
        return self._close_newest(lambda entry: True)

    def _close_newest(self, chosen: Callable[[_Entry], bool]) -> int:
        # One at a time, newest first, the lock released around each close: a resource
        # created while closing (the audit writer's last rows opening an engine) is the
        # newest then, and is closed next.
        closed = 0
        while True:
            with self._lock:
                slot = next((s for s in reversed(self._entries) if chosen(self._entries[s])), None)
                if slot is None:
                    return closed
                entry = self._entries.pop(slot)
            self._close(entry)
            closed += 1

    @staticmethod
    def _close(entry: _Entry) -> None:
        try:
            entry.close(entry.value)
        except Exception as exc:  # noqa: BLE001 - one failing close must not stop the rest
            log.warning("closing a %s failed (%s)", entry.kind.name, type(exc).__name__)

    def _register_at_exit(self) -> None:
        if self._register and not self._at_exit:
            atexit.register(self.close_all)
            self._at_exit = True


_owner = ResourceManager()


def get_resources() -> ResourceManager:
    """The process's resource owner."""
    return _owner


def close_all() -> int:
    """Close every resource this process holds, newest first (also run once at exit)."""
    return _owner.close_all()


def quiet_graphiti() -> None:
    """Turn graphiti-core's usage telemetry off for this process, unless the environment chose.

    graphiti-core reads GRAPHITI_TELEMETRY_ENABLED when a `Graphiti` object is
    built and would otherwise report to a remote service; the dashboard must not
    reach the network. Called where a graph connection is first made, never at import.
    """
    os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")
