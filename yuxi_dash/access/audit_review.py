"""Reading the audit log is itself audited: the admin-only view and CSV export.

`read_audit_log` and `export_audit_log_csv` are the only ways the dashboard
reads `audit_log`. Both check the admin role here (the page hiding itself is
not the guard), and both write one row of their own (`view_audit_log` /
`export_audit_log`) in the same transaction as the read, so a read that could
not be recorded is not returned. The row says which filters were set and how
many rows went out, never the filter values (they name operators and users).
A refusal (not an admin, a malformed filter) is one row too, and nothing is read.

`newest_audit_id` is the one unrecorded look at the table: the id of its newest
row, no content, so a page holding rows it read can tell that the log has moved
since (and read again, recorded) without recording every rerun.
"""

from __future__ import annotations

import csv
import io
import json
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from yuxi_dash.access.audit import audited_refusals, record_audit
from yuxi_dash.access.roles import Actor, Role, require_role
from yuxi_dash.errors import InvalidInput
from yuxi_dash.settings import Settings, get_settings

if TYPE_CHECKING:
    from yuxi_dash.store.queries import AuditRecord

VIEW_ACTION = "view_audit_log"
EXPORT_ACTION = "export_audit_log"
TARGET = "audit_log"
MAX_ROWS = 1000
MAX_FILTER_LENGTH = 256
CSV_COLUMNS = ("at", "actor", "action", "target", "outcome", "detail")
_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


@dataclass(frozen=True)
class AuditFilter:
    """Which rows to read: exact actor / action / target, not before `since`, these outcomes."""

    actor: str | None = None
    action: str | None = None
    target: str | None = None
    since: datetime | None = None
    outcomes: tuple[str, ...] | None = None  # None: every outcome
    hidden_actions: tuple[str, ...] = ()  # rows of these actions are left out
    limit: int = MAX_ROWS

    def described(self) -> dict[str, Any]:
        """What the audit row may say about this filter: which fields are set, no values."""
        named = {"actor": self.actor, "action": self.action, "target": self.target}
        return {
            "filters": sorted(name for name, value in named.items() if value),
            "since": self.since.isoformat() if self.since else None,
            "outcomes": None if self.outcomes is None else len(self.outcomes),
            "hidden_actions": len(self.hidden_actions),
            "limit": self.limit,
        }


def _check(filters: AuditFilter) -> None:
    named = [(name, getattr(filters, name)) for name in ("actor", "action", "target")]
    named += [("hidden action", action) for action in filters.hidden_actions]
    for name, value in named:
        if value is None:
            continue
        if len(value) > MAX_FILTER_LENGTH:
            raise InvalidInput(f"the {name} filter is longer than {MAX_FILTER_LENGTH} characters")
        if any(unicodedata.category(char) == "Cc" for char in value):
            raise InvalidInput(f"the {name} filter holds a control character")
    if not 1 <= filters.limit <= MAX_ROWS:
        raise InvalidInput(f"limit must be between 1 and {MAX_ROWS}")


@dataclass(frozen=True)
class AuditView:
    """The rows one recorded read returned, and the id of the row that recorded it."""

    rows: list[AuditRecord]
    view_id: int | None


def _audited_read(
    actor: Actor, filters: AuditFilter, action: str, settings: Settings | None
) -> AuditView:
    from yuxi_dash.store.db import session_scope
    from yuxi_dash.store.queries import list_audit

    settings = settings or get_settings()
    detail = {**filters.described(), "role": actor.role.label}
    with audited_refusals(
        actor=actor.id, action=action, target=TARGET, detail=detail, settings=settings
    ):
        require_role(actor, Role.ADMIN, action="reading the audit log")
        _check(filters)
    with session_scope(settings) as session:
        rows = list_audit(
            session,
            actor=filters.actor,
            action=filters.action,
            target=filters.target,
            since=filters.since,
            limit=filters.limit,
        )
        if filters.outcomes is not None:
            rows = [row for row in rows if row.outcome in filters.outcomes]
        if filters.hidden_actions:
            rows = [row for row in rows if row.action not in filters.hidden_actions]
        view_id = record_audit(
            actor=actor.id,
            action=action,
            target=TARGET,
            outcome="ok",
            detail={**detail, "rows": len(rows)},
            session=session,
        )
    return AuditView(rows=rows, view_id=view_id)


def read_audit_log(
    actor: Actor, filters: AuditFilter, *, settings: Settings | None = None
) -> list[AuditRecord]:
    """Admin only: audit rows (AuditRecord), newest first; the read is one `view_audit_log` row."""
    return _audited_read(actor, filters, VIEW_ACTION, settings).rows


def view_audit_log(
    actor: Actor, filters: AuditFilter, *, settings: Settings | None = None
) -> AuditView:
    """`read_audit_log`, also giving the id of the `view_audit_log` row this read wrote."""
    return _audited_read(actor, filters, VIEW_ACTION, settings)


def newest_audit_id(*, settings: Settings | None = None) -> int | None:
    """The id of the newest audit row (None: an empty log); no row content, not recorded."""
    import sqlalchemy as sa

    from yuxi_dash.store.db import session_scope
    from yuxi_dash.store.models import AuditEntry

    with session_scope(settings or get_settings()) as session:
        return session.scalar(sa.select(sa.func.max(AuditEntry.id)))


def _literal_cell(value: str) -> str:
    """A cell a spreadsheet shows as text: a leading =, +, -, @ would make it a formula."""
    return "'" + value if value.startswith(_FORMULA_PREFIXES) else value


def rows_to_csv(rows: Sequence[AuditRecord]) -> bytes:
    """The rows as UTF-8 CSV (at, actor, action, target, outcome, detail as JSON)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        values = (
            row.at.isoformat(),
            row.actor,
            row.action,
            row.target,
            row.outcome,
            json.dumps(row.detail, sort_keys=True, default=str),
        )
        writer.writerow([_literal_cell(str(value)) for value in values])
    return out.getvalue().encode("utf-8")


def export_audit_log_csv(
    actor: Actor, filters: AuditFilter, *, settings: Settings | None = None
) -> bytes:
    """Admin only: the filtered rows as CSV; the export is one `export_audit_log` row."""
    return rows_to_csv(_audited_read(actor, filters, EXPORT_ACTION, settings).rows)
