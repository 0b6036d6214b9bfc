"""The alert state machine for one (rule, thread), as a pure function of what it sees.

inactive -> pending (at or above ``fire_at``) -> firing (after ``for_seconds``)
-> resolved (only below ``clear_at``: hysteresis). A pending alert whose
thread drops below ``fire_at`` is cancelled and never fires. A thread that is
deleted, gone, out of the rule's scope, or whose rule is disabled or deleted,
resolves (or cancels) its alert. A resolved alert is inactive for the next
decision. A ``falling`` measure (minutes until a forecast crossing) is the other way
round: at or below ``fire_at`` fires, only above ``clear_at`` resolves.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

PENDING = "pending"
FIRING = "firing"
RESOLVED = "resolved"
CANCELLED = "cancelled"  # a pending alert that never fired: its row goes


@dataclass(frozen=True)
class Seen:
    """What one evaluation sees of a (rule, thread)."""

    state: str | None  # pending | firing | resolved | None (no row)
    pending_since: datetime | None
    pressure: float | None  # None: the thread is gone or deleted
    in_scope: bool  # the rule exists, is enabled and covers the thread
    fire_at: float
    clear_at: float
    for_seconds: int
    falling: bool = False  # fires at or below fire_at, resolves only above clear_at


def decide(seen: Seen, now: datetime) -> str | None:
    """The new state, or None when nothing changes."""
    live = seen.in_scope and seen.pressure is not None
    over = live and _reaches(seen, seen.fire_at)
    if seen.state in (None, RESOLVED):
        if not over:
            return None
        return FIRING if seen.for_seconds <= 0 else PENDING
    if seen.state == PENDING:
        if not over:
            return CANCELLED
        started = seen.pending_since or now
        return FIRING if (now - started).total_seconds() >= seen.for_seconds else None
    # firing: resolves only below clear_at (or when the thread or rule goes)
    if not live or not _reaches(seen, seen.clear_at):
        return RESOLVED
    return None


def _reaches(seen: Seen, line: float) -> bool:
    """The measure is at ``line`` or past it toward firing (no measure: never)."""
    if seen.pressure is None:
        return False
    return seen.pressure <= line if seen.falling else seen.pressure >= line
