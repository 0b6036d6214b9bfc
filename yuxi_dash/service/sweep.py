"""The workdir sweep: offloaded files no index row names, removed after a grace period.

A compress killed between its files and its commit leaves files no `tool_results`
row names. `sweep_workdir` (admin only; each run and each refusal is one audit row
with counts and paths, never content) removes a results-directory file only when:
its name is one our writers make (a content-addressed result, a writer's temp
file); it is a regular file (a symlink is never followed nor removed); it is older
than `workdir_sweep_grace_seconds` (a kept copy written again is touched); no
`tool_results` row names it; no newest checkpoint the projection has not caught up
on names it. The last two are checked again, and the files removed, under the files
lock held exclusively (`unindexed_files.hold_files_exclusive`; SQLite's write lock), so no
compress is between its files and its commit meanwhile. With an attached platform
the workdir is the platform's too and only its checkpoints name its files: nothing
is removed (`held: attached_platform`). `SweepLoop` runs it every
`workdir_sweep_seconds` in `serve` (the actor `serve:sweep`, admin), never with a platform attached.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import sqlalchemy as sa
from langchain_core.messages import ToolMessage
from sqlalchemy.orm import Session

from yuxi_dash.access.audit import audited_refusals, record_audit_eventually
from yuxi_dash.access.roles import Actor, Role, require_role
from yuxi_dash.background import BackgroundLoop
from yuxi_dash.compression.compaction import parse_saved_result
from yuxi_dash.errors import PathRefused, SweepHeld, WorkdirUnavailable, YuxiDashError
from yuxi_dash.files import safe_fs
from yuxi_dash.files.workdir import TOOL_RESULTS_DIR, Workdir
from yuxi_dash.printable_record import Record
from yuxi_dash.service.unindexed_files import SWEEP_WAIT_SECONDS, hold_files_exclusive, unindexed
from yuxi_dash.settings import Settings
from yuxi_dash.store.checkpointer import CheckpointStore
from yuxi_dash.store.db import is_lock_failure, locked_session, session_scope
from yuxi_dash.store.models import Conversation, ToolResult
from yuxi_dash.store.thread_store import state_store

SWEEP_ACTION = "workdir.sweep"
SWEEP_TARGET = f"workdir:{TOOL_RESULTS_DIR}"
MAX_FILES = 1000  # removed per run at most (the rest wait for the next run, `more` says so)
_CHUNK = 500  # paths per IN (...) statement
_AREA = tuple(TOOL_RESULTS_DIR.split("/"))
_PREFIX = TOOL_RESULTS_DIR + "/"
# workdir.tool_result_relpath's names, and safe_fs.replace_file's temp files
_RESULT_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}-[0-9a-f]{16}\.txt")
_TEMP_NAME = re.compile(r"\.[^/\x00]+\.[0-9]+-[0-9]+\.tmp")


@dataclass(frozen=True)
class SweepReport(Record):
    """What one sweep found in the results directory, and removed (or would, dry run)."""

    dry_run: bool
    grace_seconds: float
    entries: int  # everything in the directory
    files: list[str] = field(default_factory=list)  # workdir paths removed (dry run: would be)
    young: int = 0  # modified within the grace period
    indexed: int = 0  # named by a tool_results row
    named_by_checkpoint: int = 0  # named by a newest checkpoint not projected yet
    links: int = 0  # symlinks and other entries that are not regular files: left alone
    other_names: int = 0  # names none of our writers makes: left alone
    more: bool = False  # more than MAX_FILES orphans: the next run takes the rest
    held: str | None = None  # why nothing was removed: attached_platform, files_busy, ...


def is_ours(name: str) -> bool:
    """A name our writers give a file here: ``{tool}-{sha256[:16]}.txt`` or a temp ``.….tmp``."""
    return bool(_RESULT_NAME.fullmatch(name) or _TEMP_NAME.fullmatch(name))


def area_name(path: str) -> str | None:
    """The file name of a workdir path that lies directly in the results directory, else None."""
    if path.startswith(_PREFIX) and "/" not in path[len(_PREFIX) :] and "\\" not in path:
        return path[len(_PREFIX) :] or None
    try:
        *dirs, name = safe_fs.split_relative(path)
    except PathRefused:
        return None
    return name if tuple(dirs) == _AREA else None


def sweep_workdir(*, actor: Actor, settings: Settings, dry_run: bool = False) -> SweepReport:
    """Remove the orphaned offloaded files (admin only); one audit row says what it did."""
    detail: dict[str, Any] = {"via": actor.via, "dry_run": dry_run}
    with audited_refusals(
        actor=actor.id, action=SWEEP_ACTION, target=SWEEP_TARGET, detail=detail, settings=settings
    ):
        require_role(actor, Role.ADMIN, action="sweeping the workdir")
        workdir = Workdir(settings.workdir)
        if not workdir.is_initialized():
            raise WorkdirUnavailable(
                f"workdir {workdir.root} is missing or not initialized; nothing to sweep"
            )
        report = _sweep(workdir, settings=settings, dry_run=dry_run)
    record_audit_eventually(  # SQLite: a writer may hold the database (that is why it was held)
        actor=actor.id,
        action=SWEEP_ACTION,
        target=SWEEP_TARGET,
        outcome="completed",
        detail={**detail, **_audit_detail(report)},
        settings=settings,
    )
    return report


def _audit_detail(report: SweepReport) -> dict[str, Any]:
    counts = report.to_dict()
    files = counts.pop("files")
    counts.pop("dry_run")
    key = "would_remove" if report.dry_run else "removed"
    return {**counts, key: len(files), f"{key}_files": files[:50]}


def _sweep(workdir: Workdir, *, settings: Settings, dry_run: bool) -> SweepReport:
    grace = settings.workdir_sweep_grace_seconds
    older_than = time.time() - grace
    entries = workdir.tool_result_entries()
    report = SweepReport(dry_run=dry_run, grace_seconds=grace, entries=len(entries))
    young = links = other_names = 0
    old: list[str] = []
    for name, regular, mtime in entries:
        if not regular:
            links += 1
        elif not is_ours(name):
            other_names += 1
        elif mtime >= older_than:
            young += 1
        else:
            old.append(name)
    with session_scope(settings) as session:
        indexed = _indexed_names(session, old)
    orphans = sorted(name for name in old if name not in indexed)
    report = replace(
        report,
        young=young,
        links=links,
        other_names=other_names,
        indexed=len(indexed),
        more=len(orphans) > MAX_FILES,
    )
    orphans = orphans[:MAX_FILES]
    if not orphans:
        return report
    if settings.attach_configured:
        return replace(report, held="attached_platform")
    store = state_store(settings)
    try:
        with _decision_session(settings, dry_run=dry_run) as locked:
            named = _named_by_unprojected(locked, store, orphans)
            still = [name for name in orphans if name not in named]
            late = set(_unindexed_names(locked, still))  # rows committed since the first look
            chosen = [name for name in still if name in late]
            if dry_run:
                files = [_PREFIX + name for name in chosen]
            else:
                files = workdir.remove_stale_tool_results(chosen, older_than)
    except SweepHeld as held:
        return replace(report, held=held.message)
    return replace(
        report,
        files=files,
        indexed=report.indexed + len(still) - len(late),
        named_by_checkpoint=len(named),
        young=report.young + len(chosen) - len(files),  # touched (or gone) meanwhile
    )


def _decision_session(settings: Settings, *, dry_run: bool) -> AbstractContextManager[Session]:
    """A plain session for a dry run; else the files lock, held exclusively until the end."""
    return session_scope(settings) if dry_run else _exclusive(settings)


@contextmanager
def _exclusive(settings: Settings) -> Iterator[Session]:
    """SQLite's write lock, or the files lock on PostgreSQL; a short wait, else held."""
    try:
        with locked_session(settings, wait_seconds=SWEEP_WAIT_SECONDS) as session:
            hold_files_exclusive(session)
            yield session
    except sa.exc.OperationalError as exc:
        if is_lock_failure(exc):
            raise SweepHeld("files_busy") from exc
        raise


def _indexed_names(session: Session, names: Sequence[str]) -> set[str]:
    """Which of these results-directory names a `tool_results` row names (any spelling)."""
    wanted = set(names)
    found: set[str] = set()
    if not wanted:
        return found
    rows = session.execute(
        sa.select(ToolResult.path).distinct().execution_options(yield_per=5000)
    ).scalars()
    for path in rows:
        name = area_name(path)
        if name in wanted:
            found.add(name)
    return found


def _unindexed_names(session: Session, names: Sequence[str]) -> list[str]:
    """The names no row names by their canonical path, checked again in chunks."""
    left: list[str] = []
    for start in range(0, len(names), _CHUNK):
        chunk = [_PREFIX + name for name in names[start : start + _CHUNK]]
        left.extend(path[len(_PREFIX) :] for path in unindexed(session, chunk))
    return left


def _named_by_unprojected(
    session: Session, store: CheckpointStore, names: Iterable[str]
) -> set[str]:
    """The names a thread's newest checkpoint holds while its row is behind (or missing).

    Such a checkpoint committed without its projection (a crash between the two on
    SQLite, an agent's own saver); its files are the thread's, not leftovers. A
    checkpoint that cannot be read holds the whole sweep (``unreadable_checkpoint``).
    """
    wanted = set(names)
    projected: dict[str, str | None] = {
        thread_id: checkpoint_id
        for thread_id, checkpoint_id in session.execute(
            sa.select(Conversation.thread_id, Conversation.checkpoint_id)
        )
    }
    named: set[str] = set()
    for thread_id, newest in store.newest_ids().items():
        if projected.get(thread_id) == newest:
            continue
        try:
            checkpoint = store.latest(thread_id)
        except YuxiDashError as exc:
            raise SweepHeld("unreadable_checkpoint") from exc
        for message in (checkpoint.values.get("messages") or []) if checkpoint else []:
            if not isinstance(message, ToolMessage):
                continue
            saved = parse_saved_result(message.content)
            name = area_name(saved.path) if saved is not None and saved.path else None
            if name in wanted:
                named.add(name)
    return named


# --- on a timer, for `yuxi-dash serve` ----------------------------------------------


SWEEP_ACTOR = Actor(id="serve:sweep", role=Role.ADMIN, via="serve")


class SweepLoop(BackgroundLoop):
    """Runs the workdir sweep every ``interval`` seconds in a daemon thread (every replica)."""

    name = "workdir sweep"
    thread_name = "yuxi-dash-sweep"
    period_setting = "workdir_sweep_seconds"
    first_run_now = False
    log = logging.getLogger(__name__)

    @staticmethod
    def wanted(settings: Settings) -> bool:
        """Whether `serve` runs it: an interval is set and no platform shares the workdir."""
        return settings.workdir_sweep_seconds > 0 and not settings.attach_configured

    def one_pass(self) -> None:
        result = sweep_workdir(actor=SWEEP_ACTOR, settings=self.settings)
        if self.report is not None and result.files:
            self.report(f"workdir sweep removed {len(result.files)} orphaned offloaded files")
