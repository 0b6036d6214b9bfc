"""Thread state in a LangGraph checkpointer: the savers, the state graph, reads and writes.

A thread's state is the checkpoint a ``create_agent`` agent with our middleware
keeps (``compression.state_format``). SQLite: ``langgraph-checkpoint-sqlite`` in a
separate file beside the database (``<name>.checkpoints.sqlite``, so the row
lock's ``BEGIN IMMEDIATE`` never blocks a checkpoint write). PostgreSQL:
``langgraph-checkpoint-postgres`` in the same database, its tables made by its
own ``setup()`` when we migrate. Every saver, the platform's too, uses
`store.checkpoint_serde.checkpoint_serializer()` (the allow-list).

Nothing here writes a checkpoint table: reads are ``get_state`` /
``get_state_history``, writes ``update_state`` (as the ``model`` node) of a
compiled graph with the agent's channels and reducers, so channels it does not
know (a deep agent's todos or files) are kept.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import sqlalchemy as sa
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row, tuple_row
from psycopg_pool import ConnectionPool

from yuxi_dash.compression.state_format import CompressedContextState, context_state
from yuxi_dash.compression.thread_state import ThreadContextState
from yuxi_dash.errors import StaleState, StoreUnavailable
from yuxi_dash.resources import CHECKPOINT_STORES, get_resources
from yuxi_dash.store.checkpoint_serde import checkpoint_serializer

WRITER_NODE = "model"
# checkpoint metadata that names a thread's user and agent (what an attached dashboard reads)
NAMING_METADATA_KEYS = ("user_id", "assistant_id", "graph_id")
_NEWEST_IDS = (
    "SELECT thread_id, max(checkpoint_id) FROM checkpoints "
    "WHERE checkpoint_ns = '' GROUP BY thread_id"
)
_SETUP_LOCK = 730116  # advisory lock key of the PostgreSQL saver's setup


@dataclass(frozen=True)
class ThreadCheckpoint:
    """One checkpoint of a thread as read through the state graph."""

    thread_id: str
    checkpoint_id: str
    values: Mapping[str, Any]
    created_at: datetime | None
    step: int
    source: str
    parent_checkpoint_id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def context(self) -> ThreadContextState:
        """The engine's view of this checkpoint."""
        return context_state(self.thread_id, self.values)


def _no_op(state: CompressedContextState) -> dict[str, Any]:
    return {}


class _AgentNodesFilter(logging.Filter):
    """Drop langgraph's warning that a checkpoint's pending Send names a node this graph lacks.

    An agent's checkpoint between its model and tool steps holds Sends to its
    ``tools`` node; the state graph reading it has only ``model``, so every read
    of such a checkpoint would log it. Nothing is wrong: reads never run a task.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not (
            message.startswith("Ignoring unknown node name ") and "pending sends" in message
        )


_NODES_FILTER = _AgentNodesFilter()


def _filter_agent_node_warnings() -> None:
    """Install the filter on langgraph's logger (once; on first use, not at import)."""
    logger = logging.getLogger("langgraph")
    if _NODES_FILTER not in logger.filters:
        logger.addFilter(_NODES_FILTER)


def state_graph(saver: BaseCheckpointSaver[Any]) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The graph every read and write of thread state goes through."""
    _filter_agent_node_warnings()
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(CompressedContextState)
    builder.add_node(WRITER_NODE, _no_op)
    builder.add_edge(START, WRITER_NODE)
    builder.add_edge(WRITER_NODE, END)
    return builder.compile(checkpointer=saver)


def _config(thread_id: str, checkpoint_id: str | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def _naming_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The user and agent a checkpoint's metadata names (``NAMING_METADATA_KEYS``)."""
    return {
        key: value
        for key in NAMING_METADATA_KEYS
        if isinstance(value := metadata.get(key), str | int) and not isinstance(value, bool)
    }


def _checkpoint(thread_id: str, snapshot: StateSnapshot) -> ThreadCheckpoint | None:
    configurable = snapshot.config.get("configurable") or {}
    checkpoint_id = configurable.get("checkpoint_id")
    if not checkpoint_id:
        return None
    parent = (snapshot.parent_config or {}).get("configurable") or {}
    metadata: dict[str, Any] = dict(snapshot.metadata or {})
    created = datetime.fromisoformat(snapshot.created_at) if snapshot.created_at else None
    return ThreadCheckpoint(
        thread_id=thread_id,
        checkpoint_id=str(checkpoint_id),
        values=dict(snapshot.values or {}),
        created_at=created.astimezone(UTC) if created else None,
        step=int(metadata.get("step", 0) or 0),
        source=str(metadata.get("source", "")),
        parent_checkpoint_id=parent.get("checkpoint_id"),
        metadata=metadata,
    )


def checkpoint_of(thread_id: str, snapshot: StateSnapshot) -> ThreadCheckpoint | None:
    """The checkpoint a state snapshot of the thread describes (None when it names none)."""
    return _checkpoint(thread_id, snapshot)


class CheckpointStore:
    """Reads and writes thread state through one compiled state graph and its saver."""

    def __init__(
        self,
        saver: BaseCheckpointSaver[Any],
        *,
        close: Any = None,
        graph: CompiledStateGraph[Any, Any, Any, Any] | None = None,
    ) -> None:
        self.saver = saver
        self.graph = (
            graph.copy({"checkpointer": saver}) if graph is not None else state_graph(saver)
        )
        self._close = close

    def bound_to(self, connection: psycopg.Connection[Any]) -> CheckpointStore:
        """This PostgreSQL store reading and writing on ``connection``, in its open transaction.

        The caller's transaction (the one holding a thread's row lock) then holds the
        checkpoint too: it commits with that transaction or not at all, and a
        connection that lost its lock (its backend ended) can write nothing.
        The saver's serializer is this store's own.
        """
        if not isinstance(self.saver, PostgresSaver):
            raise TypeError("only a PostgreSQL checkpoint store can write on a given connection")
        saver = PostgresSaver(connection, serde=self.saver.serde)
        return CheckpointStore(saver, graph=self.graph)

    def close(self) -> None:
        if self._close is not None:
            self._close()
            self._close = None

    def latest(self, thread_id: str) -> ThreadCheckpoint | None:
        """The thread's newest checkpoint, or None when it has none."""
        return _checkpoint(thread_id, self.graph.get_state(_config(thread_id)))

    def newest_ids(self) -> dict[str, str]:
        """Each thread's newest checkpoint id (root namespace), read from the saver's table.

        The saver orders a thread's checkpoints by id (``ORDER BY checkpoint_id DESC``),
        so the greatest id is the one ``latest`` reads. One statement for every thread.
        """
        if isinstance(self.saver, SqliteSaver):
            with self.saver.cursor(transaction=False) as cur:
                rows = cur.execute(_NEWEST_IDS).fetchall()
            return {str(thread_id): str(checkpoint_id) for thread_id, checkpoint_id in rows}
        if not isinstance(self.saver, PostgresSaver):  # pragma: no cover - our two savers
            raise TypeError("no newest ids for this saver")
        conn = self.saver.conn
        if isinstance(conn, ConnectionPool):
            with conn.connection() as pooled, pooled.cursor(row_factory=tuple_row) as cur:
                rows = cur.execute(_NEWEST_IDS).fetchall()
        else:
            with conn.cursor(row_factory=tuple_row) as cur:
                rows = cur.execute(_NEWEST_IDS).fetchall()
        return {str(thread_id): str(checkpoint_id) for thread_id, checkpoint_id in rows}

    def history(
        self, thread_id: str, *, limit: int | None = None, before: str | None = None
    ) -> Iterator[ThreadCheckpoint]:
        """The thread's checkpoints, newest first (only those older than ``before`` if given)."""
        older_than = _config(thread_id, before) if before is not None else None
        snapshots = self.graph.get_state_history(_config(thread_id), limit=limit, before=older_than)
        for snapshot in snapshots:
            checkpoint = _checkpoint(thread_id, snapshot)
            if checkpoint is not None:
                yield checkpoint

    def write(
        self,
        thread_id: str,
        update: Mapping[str, Any],
        *,
        expected_checkpoint_id: str | None,
    ) -> ThreadCheckpoint:
        """Apply ``update`` as a new checkpoint if the newest is still ``expected_checkpoint_id``.

        ``None`` expects a thread with no checkpoint yet. The caller holds the
        thread's row lock, so nothing of ours writes between the check and the write.
        The new checkpoint's metadata keeps the thread's user and agent
        (``NAMING_METADATA_KEYS``) of the one it follows, so an attached
        dashboard that first sees the thread there still knows whose it is.
        """
        current = self.latest(thread_id)
        current_id = current.checkpoint_id if current else None
        if current_id != expected_checkpoint_id:
            raise StaleState(
                f"thread {thread_id} moved to another checkpoint; reload and try again"
            )
        write_config = _config(thread_id)
        names = _naming_metadata(current.metadata if current else {})
        if names:
            write_config["metadata"] = names  # LangGraph copies it into the checkpoint's metadata
        config = self.graph.update_state(write_config, dict(update), as_node=WRITER_NODE)
        written = _checkpoint(thread_id, self.graph.get_state(config))
        if written is None:  # pragma: no cover - update_state always makes a checkpoint
            raise StaleState(f"thread {thread_id}: the checkpoint write did not land")
        return written


# --- the savers of our own database ------------------------------------------------------


def checkpoint_sqlite_path(database: str) -> str:
    """Where the embedded default keeps checkpoints for the SQLite database file ``database``."""
    if database in ("", ":memory:"):
        return ":memory:"
    path = Path(database)
    return str(path.with_name(f"{path.stem}.checkpoints.sqlite"))


def open_checkpoint_store(url: str) -> CheckpointStore:
    """A store on the database at ``url`` (a SQLAlchemy URL), its tables set up."""
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() == "sqlite":
        path = checkpoint_sqlite_path(parsed.database or "")
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, check_same_thread=False, timeout=30)
        conn.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL: never corrupt; a power cut may lose the last commits (embedded default)
        conn.execute("PRAGMA synchronous=NORMAL")
        sqlite_saver = SqliteSaver(conn, serde=checkpoint_serializer())
        sqlite_saver.setup()
        return CheckpointStore(sqlite_saver, close=conn.close)
    try:
        return open_postgres_store(parsed.set(drivername="postgresql").render_as_string(False))
    except psycopg.OperationalError as exc:  # our own database is down: one typed line
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise StoreUnavailable(
            f"database unavailable ({reason}); check YUXI_DASH_DATABASE_URL"
        ) from exc


def _try_lock(lock: psycopg.Connection[Any]) -> bool:
    """pg_try_advisory_lock on the setup key (the SELECT always returns its one row)."""
    row = lock.execute("SELECT pg_try_advisory_lock(%s)", (_SETUP_LOCK,)).fetchone()
    return bool(row and row[0])


def open_postgres_store(
    conninfo: str,
    *,
    max_size: int = 4,
    setup: bool = True,
    read_only: bool = False,
    statement_timeout_ms: int | None = None,
) -> CheckpointStore:
    """A store on a PostgreSQL checkpointer at ``conninfo`` (``postgresql://...``).

    ``setup=False`` opens a checkpointer someone else owns (an attached
    platform's) as it is: a read-only role cannot run the saver's ``setup()``,
    and its tables are not ours to migrate. ``read_only=True`` makes every
    transaction of the pool read-only (``default_transaction_read_only``), so
    nothing through this store can write there even with a role that could;
    ``statement_timeout_ms`` bounds each statement.
    """
    options = [str(conninfo_to_dict(conninfo).get("options") or "")]
    if read_only:
        options.append("-c default_transaction_read_only=on")
    if statement_timeout_ms is not None:
        options.append(f"-c statement_timeout={int(statement_timeout_ms)}")
    kwargs: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    if " ".join(options).strip():
        kwargs["options"] = " ".join(options).strip()
    if not setup:
        kwargs["connect_timeout"] = 10  # a platform that is down answers in seconds, not minutes
    pool: ConnectionPool[Any] = ConnectionPool(
        conninfo,
        min_size=1,
        max_size=max_size,
        kwargs=kwargs,
        open=True,
        timeout=30.0 if setup else 15.0,
    )
    saver = PostgresSaver(pool, serde=checkpoint_serializer())
    if not setup:
        return CheckpointStore(saver, close=pool.close)
    try:
        # One process at a time (two replicas starting together): a session-level lock
        # on its own connection, taken by polling. A waiter blocked inside a statement
        # would be an open transaction, which the saver's CREATE INDEX CONCURRENTLY in
        # the process holding the lock waits for: a deadlock nobody detects.
        with psycopg.connect(conninfo, autocommit=True) as lock:
            while not _try_lock(lock):
                time.sleep(0.05)
            try:
                saver.setup()
            finally:
                lock.execute("SELECT pg_advisory_unlock(%s)", (_SETUP_LOCK,))
    except BaseException:
        pool.close()
        raise
    return CheckpointStore(saver, close=pool.close)


def checkpoint_store(url: str) -> CheckpointStore:
    """The process's store for the database at ``url`` (opened once, closed at exit)."""
    return get_resources().acquire(
        CHECKPOINT_STORES, url, lambda: open_checkpoint_store(url), CheckpointStore.close
    )


def close_checkpoint_stores() -> None:
    """Close every store this process opened (tests; at exit the resource owner does it)."""
    get_resources().close_kind(CHECKPOINT_STORES)
