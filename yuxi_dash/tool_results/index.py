"""Offloaded tool results: the index (`tool_results`), re-hash verification, and audited reads.

The file in the workdir is the truth; the index row records where it is and
the SHA-256 it had when it was written. An attached platform's results resolve
under its own volume (`Settings.workdir_for`: `YUXI_DASH_ATTACH_WORKDIR`), ours
under `YUXI_DASH_WORKDIR`. `verify_tool_results` re-hashes every indexed file,
or one page of them as the listing pages them: ok, mismatch (content changed)
or missing (not on this volume: no such file, or the workdir is not mounted). `read_tool_result`
reads a file only through the workdir's link-refusing reads (every path component opened
with O_NOFOLLOW relative to its parent directory, so nothing outside the workdir is ever
read, even through a symlink swapped in mid-read) and records an audit row for every read,
allowed or refused. The first look at a result (`tool_results.opened.open_tool_result`) reads
the same way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash import validation
from yuxi_dash.access.audit import record_audit
from yuxi_dash.access.roles import Actor, Role, require_role
from yuxi_dash.errors import PathRefused, ToolResultNotFound, WorkdirUnavailable, YuxiDashError
from yuxi_dash.files.workdir import Workdir
from yuxi_dash.printable_record import Record
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Conversation, ToolResult
from yuxi_dash.store.origin import attached_platform, is_attached
from yuxi_dash.wording import attached_label

READ_ACTION = "read_tool_result"
DEFAULT_READ_LIMIT = 20_000
MAX_READ_LIMIT = 200_000
VerifyStatus = Literal["ok", "mismatch", "missing"]


@dataclass(frozen=True)
class ToolResultInfo(Record):
    """One index row, with the owning thread's user and, for an attached thread, its platform."""

    id: int
    thread_id: str
    user_id: str
    tool_name: str
    tool_call_id: str | None
    sha256: str
    path: str
    chars: int
    approx_tokens: int
    created_at: datetime
    attached: bool = False
    platform: str | None = None  # the attached platform's label (attached threads only)

    @property
    def origin(self) -> str:
        """Whose thread: "ours", or "attached: <platform>" as every page and command says it."""
        return attached_label(self.platform) if self.attached else "ours"


@dataclass(frozen=True)
class VerifiedToolResult:
    id: int
    thread_id: str
    tool_name: str
    path: str
    sha256: str
    status: VerifyStatus

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "check": self.status}  # "check": the CLI's column name


@dataclass(frozen=True)
class VerifyReport:
    """Every checked file with its status, and the counts per status."""

    results: list[VerifiedToolResult] = field(default_factory=list)

    def __iter__(self) -> Iterator[VerifiedToolResult]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    @property
    def counts(self) -> dict[str, int]:
        counted = Counter(r.status for r in self.results)
        return {status: counted.get(status, 0) for status in ("ok", "mismatch", "missing")}

    @property
    def all_ok(self) -> bool:
        return all(r.status == "ok" for r in self.results)

    @property
    def problems(self) -> list[VerifiedToolResult]:
        return [r for r in self.results if r.status != "ok"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "checked": len(self.results),
            "counts": self.counts,
            "problems": [r.to_dict() for r in self.problems],
        }


@dataclass(frozen=True)
class ToolResultContent:
    """A window of one offloaded file: `text` is characters [offset, offset + len(text))."""

    id: int
    thread_id: str
    tool_name: str
    path: str
    sha256: str
    text: str
    offset: int
    total_chars: int
    integrity: VerifyStatus

    @property
    def truncated(self) -> bool:
        return self.offset + len(self.text) < self.total_chars

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "truncated": self.truncated}


def _filters(
    *,
    thread_id: str | None,
    user_id: str | None,
    tool_name: str | None,
    min_chars: int | None,
) -> list[sa.ColumnElement[bool]]:
    """The WHERE clauses of a listing; None means "no filter", anything else is validated.

    An empty or malformed thread id, user id or tool name is InvalidInput, never
    "every row" (an empty string once listed everything).
    """
    filters: list[sa.ColumnElement[bool]] = []
    if thread_id is not None:
        filters.append(ToolResult.thread_id == validation.thread_id(thread_id))
    if user_id is not None:
        user_id = validation.text(user_id, "user id", limit=128, required=True)
        filters.append(Conversation.user_id == user_id)
    if tool_name is not None:
        tool_name = validation.text(tool_name, "tool name", limit=128, required=True)
        filters.append(ToolResult.tool_name == tool_name)
    if min_chars is not None:
        filters.append(ToolResult.chars >= validation.integer(min_chars, "min chars"))
    return filters


def _info(row: ToolResult, user_id: str, platform: str | None = None) -> ToolResultInfo:
    return ToolResultInfo(
        id=row.id,
        thread_id=row.thread_id,
        user_id=user_id,
        tool_name=row.tool_name,
        tool_call_id=row.tool_call_id,
        sha256=row.sha256,
        path=row.path,
        chars=row.chars,
        approx_tokens=row.approx_tokens,
        created_at=row.created_at,
        attached=platform is not None,
        platform=platform,
    )


def list_tool_results(
    session: Session,
    *,
    thread_id: str | None = None,
    user_id: str | None = None,
    tool_name: str | None = None,
    min_chars: int | None = None,
    limit: int = 100,
    offset: int = 0,
) -> list[ToolResultInfo]:
    """Indexed tool results, newest first; InvalidInput for a malformed filter or page."""
    limit = validation.non_negative(limit, "limit")
    offset = validation.non_negative(offset, "offset")
    rows = session.execute(
        sa.select(ToolResult, Conversation.user_id, Conversation.origin)
        .join(Conversation, Conversation.thread_id == ToolResult.thread_id)
        .where(
            *_filters(
                thread_id=thread_id, user_id=user_id, tool_name=tool_name, min_chars=min_chars
            )
        )
        .order_by(ToolResult.created_at.desc(), ToolResult.id.desc())
        .limit(limit)
        .offset(offset)
    ).all()
    attached = any(is_attached(origin) for _row, _user, origin in rows)
    platform = (attached_platform(session) or "platform") if attached else None
    return [
        _info(row, user, platform if is_attached(origin) else None) for row, user, origin in rows
    ]


def count_tool_results(
    session: Session,
    *,
    thread_id: str | None = None,
    user_id: str | None = None,
    tool_name: str | None = None,
    min_chars: int | None = None,
) -> int:
    return session.execute(
        sa.select(sa.func.count())
        .select_from(ToolResult)
        .join(Conversation, Conversation.thread_id == ToolResult.thread_id)
        .where(
            *_filters(
                thread_id=thread_id, user_id=user_id, tool_name=tool_name, min_chars=min_chars
            )
        )
    ).scalar_one()


def _verify_one(workdir: Workdir, path: str, sha256: str) -> VerifyStatus:
    try:
        return workdir.verify(path, sha256)
    except PathRefused:
        return "missing"  # a recorded path that would leave the workdir is no file of ours
    except WorkdirUnavailable:
        return "missing"  # the volume is not mounted here: no file of it is on this volume
    except OSError:
        return "missing"


def verify_tool_results(
    session: Session | None = None,
    *,
    thread_id: str | None = None,
    user_id: str | None = None,
    tool_name: str | None = None,
    result_ids: list[int] | None = None,
    limit: int | None = None,
    offset: int = 0,
    settings: Settings | None = None,
    workdir: Workdir | None = None,
) -> VerifyReport:
    """Re-hash every indexed file (filtered) against its recorded SHA-256.

    `limit` and `offset` check one page of the filtered rows, paged newest first
    as `list_tool_results` pages them (the rows a listing with the same page
    shows); without them every row is checked. The report lists the checked
    rows by id either way. Without a session, one is opened (and closed) on the
    configured database. InvalidInput for a malformed filter or page.
    """
    if session is None:
        with session_scope(settings) as own:
            return verify_tool_results(
                own,
                thread_id=thread_id,
                user_id=user_id,
                tool_name=tool_name,
                result_ids=result_ids,
                limit=limit,
                offset=offset,
                settings=settings,
                workdir=workdir,
            )
    settings = settings or get_settings()
    workdirs: dict[str, Workdir] = {}

    def workdir_of(origin: str) -> Workdir:  # `workdir`, when given, holds every row's file
        if workdir is not None:
            return workdir
        return workdirs.setdefault(origin, Workdir(settings.workdir_for(origin)))

    offset = validation.non_negative(offset, "offset")
    if limit is not None:
        limit = validation.non_negative(limit, "limit")
    filters = _filters(thread_id=thread_id, user_id=user_id, tool_name=tool_name, min_chars=None)
    if result_ids is not None:
        filters.append(
            ToolResult.id.in_([validation.db_id(i, "tool result id") for i in result_ids])
        )
    query = (
        sa.select(
            ToolResult.id,
            ToolResult.thread_id,
            ToolResult.tool_name,
            ToolResult.path,
            ToolResult.sha256,
            Conversation.origin,
        )
        .join(Conversation, Conversation.thread_id == ToolResult.thread_id)
        .where(*filters)
        .order_by(ToolResult.id)
    )
    if limit is not None or offset:
        page = (  # the page `list_tool_results` shows: newest first, then limit and offset
            sa.select(ToolResult.id)
            .join(Conversation, Conversation.thread_id == ToolResult.thread_id)
            .where(*filters)
            .order_by(ToolResult.created_at.desc(), ToolResult.id.desc())
            .limit(limit)
            .offset(offset)
            .subquery()
        )
        query = query.join(page, page.c.id == ToolResult.id)
    results = [
        VerifiedToolResult(
            id=row.id,
            thread_id=row.thread_id,
            tool_name=row.tool_name,
            path=row.path,
            sha256=row.sha256,
            status=_verify_one(workdir_of(row.origin), row.path, row.sha256),
        )
        for row in session.execute(query)
    ]
    return VerifyReport(results=results)


@dataclass(frozen=True)
class Located:
    """Where an indexed result's file is: its row's fields and its thread's origin."""

    id: int
    thread_id: str
    tool_name: str
    tool_call_id: str | None
    path: str
    sha256: str
    origin: str


def locate(result_id: int, settings: Settings) -> Located:
    """The index row of ``result_id`` and its thread's origin; ToolResultNotFound when none."""
    with session_scope(settings) as session:
        row = session.get(ToolResult, result_id)
        if row is None:
            raise ToolResultNotFound(f"tool result {result_id} not found")
        origin = session.scalar(
            sa.select(Conversation.origin).where(Conversation.thread_id == row.thread_id)
        )
        return Located(
            result_id, row.thread_id, row.tool_name, row.tool_call_id, row.path, row.sha256,
            origin or "",
        )  # fmt: skip


def read_file(found: Located, settings: Settings) -> tuple[str, VerifyStatus]:
    """The whole file and its check; ToolResultNotFound when it is not on this volume."""
    workdir = Workdir(settings.workdir_for(found.origin))
    try:
        # one open, one read (text and re-hash); PathRefused for a path that leaves the
        # workdir or crosses a symlink, WorkdirUnavailable when the root is gone
        return workdir.read_verified(found.path, found.sha256)
    except (FileNotFoundError, IsADirectoryError):
        raise ToolResultNotFound(
            f"the file of tool result {found.id} is not on this volume: {found.path}"
        ) from None


def read_tool_result(
    result_id: int,
    *,
    actor: Actor,
    offset: int = 0,
    limit: int = DEFAULT_READ_LIMIT,
    settings: Settings | None = None,
) -> ToolResultContent:
    """Read a window of one offloaded file, confined to the workdir; audited either way."""
    settings = settings or get_settings()
    target = f"tool_result:{result_id}"
    detail: dict[str, Any] = {"offset": offset, "limit": limit, "role": actor.role.label}
    try:
        require_role(actor, Role.VIEWER, action="reading a tool result")
        validation.db_id(result_id, "tool result id")  # 2**63 once reached the database raw
        validation.non_negative(offset, "offset")
        validation.integer(limit, "limit", minimum=1)
        limit = min(limit, MAX_READ_LIMIT)
        found = locate(result_id, settings)
        thread_id, tool_name, path, sha256 = (
            found.thread_id,
            found.tool_name,
            found.path,
            found.sha256,
        )
        detail.update({"thread_id": thread_id, "path": path})
        full, integrity = read_file(found, settings)
    except YuxiDashError as exc:
        record_audit(
            actor=actor.id,
            action=READ_ACTION,
            target=target,
            outcome="refused",
            detail={**detail, "code": exc.code},
            settings=settings,
        )
        raise
    record_audit(
        actor=actor.id,
        action=READ_ACTION,
        target=target,
        outcome="ok",
        detail={**detail, "integrity": integrity},
        settings=settings,
    )
    return ToolResultContent(
        id=result_id,
        thread_id=thread_id,
        tool_name=tool_name,
        path=path,
        sha256=sha256,
        text=full[offset : offset + limit],
        offset=offset,
        total_chars=len(full),
        integrity=integrity,
    )
