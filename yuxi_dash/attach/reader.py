"""How `project_thread` reads a platform thread: newest first, in pages, one step per model call.

`service.projection.project_thread` walks a thread's history newest first until it meets
the checkpoint it projected last, then projects the newer ones oldest first.
`ProjectionReader` is the platform store as it sees it:
- in growing pages (2, 8, 32, ... 256 checkpoints): a thread that moved by one step costs
  one query;
- only the checkpoints that matter: the newest, the projected one, and each whose
  ``token_usage`` differs from the one before (a model call or a compaction). The steps in
  between are folded into the next model call (`fold`): their messages are recorded with
  it, in order, at its time. The usage timeline is the one every step would give;
- counted: checkpoints read, and how many were newer than the projected one.

It never writes: a write is ThreadAttached.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

from yuxi_dash.compression.state_format import SUMMARIZATION_EVENT_KEY, TOKEN_USAGE_KEY
from yuxi_dash.errors import ThreadAttached
from yuxi_dash.store.checkpointer import CheckpointStore, ThreadCheckpoint


class ProjectionReader(CheckpointStore):
    """The platform store for one `project_thread` call (``since``: the projected checkpoint)."""

    FIRST_PAGE = 2
    MAX_PAGE = 256

    def __init__(self, store: CheckpointStore, *, since: str | None) -> None:
        self.saver = store.saver
        self.graph = store.graph
        self._close = None
        self._store = store
        self.since = since
        self.read = 0  # checkpoints read from the platform
        self.new = 0  # of those, the ones newer than ``since``
        self.first_at: datetime | None = None  # the thread's first checkpoint, if read to the end

    def latest(self, thread_id: str) -> ThreadCheckpoint | None:
        return self._store.latest(thread_id)

    def pages(self, thread_id: str, *, before: str | None = None) -> Iterator[ThreadCheckpoint]:
        """Every checkpoint older than ``before`` (all without it), newest first, counted."""
        page, last = self.FIRST_PAGE, before
        oldest: ThreadCheckpoint | None = None
        while True:
            got = 0
            for checkpoint in self._store.history(thread_id, limit=page, before=last):
                got += 1
                self.read += 1
                self.new += checkpoint.checkpoint_id != self.since
                last, oldest = checkpoint.checkpoint_id, checkpoint
                yield checkpoint
            if got < page:
                if oldest is not None and oldest.parent_checkpoint_id is None:
                    self.first_at = oldest.created_at
                return
            page = min(page * 4, self.MAX_PAGE)

    def history(
        self, thread_id: str, *, limit: int | None = None, before: str | None = None
    ) -> Iterator[ThreadCheckpoint]:
        """The newest, the projected one, and every model call between them, newest first."""
        if limit is not None:  # a bounded read is not a projection's: no folding
            for index, checkpoint in enumerate(self.pages(thread_id, before=before)):
                if index >= limit:
                    return
                yield checkpoint
            return
        yield from fold(self.pages(thread_id, before=before), self.since)

    def write(
        self, thread_id: str, update: Mapping[str, Any], *, expected_checkpoint_id: str | None
    ) -> ThreadCheckpoint:
        raise ThreadAttached(f"thread {thread_id} belongs to the attached platform")


def fold(newest_first: Iterable[ThreadCheckpoint], since: str | None) -> Iterator[ThreadCheckpoint]:
    """The newest, ``since``, and every model call or summary between them (newest first);
    stops at ``since``.

    A checkpoint is kept when its ``token_usage`` or its summarization event differs from
    the one before it (each summary is recorded once); the steps in between are folded
    into the next kept one.
    """
    newest: str | None = None
    pending: ThreadCheckpoint | None = None  # waits for the one before it
    for checkpoint in newest_first:
        if pending is not None and (
            pending.checkpoint_id == newest
            or _usage(pending) != _usage(checkpoint)
            or _event(pending) != _event(checkpoint)
        ):
            yield pending
        if checkpoint.checkpoint_id == since:
            yield checkpoint
            return
        newest = newest or checkpoint.checkpoint_id
        pending = checkpoint
    if pending is not None:
        yield pending  # the oldest: projected from nothing


def _usage(checkpoint: ThreadCheckpoint) -> Any:
    return checkpoint.values.get(TOKEN_USAGE_KEY)


def _event(checkpoint: ThreadCheckpoint) -> Any:
    return checkpoint.values.get(SUMMARIZATION_EVENT_KEY)
