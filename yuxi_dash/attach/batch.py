"""Reading many platform threads' new checkpoints in a few queries, as `ProjectionReader` reads one.

`read_new_checkpoints(store, since)` reads a batch's threads from the checkpoint each was
projected up to, in three read-only queries (`ROWS_SQL`, then `BLOBS_SQL` twice), each as
`project_thread` would get it: folded as `attach.reader.fold` folds (what it drops by version
already in SQL), split at the projected checkpoint (`service.projection.split_since`).
Each blob is fetched and decoded once, only where needed (`_plan`); of the projected
checkpoint only ``token_usage`` and the summary event are read. A thread comes back as None
when this read cannot stand in for the per-thread one (its projected checkpoint pruned, a
checkpoint in the saver's format before version 4 or with writes of no task, a blob refused
by `store.checkpoint_serde`); the scanner projects those alone, through langgraph's public
reading API. Plain SQL over the saver's tables; a checkpoint's values are its stored stream
channels (`StateShape`), every blob it names decoded. `tests/attach/test_projector.py`
compares its rows with the per-thread path's, `tests/attach/test_batch_internals.py` what it
assumes of langgraph (`bench/attach_batch.py`: what it buys over the public API per thread).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from langgraph.errors import EmptyChannelError

from yuxi_dash.attach.platform_store import PlatformStore
from yuxi_dash.attach.reader import fold
from yuxi_dash.compression.state_format import SUMMARIZATION_EVENT_KEY, TOKEN_USAGE_KEY
from yuxi_dash.errors import CheckpointRefused
from yuxi_dash.service.projection import split_since, usage_from_values
from yuxi_dash.store.checkpoint_serde import strict
from yuxi_dash.store.checkpointer import ThreadCheckpoint

# the checkpoints of the batch from each thread's projected one on that `fold` can keep: the
# newest, the oldest read, and each whose usage or summary event is at another channel version
# than the one before it's (what `fold` drops anyway: the saver's versions are unique, a
# counter and a random fraction, so the same version is the same write, across forks too);
# with what the thread's whole window holds: its checkpoints, writes of no task, a checkpoint
# in an old format (a ``v`` that is not a number, or a checkpoint that is no JSON object, counts
# as old: the thread is read alone); of a checkpoint only the parts a state is built from
ROWS_SQL = """
SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id,
    checkpoint->'channel_versions' AS channel_versions,
    checkpoint->'channel_values' AS channel_values, checkpoint->'ts' AS ts, metadata,
    read, pending_writes, old_format
FROM (
    SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.checkpoint,
        c.metadata,
        count(*) OVER thread AS read,
        bool_or(EXISTS (
            SELECT 1 FROM checkpoint_writes cw
            WHERE cw.thread_id = c.thread_id AND cw.checkpoint_ns = c.checkpoint_ns
              AND cw.checkpoint_id = c.checkpoint_id AND cw.task_id = %(null_task)s
        )) OVER thread AS pending_writes,
        bool_or(jsonb_typeof(c.checkpoint) <> 'object'
                OR c.parent_checkpoint_id IS NOT NULL
                AND CASE WHEN jsonb_typeof(c.checkpoint->'v') = 'number'
                         THEN (c.checkpoint->>'v')::numeric ELSE 0 END < %(format_with_sends)s)
            OVER thread AS old_format,
        c.checkpoint_id = max(c.checkpoint_id) OVER thread AS newest,
        (c.checkpoint->'channel_versions'->%(usage)s,
         c.checkpoint->'channel_versions'->%(event)s) IS DISTINCT FROM
        (lag(c.checkpoint->'channel_versions'->%(usage)s) OVER older,
         lag(c.checkpoint->'channel_versions'->%(event)s) OVER older)
          OR row_number() OVER older = 1 AS moved
    FROM checkpoints c
    JOIN unnest(%(threads)s::text[], %(since)s::text[]) AS wanted(w_thread, w_since)
      ON wanted.w_thread = c.thread_id
    WHERE c.checkpoint_ns = '' AND (wanted.w_since IS NULL OR c.checkpoint_id >= wanted.w_since)
    WINDOW thread AS (PARTITION BY c.thread_id),
        older AS (PARTITION BY c.thread_id ORDER BY c.checkpoint_id)
) AS window_rows
WHERE newest OR moved
ORDER BY thread_id, checkpoint_id DESC
"""
# the blobs of the channel versions those checkpoints name (each once); the keys come as one
# JSON array of [thread, channel, version] (dumped in C, where an array parameter per column is
# dumped element by element)
BLOBS_SQL = """
SELECT b.thread_id, b.channel, b.version, b.type, b.blob
FROM checkpoint_blobs b
JOIN jsonb_array_elements(%(keys)s::jsonb) AS wanted(k)
  ON b.thread_id = wanted.k->>0 AND b.checkpoint_ns = ''
  AND b.channel = wanted.k->>1 AND b.version = wanted.k->>2
"""
NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"  # langgraph's writes of no task
FORMAT_WITH_SENDS = 4  # checkpoints before this version keep pending sends in the writes
MESSAGES_CHANNEL = "messages"
_VERSIONS = "_versions"  # each row's channel versions, normalized once
_FOLDED_ON = frozenset({TOKEN_USAGE_KEY, SUMMARIZATION_EVENT_KEY})  # what folding compares
_BASELINE = frozenset({TOKEN_USAGE_KEY, SUMMARIZATION_EVENT_KEY})  # what a step is measured against


@dataclass(frozen=True)
class ThreadRead:
    """One thread's checkpoints to project, as `ProjectionReader` + `checkpoints_since` give them."""

    baseline: ThreadCheckpoint | None  # the projected checkpoint (None: never projected)
    newer: list[ThreadCheckpoint]  # the ones to project, oldest first (folded)
    read: int  # checkpoints in its window on the platform (as the per-thread read counts them)
    new: int  # of those, the ones newer than the projected one
    first_at: datetime | None  # the thread's first checkpoint's time, when read from the start


def read_new_checkpoints(
    store: PlatformStore, since: Mapping[str, str | None]
) -> dict[str, ThreadRead | None]:
    """Each thread's `ThreadRead` (None: read it alone), from a few queries on the platform."""
    if not since:
        return {}
    threads = list(since)
    rows = store.fetch(
        ROWS_SQL,
        {
            "threads": threads,
            "since": [since[t] for t in threads],
            "null_task": NULL_TASK_ID,
            "format_with_sends": FORMAT_WITH_SENDS,
            "usage": TOKEN_USAGE_KEY,
            "event": SUMMARIZATION_EVENT_KEY,
        },
    )
    grouped: dict[str, list[dict[str, Any]]] = {thread_id: [] for thread_id in threads}
    for row in rows:
        row[_VERSIONS] = {str(k): str(v) for k, v in _named_versions(row).items()}
        grouped[str(row["thread_id"])].append(row)
    blobs = _Blobs(store)
    reads: dict[str, ThreadRead | None] = {}
    folded: dict[str, list[dict[str, Any]]] = {}  # folded (usage, summary), then the kept read
    for thread_id, found in grouped.items():
        if not _readable(since[thread_id], found):
            reads[thread_id] = None  # pruned, old format or writes of no task: read it alone
        else:
            folded[thread_id] = found
    # one query for what is read anyway: a thread read from the start whole (the query kept
    # only rows `fold` may keep), of the others the usage of every row (what folding compares)
    # and, where two rows at most came back (a thread that moved by one step), every small
    # channel too; the messages wait for `_plan`
    blobs.fetch(
        [
            (t, row, _first_read(since[t], found, row))
            for t, found in folded.items()
            for row in found
        ]
    )
    plans: dict[str, list[tuple[dict[str, Any], frozenset[str] | None]]] = {}
    for thread_id, found in folded.items():
        try:
            plans[thread_id] = _plan(thread_id, since[thread_id], found, blobs)
        except CheckpointRefused:
            reads[thread_id] = None  # alone, it is refused and audited as a thread
    # what the plans add (a thread read from the start got every blob it needs above)
    blobs.fetch(
        [
            (t, row, channels)
            for t, plan in plans.items()
            if since[t] is not None
            for row, channels in plan
        ]
    )
    for thread_id, plan in plans.items():
        try:
            kept = [blobs.checkpoint(thread_id, row, channels) for row, channels in plan]
        except CheckpointRefused:
            reads[thread_id] = None
            continue
        window = folded[thread_id]
        read = int(window[0]["read"]) if window else 0  # none: gone since the scan listed it
        reads[thread_id] = _thread_read(since[thread_id], read, kept)
    return reads


@dataclass(frozen=True)
class StateShape:
    """What a graph's state values hold: its stream channels (`Pregel.stream_channels_asis`),
    and the empty value of each that has one (an aggregate's ``[]``), read once per batch.
    A checkpoint's other channels (the graph's input, tasks, branches) are decoded all the
    same, as the saver decodes them: a refused type there refuses the thread."""

    channels: tuple[str, ...]
    empty: Mapping[str, Any]

    @classmethod
    def of(cls, graph: Any) -> StateShape:
        stream = graph.stream_channels_asis
        channels = (stream,) if isinstance(stream, str) else tuple(stream)
        empty: dict[str, Any] = {}
        for name in channels:
            try:
                empty[name] = copy.deepcopy(graph.channels[name].copy().get())
            except (KeyError, EmptyChannelError):
                pass  # no empty value: left out, as the snapshot leaves it out
        return cls(channels, empty)

    def values(
        self, stored: Mapping[str, Any], only: Collection[str] | None = None
    ) -> dict[str, Any]:
        """A checkpoint's state values, as ``get_state`` gives them, from its stored channel
        values: a stream channel never written reads as its empty value (a copy), or is left
        out when it has none. ``only``: those channels alone."""
        values: dict[str, Any] = {}
        for name in self.channels:
            if only is not None and name not in only:
                continue
            if name in stored:
                values[name] = stored[name]
            elif name in self.empty:
                values[name] = copy.deepcopy(self.empty[name])
        return values


def _plan(
    thread_id: str, since: str | None, found: list[dict[str, Any]], blobs: _Blobs
) -> list[tuple[dict[str, Any], frozenset[str] | None]]:
    """The checkpoints to keep (`fold` on ``token_usage`` and the summary event) and the
    channels to read of each.

    The projection reads of the projected checkpoint only its ``token_usage``
    and summary event (what a step changed is measured against them; the
    messages already recorded are known by id from the chat record), so the
    messages blob, the costly one, is decoded only where it can hold
    something new: a newer checkpoint whose messages version is the projected
    one's adds none and indexes no new saved result, and is read without it
    as long as the newest checkpoint states its usage (a state without one
    is measured on its messages).
    """
    light = [blobs.usage_only(thread_id, row) for row in found]
    by_id = {str(row["checkpoint_id"]): row for row in found}
    kept = [by_id[c.checkpoint_id] for c in fold(light, since)]
    if since is None:
        return [(row, None) for row in kept]
    baseline = kept[-1]  # `_readable`: the projected checkpoint is there, the oldest read
    projected_messages = versions(baseline).get(MESSAGES_CHANNEL)
    states_usage = usage_from_values(light[0].values) is not None
    plan: list[tuple[dict[str, Any], frozenset[str] | None]] = []
    for row in kept[:-1]:
        named = versions(row)
        same = projected_messages is not None and named.get(MESSAGES_CHANNEL) == projected_messages
        plan.append((row, frozenset(named) - {MESSAGES_CHANNEL} if same and states_usage else None))
    plan.append((baseline, _BASELINE))
    return plan


def _first_read(
    since: str | None, found: list[dict[str, Any]], row: Mapping[str, Any]
) -> frozenset[str] | None:
    """The channels of ``row`` the first blob query reads (None: every one)."""
    if since is None:
        return None
    if len(found) > 2:
        return _FOLDED_ON
    return frozenset(versions(row)) - {MESSAGES_CHANNEL}


def _named_versions(row: Mapping[str, Any]) -> Mapping[str, Any]:
    return row["channel_versions"] or {}


def versions(row: Mapping[str, Any]) -> dict[str, str]:
    """The channel versions a checkpoint row names (as strings, set when the rows are read)."""
    return cast(dict[str, str], row[_VERSIONS])


def _readable(since: str | None, rows: list[dict[str, Any]]) -> bool:
    """Can this read stand for the per-thread one? Not when ``since`` is gone, a checkpoint of
    the window has writes of no task (they change the values) or is in an old format."""
    if since is not None and (not rows or str(rows[-1]["checkpoint_id"]) != since):
        return False  # the projected checkpoint is gone: the per-thread read starts over
    # every row carries its window's aggregates (`ROWS_SQL`): the first one speaks for all
    return not rows or not (rows[0]["pending_writes"] or rows[0]["old_format"])


def _thread_read(since: str | None, read: int, kept: list[ThreadCheckpoint]) -> ThreadRead:
    first_at = None
    if since is None and kept and kept[-1].parent_checkpoint_id is None:
        first_at = kept[-1].created_at  # the oldest is always kept when read from the start
    baseline, newer = split_since(kept, since)
    return ThreadRead(
        baseline=baseline,
        newer=newer,
        read=read,
        new=read - (1 if since is not None else 0),
        first_at=first_at,
    )


class _Blobs:
    """The blobs of a batch's checkpoints, each fetched and decoded once; checkpoints from them.

    Consecutive checkpoints share most channel versions (a step that leaves
    the messages alone names the same messages blob), so a blob is fetched
    and decoded once per thread, channel and version, not once per checkpoint.
    """

    def __init__(self, store: PlatformStore) -> None:
        self.store = store
        self.serde = strict(store.saver.serde)
        self.raw: dict[tuple[str, str, str], tuple[str, bytes]] = {}
        self.asked: set[tuple[str, str, str]] = set()  # fetched, found or not
        self.decoded: dict[tuple[str, str, str], Any] = {}
        self.built: dict[tuple[int, bytes], Any] = {}  # encoded object -> the object (`_load`)
        self.shape = StateShape.of(store.graph)

    def fetch(self, wanted: list[tuple[str, Mapping[str, Any], Collection[str] | None]]) -> None:
        """Fetch the blobs of (thread, checkpoint row, those channels or every one) not fetched yet."""
        keys = sorted(
            {
                (thread_id, channel, version)
                for thread_id, row, only in wanted
                for channel, version in versions(row).items()
                if only is None or channel in only
            }
            - self.asked
        )
        if not keys:
            return
        self.asked.update(keys)
        found = self.store.fetch(
            BLOBS_SQL,
            {"keys": json.dumps(keys)},
            binary=True,  # the blobs as their bytes: messages are most of what a scan reads
        )
        for row in found:  # text columns come back as str, bytea as bytes
            key = (row["thread_id"], row["channel"], row["version"])
            self.raw[key] = (row["type"], row["blob"] or b"")

    def _values(
        self, thread_id: str, row: Mapping[str, Any], only: Collection[str] | None = None
    ) -> dict[str, Any]:
        """The checkpoint's channel values (as the saver's loader gives them), or those channels'."""
        values = dict(row["channel_values"] or {})
        if only is not None:
            values = {k: v for k, v in values.items() if k in only}
        for channel, version in versions(row).items():
            if only is not None and channel not in only:
                continue
            key = (thread_id, channel, version)
            stored = self.raw.get(key)
            if stored is None or stored[0] == "empty":
                continue
            if key not in self.decoded:
                self.decoded[key] = self._load(stored)
            values[channel] = self.decoded[key]
        return values

    def _load(self, stored: tuple[str, bytes]) -> Any:
        """A blob's value, as the saver's serializer loads it, each distinct object decoded once.

        Consecutive versions of the messages channel hold the same messages
        again (a step appends to the list), byte for byte: the serializer builds
        each distinct encoded object of the batch once and reuses it
        (`CheckpointSerializer.loads_msgpack`, which never keeps a value that
        met a type outside its allow-list). Other formats go through
        ``loads_typed`` unchanged. A type outside the allow-list is
        `CheckpointRefused`.
        """
        if stored[0] != "msgpack":
            return self.serde.loads_typed(stored)
        return self.serde.loads_msgpack(stored[1], self.built)

    def usage_only(self, thread_id: str, row: Mapping[str, Any]) -> ThreadCheckpoint:
        """A stand-in with the checkpoint's id, ``token_usage`` and summary event (what `fold`
        compares)."""
        return ThreadCheckpoint(
            thread_id=thread_id,
            checkpoint_id=str(row["checkpoint_id"]),
            values=self._values(thread_id, row, only=_FOLDED_ON),
            created_at=None,
            step=0,
            source="",
        )

    def checkpoint(
        self, thread_id: str, row: Mapping[str, Any], only: Collection[str] | None = None
    ) -> ThreadCheckpoint:
        """The checkpoint of one saver row, as ``get_state_history`` gives it (``only``: those channels).

        Its values are `StateShape.values` of the stored ones. Only rows without writes of no
        task come here (`read_new_checkpoints`), in the saver's current format (`_readable`).
        """
        values = self._values(thread_id, row, only)
        metadata = dict(row["metadata"] or {})
        stamp = row["ts"]
        created = datetime.fromisoformat(stamp) if stamp else None
        return ThreadCheckpoint(
            thread_id=thread_id,
            checkpoint_id=str(row["checkpoint_id"]),
            values=self.shape.values(values, only),
            created_at=created.astimezone(UTC) if created else None,
            step=int(metadata.get("step", 0) or 0),
            source=str(metadata.get("source", "")),
            parent_checkpoint_id=row["parent_checkpoint_id"] or None,
            metadata=metadata,
        )
