"""Moments, our corrections on a time line, and one fact's state at a moment (no graph I/O).

- A moment is an ISO-8601 date or date and time (`parse_moment`); no offset means UTC, a
  date alone means 00:00 UTC that day; a moment after now is refused (`invalid_input`).
  `moment_text` writes it as graphiti-core stores times, so the graph compares it as text.
- Our corrections (undos too) change a fact in place, so the graph forgets how it was.
  `Timeline`: the user's `memory_corrections` rows made after the moment (`since`), oldest
  first, indexed by fact, without embeddings; older ones are only counted. A fact's state
  at a moment is the `before` snapshot of the first correction after it, else the edge now.
- The platform changes facts in place too, with a time: `forgotten_at` (no longer held
  from then, like an expiry) and `ratified_at` (tentative until then, active after).
- `FactState` is one fact as the memory held it at a moment: held (created at or before
  it, neither expired nor forgotten then), valid in the world then (valid_at unknown or not
  after it, invalid_at unknown or after it, as known today), and the invalid_at the system
  believed then (none yet when the fact expired after the moment).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from functools import cached_property
from typing import Any

from yuxi_dash.errors import InvalidInput
from yuxi_dash.memory.graph.correction_rules import INVALIDATED_STATUSES
from yuxi_dash.settings import Settings
from yuxi_dash.store.corrections import count_corrections, user_corrections
from yuxi_dash.store.db import session_scope

MAX_MOMENT_CHARS = 64
MAX_CORRECTIONS = 5000  # correction rows read after the moment for one look; more is said plainly


def parse_moment(value: Any, name: str = "the moment", *, now: datetime | None = None) -> datetime:
    """An aware UTC datetime from an ISO date or date and time; InvalidInput otherwise."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime.combine(value, time(0), tzinfo=UTC)
    elif isinstance(value, str) and 0 < len(value.strip()) <= MAX_MOMENT_CHARS:
        text = value.strip()
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidInput(
                f"{name} must be an ISO date or date and time, e.g. 2026-01-05T09:30 (UTC)"
            ) from None
    else:
        raise InvalidInput(
            f"{name} must be an ISO date or date and time, e.g. 2026-01-05T09:30 (UTC)"
        )
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    if moment > (now or datetime.now(UTC)):
        raise InvalidInput(f"{name} is in the future; memory is known only up to now")
    return moment


def moment_text(moment: datetime) -> str:
    """The moment as graphiti-core writes times (`isoformat()` in UTC)."""
    return moment.astimezone(UTC).isoformat()


def when(value: Any) -> datetime | None:
    """A stored time (ISO text or datetime) as an aware UTC datetime; None when unset."""
    if value in (None, ""):
        return None
    if isinstance(value, datetime):
        moment = value
    else:
        try:
            moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def iso(value: Any) -> str | None:
    moment = when(value)
    return moment.isoformat() if moment else None


@dataclass(frozen=True)
class Correction:
    """One `memory_corrections` row: when, who, what, and the edges before and after."""

    id: str
    audit_id: int
    at: datetime
    actor: str
    action: str
    reason: str
    ticket: str | None
    fact_uuid: str
    before: Mapping[str, Any]
    after: Mapping[str, Any]

    def touches(self, uuid: str) -> bool:
        return uuid in self.before or uuid in self.after

    def shown(self) -> dict[str, Any]:
        """The correction as a view shows it (no snapshots: they hold the embedding)."""
        return {
            "kind": "correction",
            "audit_id": self.audit_id,
            "at": self.at.isoformat(),
            "actor": self.actor,
            "action": self.action,
            "reason": self.reason,
            "ticket": self.ticket,
            "fact_uuid": self.fact_uuid,
        }


def correction_from_row(row: Mapping[str, Any]) -> Correction:
    """A `store.corrections.user_corrections` row as a `Correction`."""
    at = when(row["at"])
    assert at is not None
    return Correction(
        id=row["id"],
        audit_id=int(row["audit_id"]),
        at=at,
        actor=row["actor"],
        action=row["action"],
        reason=row["reason"] or "",
        ticket=row["ticket"],
        fact_uuid=row["fact_uuid"],
        before=dict(row["before"] or {}),
        after=dict(row["after"] or {}),
    )


@dataclass(frozen=True)
class Timeline:
    """A user's corrections made after `since` (None: all), oldest first. `earlier`: how many
    were made at or before `since` (counted, not read). `complete` is False when
    MAX_CORRECTIONS cut the list (the oldest after `since` are kept: they decide how the
    facts were at `since`; later ones may be missing)."""

    corrections: tuple[Correction, ...] = ()
    complete: bool = True
    since: datetime | None = None
    earlier: int = 0

    @cached_property
    def _times(self) -> list[datetime]:
        return [c.at for c in self.corrections]

    @cached_property
    def by_fact(self) -> dict[str, list[Correction]]:
        """Each fact uuid -> the corrections that touched it, oldest first."""
        found: dict[str, list[Correction]] = {}
        for correction in self.corrections:
            for uuid in {*correction.before, *correction.after}:
                found.setdefault(uuid, []).append(correction)
        return found

    def after(self, moment: datetime) -> list[Correction]:
        return list(self.corrections[bisect_right(self._times, moment) :])

    def made_by(self, moment: datetime) -> int:
        """How many corrections had been made at or before the moment."""
        return self.earlier + bisect_right(self._times, moment)

    def between(self, start: datetime, end: datetime) -> list[Correction]:
        """The corrections made after `start`, up to and including `end`."""
        times = self._times
        return list(self.corrections[bisect_right(times, start) : bisect_right(times, end)])

    def touching(self, uuid: str, moment: datetime) -> list[Correction]:
        """The corrections of one fact made after the moment, oldest first."""
        return [c for c in self.by_fact.get(uuid, ()) if c.at > moment]

    def overrides(self, moment: datetime) -> dict[str, dict[str, Any] | None]:
        """Each fact a correction changed after the moment -> its snapshot then (None: it did
        not exist yet): the `before` of the first such correction."""
        found: dict[str, dict[str, Any] | None] = {}
        for correction in self.after(moment):
            for uuid, snap in correction.before.items():
                if uuid not in found:
                    found[uuid] = dict(snap) if snap else None
        return found

    def sources(self) -> dict[str, str]:
        """Each corrected fact -> its source entity uuid (to find the edge as it is now)."""
        found: dict[str, str] = {}
        for correction in self.corrections:
            for snaps in (correction.before, correction.after):
                for uuid, snap in snaps.items():
                    if snap and snap.get("source_node_uuid"):
                        found.setdefault(uuid, str(snap["source_node_uuid"]))
        return found


def load_timeline(
    settings: Settings,
    user_id: str,
    *,
    since: datetime | None = None,
    limit: int = MAX_CORRECTIONS,
) -> Timeline:
    """The user's corrections after `since` from the store (read-only), oldest first, and how
    many were made before; one more than `limit` is read to tell whether the list is whole."""
    with session_scope(settings) as session:
        rows = user_corrections(session, user_id, after=since, limit=limit + 1)
        earlier = 0 if since is None else count_corrections(session, user_id, until=since)
    found = tuple(correction_from_row(r) for r in rows[:limit])
    return Timeline(found, complete=len(rows) <= limit, since=since, earlier=earlier)


def row_from_snapshot(snap: Mapping[str, Any], names: Mapping[str, Any] | None) -> dict[str, Any]:
    """A fact row (the columns the history queries return) from a correction's snapshot;
    `names` is the edge as the graph holds it now, for the end names (None: gone since)."""
    attributes = snap.get("attributes") or {}
    return {
        "source": (names or {}).get("source") or snap.get("source_node_uuid"),
        "target": (names or {}).get("target") or snap.get("target_node_uuid"),
        "source_uuid": snap.get("source_node_uuid"),
        "target_uuid": snap.get("target_node_uuid"),
        "uuid": snap.get("uuid"),
        "name": snap.get("name"),
        "fact": str(snap.get("fact") or "")[:500],
        "created_at": snap.get("created_at"),
        "valid_at": snap.get("valid_at"),
        "invalid_at": snap.get("invalid_at"),
        "expired_at": snap.get("expired_at"),
        "status": attributes.get("status"),
        "source_kind": attributes.get("source_kind"),
        "forgotten_at": attributes.get("forgotten_at"),
        "ratified_at": attributes.get("ratified_at"),
        "episodes": list(snap.get("episodes") or []),
    }


@dataclass
class FactState:
    """One fact at a moment (see the module doc); `row` has the shown columns as they were."""

    row: dict[str, Any]
    moment: datetime
    corrected_since: bool = False  # a correction after the moment changed it: `row` is how it was
    status_now: str | None = None
    later: list[dict[str, Any]] = field(default_factory=list)

    @property
    def created_at(self) -> datetime | None:
        return when(self.row.get("created_at"))

    @property
    def expired_at(self) -> datetime | None:
        return when(self.row.get("expired_at"))

    @property
    def forgotten_at(self) -> datetime | None:
        return when(self.row.get("forgotten_at"))

    @property
    def ended_at(self) -> datetime | None:
        """When the memory stopped holding the fact: the expiry or the forgetting, first."""
        ends = [t for t in (self.expired_at, self.forgotten_at) if t is not None]
        return min(ends) if ends else None

    @property
    def existed(self) -> bool:
        created = self.created_at
        return created is not None and created <= self.moment

    @property
    def held(self) -> bool:
        ended = self.ended_at
        return self.existed and (ended is None or ended > self.moment)

    @property
    def valid_then(self) -> bool:
        valid, invalid = when(self.row.get("valid_at")), when(self.row.get("invalid_at"))
        return (valid is None or valid <= self.moment) and (
            invalid is None or invalid > self.moment
        )

    @property
    def believed_invalid_at(self) -> str | None:
        """invalid_at as the system knew it then: none yet when the fact expired later."""
        expired = self.expired_at
        if expired is not None and expired > self.moment:
            return None
        return iso(self.row.get("invalid_at"))

    @property
    def not_live_then(self) -> str | None:
        """Why the fact was not live then (as `warm_context.why_not_live` says it now)."""
        expired, forgotten = self.expired_at, self.forgotten_at
        if forgotten is not None and forgotten <= self.moment:
            return "forgotten"
        if expired is not None and expired <= self.moment:
            return "expired"
        status = self.row.get("status")
        if expired is None and isinstance(status, str) and status in INVALIDATED_STATUSES:
            return status  # a status with no expiry: when it changed is not recorded
        return None

    def status_then(self) -> str | None:
        """The status then: tentative when ratified after the moment; else the snapshot's for
        a corrected fact; else today's unless the fact was retired after the moment (then
        its status then is not recorded)."""
        status = self.row.get("status")
        ratified = when(self.row.get("ratified_at"))
        if ratified is not None and ratified > self.moment:
            return "tentative"
        if self.corrected_since:
            return status if isinstance(status, str) else None
        expired = self.expired_at
        if expired is not None and expired > self.moment and status in INVALIDATED_STATUSES:
            return None
        return status if isinstance(status, str) else None

    def shown(self) -> dict[str, Any]:
        row = self.row
        ended = self.ended_at
        return {
            "uuid": row.get("uuid"),
            "source": row.get("source"),
            "name": row.get("name"),
            "target": row.get("target"),
            "fact": row.get("fact"),
            "valid_then": self.valid_then,
            "status_then": self.status_then(),
            "status_now": self.status_now,
            "created_at": iso(row.get("created_at")),
            "valid_at": iso(row.get("valid_at")),
            "invalid_at": iso(row.get("invalid_at")),
            "retired_at": ended.isoformat() if ended and ended > self.moment else None,
            "source_kind": row.get("source_kind"),
            "episode": (row.get("episodes") or [None])[0],
            "corrected_since": self.corrected_since,
            "later": self.later,
        }


def fact_state(
    current: Mapping[str, Any] | None,
    moment: datetime,
    overrides: Mapping[str, dict[str, Any] | None],
    timeline: Timeline,
    uuid: str,
) -> FactState | None:
    """The fact `uuid` at the moment: from its correction snapshot when a correction changed
    it later, else from `current` (the graph now); None when it did not exist then."""
    status_now = (current or {}).get("status")
    if uuid in overrides:
        snap = overrides[uuid]
        if snap is None:
            return None
        later = [c.shown() for c in timeline.touching(uuid, moment)]
        return FactState(
            row_from_snapshot(snap, current),
            moment,
            corrected_since=True,
            status_now=status_now if current else "deleted since",
            later=later,
        )
    if current is None:
        return None
    return FactState(dict(current), moment, status_now=status_now)


def held_uuids(states: Iterable[tuple[str, FactState | None]]) -> tuple[list[str], list[str]]:
    """(held then, not held then) of the corrected facts: the `$present` / `$absent` lists."""
    present: list[str] = []
    absent: list[str] = []
    for uuid, state in states:
        (present if state is not None and state.held else absent).append(uuid)
    return present, absent
