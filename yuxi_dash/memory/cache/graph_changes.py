"""Whether a graph may have changed since a part of it was read: per graph, always.

FalkorDB marks a graph key modified on every write to it (never on a read or another graph's
write); Redis client-side caching turns that into an invalidation naming it (docs/operations.md).
`GraphChangeWatcher` holds two connections: the listener (subscribed to ``__redis__:invalidate``;
a thread counts messages per graph, a flush starts a new epoch) and the tracker (``CLIENT
TRACKING ON REDIRECT <listener> BCAST PREFIX user_``). `version(graph)` is (epoch, count), or
None when it cannot vouch: it checks the tracker's CLIENT ID, then a PING barrier on the
listener, so every earlier write is counted. A failure voids the epoch; a refused handshake
leaves it idle. `fingerprint` is server-wide (INFO's run and save counters, O(1) counts).
`change_marks` gives the version while the watcher vouches, else the graph's own `GraphMark`:
its run and counts, our writes to it (`memory_corrections`: count, newest; remembered
OURS_MEMO_SECONDS while the fingerprint holds) and its FALLBACK_MAX_AGE_SECONDS period (a
phase per graph): another graph's write leaves it, an in-place write is seen within that
period; the fingerprint when the database cannot tell (then skipped DATABASE_PAUSE_SECONDS).
"""

from __future__ import annotations

import itertools
import logging
import sqlite3
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
import redis
import sqlalchemy as sa
from redis.connection import AbstractConnection

from yuxi_dash.errors import MemoryUnavailable, TrackingRefused, YuxiDashError
from yuxi_dash.memory.graph import queries
from yuxi_dash.memory.graph.client import GraphClient
from yuxi_dash.memory.graph.groups import GROUP_PREFIX, user_id_from_group
from yuxi_dash.resources import GRAPH_CHANGES, get_resources
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import MemoryCorrection

log = logging.getLogger("yuxi_dash.memory.cache.graph_changes")

CHANNEL = "__redis__:invalidate"
CLIENT_NAME = "yuxi-dash-graph-changes"
POLL_SECONDS = 0.25  # the listener thread's longest wait for a message
HEALTH_SECONDS = 5.0  # both connections are pinged this often
BARRIER_SECONDS = 1.0  # a version waits this long for a reply, then is None
RECONNECT_SECONDS = 2.0
# Without the watcher, a graph's parts are kept at most this long: a platform write that
# changes no count (a fact invalidated in place) is seen within it.
FALLBACK_MAX_AGE_SECONDS = 60.0
OURS_MEMO_SECONDS = 1.0  # a graph's corrections read once for a view's several calls
DATABASE_PAUSE_SECONDS = 30.0  # after a database error, the fingerprint is the mark this long
wall_clock: Callable[[], float] = time.time  # the periods' clock (tests move it)
monotonic: Callable[[], float] = time.monotonic  # the memo's and the pause's clock

_epochs = itertools.count(1)  # process-wide: no two epochs of any watcher are equal
Version = tuple[int, int]  # (epoch, the graph's change counter)


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class GraphChangeWatcher:
    """Counts the server's invalidations per graph key; see the module docstring."""

    def __init__(
        self, connect: Callable[[], AbstractConnection], prefix: str = GROUP_PREFIX
    ) -> None:
        self._connect = connect
        self.prefix = prefix
        self._cond = threading.Condition()
        self._send_lock = threading.Lock()  # the listener is written by views and the thread
        self._tracker_lock = threading.Lock()  # the tracker: one request at a time
        self._listener: AbstractConnection | None = None
        self._tracker: AbstractConnection | None = None
        self._tracker_id = 0  # the tracker's CLIENT ID when it turned tracking on
        self._live = False
        self._epoch = next(_epochs)
        self._counters: dict[str, int] = {}
        self._waiting: set[str] = set()
        self._answered: set[str] = set()
        self._tokens = itertools.count(1)
        self._stop = threading.Event()
        self.refused = False
        self._logged: set[str] = set()
        self._thread = threading.Thread(target=self._run, name=CLIENT_NAME, daemon=True)
        self._thread.start()

    # -- what callers use -------------------------------------------------------
    def wait_live(self, timeout: float) -> bool:
        """Whether the watcher is live within ``timeout`` seconds (False when refused)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self._live and not self.refused and not self._stop.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            return self._live

    def version(self, graph: str) -> Version | None:
        """``graph``'s (epoch, counter) with every write finished before this call counted."""
        if not graph.startswith(self.prefix):
            return None  # not tracked
        with self._cond:
            if not self._live or self._listener is None or self._tracker is None:
                return None
            epoch, listener, tracker = self._epoch, self._listener, self._tracker
            tracker_id = self._tracker_id
            token = f"v{next(self._tokens)}"
            self._waiting.add(token)
        try:
            with self._tracker_lock:  # the tracking is on: no write before now went untracked
                _check_tracker(tracker, tracker_id)
            with self._send_lock:
                listener.send_command("PING", token)
        except (redis.RedisError, OSError, ValueError) as exc:
            self._void(epoch, exc)
            return None
        deadline = time.monotonic() + BARRIER_SECONDS
        with self._cond:
            try:
                while token not in self._answered and self._live and self._epoch == epoch:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
                if token in self._answered and self._live and self._epoch == epoch:
                    return epoch, self._counters.get(graph, 0)
                return None
            finally:
                self._waiting.discard(token)
                self._answered.discard(token)

    def close(self) -> None:
        self._stop.set()
        with self._cond:
            self._live = False
            self._cond.notify_all()
        self._close_connections()
        self._thread.join(timeout=POLL_SECONDS * 4 + 1)

    # -- the thread ---------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._open()
                self._listen()
            except TrackingRefused as exc:
                self._note(exc)
                with self._cond:
                    self.refused = True
                    self._cond.notify_all()
                self._close_connections()
                return
            except Exception as exc:  # a lost connection, or a reply of an unexpected shape
                with self._cond:
                    epoch = self._epoch
                self._void(epoch, exc)
            self._stop.wait(RECONNECT_SECONDS)

    def _open(self) -> None:
        listener = self._connect()
        tracker = None
        try:
            try:
                listener.send_command("CLIENT", "SETNAME", f"{CLIENT_NAME}:listener")
                listener.read_response()
                listener.send_command("CLIENT", "ID")
                listener_id = int(listener.read_response())
                listener.send_command("SUBSCRIBE", CHANNEL)
                listener.read_response()
                tracker = self._connect()
                tracker.send_command("CLIENT", "SETNAME", f"{CLIENT_NAME}:tracker")
                tracker.read_response()
                tracker.send_command("CLIENT", "ID")
                tracker_id = int(tracker.read_response())
                tracker.send_command(
                    "CLIENT",
                    "TRACKING",
                    "ON",
                    "REDIRECT",
                    listener_id,
                    "BCAST",
                    "PREFIX",
                    self.prefix,
                )
                tracker.read_response()
            except redis.ResponseError as exc:  # NOPERM, an unknown command: it will not change
                raise TrackingRefused(type(exc).__name__) from exc
        except BaseException:
            listener.disconnect()
            if tracker is not None:
                tracker.disconnect()
            raise
        with self._cond:
            if self._stop.is_set():  # closed while connecting
                listener.disconnect()
                tracker.disconnect()
                return
            self._listener, self._tracker, self._tracker_id = listener, tracker, tracker_id
            self._epoch = next(_epochs)
            self._counters = {}
            self._live = True
            self._cond.notify_all()

    def _listen(self) -> None:
        listener, tracker = self._listener, self._tracker
        if listener is None or tracker is None:
            raise redis.ConnectionError("closed")
        next_health = time.monotonic() + HEALTH_SECONDS
        health_sent: float | None = None
        while not self._stop.is_set():
            if self._listener is not listener:  # voided by a view: redis-py would reconnect
                raise redis.ConnectionError("the watcher's connections were closed")
            if listener.can_read(timeout=POLL_SECONDS):
                if self._handle(listener.read_response()):
                    health_sent = None
            now = time.monotonic()
            if health_sent is not None and now - health_sent > HEALTH_SECONDS:
                raise redis.TimeoutError("the listener did not answer a PING")
            if now >= next_health:
                with self._tracker_lock:
                    _check_tracker(tracker, self._tracker_id)
                if health_sent is None:
                    with self._send_lock:
                        listener.send_command("PING", "health")
                    health_sent = now
                next_health = now + HEALTH_SECONDS

    def _handle(self, reply: Any) -> bool:
        """Count one message from the listener; True when it is the reply to a health PING."""
        kind = _text(reply[0])
        with self._cond:
            if kind == "message" and _text(reply[1]) == CHANNEL:
                keys = reply[2]
                if keys is None:  # a flush: every graph may have changed
                    self._epoch = next(_epochs)
                    self._counters = {}
                else:
                    for key in keys:
                        name = _text(key)
                        self._counters[name] = self._counters.get(name, 0) + 1
            elif kind == "pong":
                token = _text(reply[1])
                if token in self._waiting:
                    self._answered.add(token)
                elif token == "health":
                    return True
            self._cond.notify_all()
        return False

    def _void(self, epoch: int, exc: BaseException) -> None:
        """The watcher can no longer vouch for ``epoch``: stop serving it, connect again.

        A late report about an older epoch changes nothing (its connections are gone)."""
        with self._cond:
            current = self._epoch == epoch
            if current:
                self._live = False
                self._epoch = next(_epochs)
                self._counters = {}
            self._cond.notify_all()
        self._note(exc)
        if current:
            self._close_connections()

    def _close_connections(self) -> None:
        with self._cond:
            listener, tracker = self._listener, self._tracker
            self._listener = self._tracker = None
        for connection in (listener, tracker):
            if connection is not None:
                try:
                    connection.disconnect()
                except (redis.RedisError, OSError):
                    pass

    def _note(self, exc: BaseException) -> None:
        name = type(exc).__name__
        if name not in self._logged and not self._stop.is_set():
            self._logged.add(name)
            log.warning("graph change watcher: %s; memory parts use the server-wide check", name)


def _check_tracker(tracker: AbstractConnection, tracker_id: int) -> None:
    """Raise unless ``tracker`` is still the connection that turned tracking on."""
    tracker.send_command("CLIENT", "ID")
    if int(tracker.read_response()) != tracker_id:
        raise redis.ConnectionError("the tracker reconnected: tracking is off")


def server_key(client: GraphClient) -> tuple[Any, ...]:
    """The FalkorDB server ``client`` talks to: (socket path, host, port)."""
    kwargs = client.db.connection.connection_pool.connection_kwargs
    return (kwargs.get("path"), kwargs.get("host"), kwargs.get("port"))


def get_watcher(client: GraphClient) -> GraphChangeWatcher:
    """The process's watcher of ``client``'s server (started on first use)."""
    pool = client.db.connection.connection_pool
    kwargs = dict(pool.connection_kwargs)
    kwargs["socket_timeout"] = BARRIER_SECONDS  # a view never waits longer on the tracker
    kwargs["protocol"] = 2  # invalidations as pub/sub messages on the listener
    kwargs["health_check_interval"] = 0  # only the watcher's thread reads the listener

    def connect() -> AbstractConnection:
        connection = pool.connection_class(**kwargs)
        connection.connect()
        return connection

    return get_resources().acquire(
        GRAPH_CHANGES,
        server_key(client),
        lambda: GraphChangeWatcher(connect),
        GraphChangeWatcher.close,
    )


def close_watchers() -> None:
    """Close every watcher of this process (the next use starts a new one); `close_clients`
    does it too."""
    get_resources().close_kind(GRAPH_CHANGES)


# -- the change fingerprints -------------------------------------------------------
@dataclass(frozen=True)
class Fingerprint:
    """What changes whenever the graph may have: the server's write counter and O(1) counts."""

    run_id: str
    saves: int
    last_save: int
    changes: int
    nodes: int
    facts: int


@dataclass(frozen=True)
class GraphVersion:
    """What changes whenever this one graph may have: the watcher's (epoch, counter) of it."""

    run_id: str
    epoch: int
    changes: int
    nodes: int
    facts: int


@dataclass(frozen=True)
class GraphMark:
    """What changes when this one graph may have, without the watcher: its O(1) counts, our
    own writes to it, and the period (FALLBACK_MAX_AGE_SECONDS) it was read in. `server`
    (the fingerprint read with it) is not compared: another graph's write moves only that."""

    run_id: str
    nodes: int
    facts: int
    corrections: tuple[int, str]  # memory_corrections rows of the graph: (count, newest at)
    period: int
    server: Fingerprint = field(compare=False)


Kept = Fingerprint | GraphVersion | GraphMark  # what a part in this process's cache is kept under


_refused_logged = False
_logged_db: set[str] = set()
_db_lock = threading.Lock()
# StoreUnavailable (a YuxiDashError) comes from the first use's migrations
_DB_ERRORS = (sa.exc.SQLAlchemyError, OSError, sqlite3.Error, psycopg.Error, YuxiDashError)
_db_paused_until: dict[str, float] = {}  # database URL -> when to read it again
# (database URL, graph) -> (when read, our writes, the fingerprint read right after them)
_ours_memo: dict[tuple[str, str], tuple[float, tuple[int, str], Fingerprint]] = {}


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
        run_id, saves = str(info["run_id"]), int(info.get("rdb_saves", 0))
        last_save, changes = (
            int(info["rdb_last_save_time"]),
            int(info["rdb_changes_since_last_save"]),
        )
    except (KeyError, TypeError, ValueError):
        return None
    nodes = queries.counts_one(client, group_id, queries.COUNT_NODES)
    facts = queries.counts_one(client, group_id, queries.COUNT_RELATES_TO)
    return Fingerprint(run_id, saves, last_save, changes, nodes, facts)


def our_writes(client: GraphClient, group_id: str) -> tuple[int, str] | None:
    """(how many `memory_corrections` rows the graph has, the newest one's time): every
    correction, undo and bulk retract commits its row after its graph write. None when the
    database cannot tell (logged once by type; then not asked for DATABASE_PAUSE_SECONDS)."""
    user_id = user_id_from_group(group_id)
    if user_id is None:
        return None
    url = client.settings.database_url
    with _db_lock:
        if monotonic() < _db_paused_until.get(url, 0.0):
            return None
    statement = sa.select(sa.func.count(), sa.func.max(MemoryCorrection.at)).where(
        MemoryCorrection.user_id == user_id, MemoryCorrection.group_id == group_id
    )
    try:
        with session_scope(client.settings) as session:
            count, newest = session.execute(statement).one()
    except _DB_ERRORS as exc:  # the caller uses the server-wide mark
        with _db_lock:
            _db_paused_until[url] = monotonic() + DATABASE_PAUSE_SECONDS
        name = type(exc).__name__
        if name not in _logged_db:
            _logged_db.add(name)
            log.warning("corrections unreadable (%s); memory parts use the server-wide check", name)
        return None
    return int(count or 0), newest.isoformat() if newest is not None else ""


def period(group_id: str) -> int:
    """The graph's FALLBACK_MAX_AGE_SECONDS period now: each graph has its own phase, so the
    graphs' kept parts do not all turn stale at the same instant."""
    phase = zlib.crc32(group_id.encode("utf-8")) % FALLBACK_MAX_AGE_SECONDS
    return int((wall_clock() + phase) // FALLBACK_MAX_AGE_SECONDS)


def change_marks(client: GraphClient, group_id: str) -> tuple[Fingerprint | None, Kept | None]:
    """(the server-wide fingerprint, what this process keeps the graph's parts under).

    The second is the graph's own `GraphVersion` while the watcher vouches for it, else its
    `GraphMark` (a write to another graph leaves both); (None, None) when the server will
    not tell (no caching). The version and our writes are read *before* the fingerprint:
    rows that match the fingerprint (the shared store's) were read after it, so no write
    before the mark is missing from them. Our writes remembered from the last second are
    used only while the fingerprint read after them holds (no write anywhere since).
    """
    version = get_watcher(client).version(group_id)
    key = (client.settings.database_url, group_id)
    with _db_lock:
        memo = _ours_memo.get(key) if version is None else None
        if memo is not None and monotonic() - memo[0] >= OURS_MEMO_SECONDS:
            memo = None
    ours = None
    if version is None:
        ours = memo[1] if memo is not None else our_writes(client, group_id)
    current = fingerprint(client, group_id)
    if memo is not None and current != memo[2]:  # a write since: read them again
        memo, ours = None, our_writes(client, group_id)
        current = fingerprint(client, group_id)
    if current is None:
        return None, None
    if version is not None:
        return current, GraphVersion(current.run_id, *version, current.nodes, current.facts)
    if ours is None:
        return current, current
    if memo is None:
        with _db_lock:  # the expired go (few: each lives a second)
            now = monotonic()
            for gone in [k for k, v in _ours_memo.items() if now - v[0] >= OURS_MEMO_SECONDS]:
                del _ours_memo[gone]
            _ours_memo[key] = (now, ours, current)
    mark = GraphMark(current.run_id, current.nodes, current.facts, ours, period(group_id), current)
    return current, mark
