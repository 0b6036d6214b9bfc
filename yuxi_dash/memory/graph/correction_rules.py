"""The rules of a memory correction, with no I/O: typed refusals, input checks, edge changes.

- Refusals (classes in yuxi_dash/errors.py): `invalid_fact_uuid`, `reason_required`, `invalid_ticket` (exit 2);
  `fact_not_found`, `correction_not_found` (exit 3); the `correction_conflict`
  family (`already_invalidated`, `not_invalidated`, `not_tentative`,
  `already_undone`, `not_undoable`, `fact_busy`, `stale_fact`: 409, exit 4);
  `index_drift` (repair the indexes first); `not_your_correction` (403, exit 1).
- A fact uuid is 1-64 letters, digits, '-' or '_'. A reason has at least 3 words
  and 15 characters (at most 1,000). A ticket is like `SUP-1234` (at most 64
  characters of ``[A-Za-z0-9_.:#/-]``, starting with a letter or digit).
- `snapshot` / `edge_from_snapshot` turn an `EntityEdge` into JSON with every
  property (the embedding too) and back, so an undo restores the exact edge.
- `retracted`, `rejected`, `restored`, `superseded` change edges as Graphiti
  invalidates (invalid_at, expired_at = now), with the ratification status.
"""

from __future__ import annotations

import re
import uuid as uuid_lib
from datetime import UTC, datetime
from typing import Any

from graphiti_core.edges import EntityEdge

from yuxi_dash import validation
from yuxi_dash.errors import (
    AlreadyInvalidated,
    InvalidFactUuid,
    InvalidInput,
    InvalidTicket,
    NotInvalidated,
    NotTentative,
    ReasonRequired,
)

ACTIONS = ("retract", "supersede", "restore", "reject")
UNDO = "undo"
INVALIDATED_STATUSES = frozenset({"superseded", "contradicted", "retracted", "rejected"})
MIN_REASON_WORDS = 3
MIN_REASON_CHARS = 15
MAX_REASON_CHARS = 1000
MAX_FACT_CHARS = 2000
OPERATOR_SOURCE_KIND = "operator_corrected"

_FACT_UUID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_TICKET = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:#/-]{0,63}")
_DATETIME_FIELDS = ("created_at", "expired_at", "valid_at", "invalid_at", "reference_time")


# --- input ------------------------------------------------------------------
def fact_uuid(value: Any) -> str:
    """A fact (EntityEdge) uuid: 1..64 letters, digits, '-' or '_'; InvalidFactUuid otherwise.

    graphiti-core writes uuid4 strings; other writers' ids of the same alphabet are accepted
    as they are (ids are matched exactly, never case-folded)."""
    if not isinstance(value, str) or not _FACT_UUID.fullmatch(value):
        raise InvalidFactUuid("the fact uuid must be 1-64 letters, digits, '-' or '_'")
    return value


def reason(value: Any) -> str:
    """A reason of at least 3 words and 15 characters (stripped), at most 1,000."""
    text = validation.text(value, "the reason", limit=MAX_REASON_CHARS)
    text = " ".join(text.split())
    if len(text) < MIN_REASON_CHARS or len(text.split(" ")) < MIN_REASON_WORDS:
        raise ReasonRequired(
            f"give a reason of at least {MIN_REASON_WORDS} words and {MIN_REASON_CHARS} characters"
        )
    return text


def ticket(value: Any) -> str | None:
    """An optional ticket reference (None or empty: none)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str) or not _TICKET.fullmatch(value.strip()):
        raise InvalidTicket(
            "a ticket is up to 64 letters, digits and _ . : # / - (e.g. SUP-1234), "
            "starting with a letter or digit"
        )
    return value.strip()


def fact_text(value: Any, old: str) -> str:
    """The corrected fact text: storable, 1..2,000 characters, different from the old one."""
    text = validation.text(value, "the corrected fact", limit=MAX_FACT_CHARS, required=True)
    text = text.strip()
    if text == (old or "").strip():
        raise InvalidInput("the corrected fact is the same as the current one")
    return text


# --- snapshots ----------------------------------------------------------------
def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def snapshot(edge: EntityEdge) -> dict[str, Any]:
    """Every property of the edge as JSON (datetimes ISO, the embedding as a list)."""
    return {
        "uuid": edge.uuid,
        "source_node_uuid": edge.source_node_uuid,
        "target_node_uuid": edge.target_node_uuid,
        "name": edge.name,
        "fact": edge.fact,
        "group_id": edge.group_id,
        "episodes": list(edge.episodes),
        "created_at": _iso(edge.created_at),
        "expired_at": _iso(edge.expired_at),
        "valid_at": _iso(edge.valid_at),
        "invalid_at": _iso(edge.invalid_at),
        "reference_time": _iso(edge.reference_time),
        "attributes": _plain(dict(edge.attributes or {})),
        "fact_embedding": [float(x) for x in edge.fact_embedding]
        if edge.fact_embedding is not None
        else None,
    }


def comparable(snap: dict[str, Any] | None) -> dict[str, Any] | None:
    """A snapshot without the embedding (float32 storage may round it): for staleness checks."""
    if snap is None:
        return None
    return {k: v for k, v in snap.items() if k != "fact_embedding"}


def edge_from_snapshot(snap: dict[str, Any]) -> EntityEdge:
    fields = dict(snap)
    for key in _DATETIME_FIELDS:
        value = fields.get(key)
        fields[key] = datetime.fromisoformat(value) if value else None
    return EntityEdge(**fields)


# --- the changes ----------------------------------------------------------------
def is_invalidated(edge: EntityEdge) -> bool:
    status = str((edge.attributes or {}).get("status") or "")
    return (
        edge.invalid_at is not None or edge.expired_at is not None or status in INVALIDATED_STATUSES
    )


def _invalidated(edge: EntityEdge, now: datetime, status: str, stamp_key: str) -> EntityEdge:
    changed = edge.model_copy(deep=True)
    changed.invalid_at = edge.invalid_at or now
    changed.expired_at = now
    changed.attributes = {**(edge.attributes or {}), "status": status, stamp_key: now.isoformat()}
    return changed


def retracted(edge: EntityEdge, now: datetime) -> EntityEdge:
    if is_invalidated(edge):
        raise AlreadyInvalidated("the fact is already invalidated; nothing to retract")
    return _invalidated(edge, now, "retracted", "retracted_at")


def rejected(edge: EntityEdge, now: datetime) -> EntityEdge:
    if str((edge.attributes or {}).get("status") or "") != "tentative":
        raise NotTentative("only a tentative fact can be rejected")
    if edge.expired_at is not None:
        raise AlreadyInvalidated("the fact is already invalidated; nothing to reject")
    return _invalidated(edge, now, "rejected", "rejected_at")


def restored(edge: EntityEdge, now: datetime) -> EntityEdge:
    if not is_invalidated(edge):
        raise NotInvalidated("the fact is not invalidated; nothing to restore")
    changed = edge.model_copy(deep=True)
    changed.invalid_at = None
    changed.expired_at = None
    changed.attributes = {
        **(edge.attributes or {}),
        "status": "active",
        "restored_at": now.isoformat(),
    }
    return changed


def superseded(edge: EntityEdge, text: str, now: datetime) -> tuple[EntityEdge, EntityEdge]:
    """(the old edge invalidated and naming its successor, the new edge naming the old).

    The dashboard has no embedder: the new fact carries the old fact's embedding
    until the platform embeds it again (`embedding_from` says so).
    """
    if is_invalidated(edge):
        raise AlreadyInvalidated("the fact is already invalidated; restore it first")
    new = EntityEdge(
        uuid=str(uuid_lib.uuid4()),
        source_node_uuid=edge.source_node_uuid,
        target_node_uuid=edge.target_node_uuid,
        name=edge.name,
        fact=text,
        group_id=edge.group_id,
        episodes=[],
        created_at=now,
        valid_at=now,
        reference_time=now,
        fact_embedding=list(edge.fact_embedding) if edge.fact_embedding is not None else None,
        attributes={
            "status": "active",
            "source_kind": OPERATOR_SOURCE_KIND,
            "supersedes": edge.uuid,
            "embedding_from": edge.uuid,
        },
    )
    old = edge.model_copy(deep=True)
    old.invalid_at = now
    old.expired_at = now
    old.attributes = {
        **(edge.attributes or {}),
        "status": "superseded",
        "superseded_by": new.uuid,
        "superseded_at": now.isoformat(),
    }
    return old, new


def utc_now() -> datetime:
    """Now, to the microsecond, as graphiti-core's own `utc_now` gives it."""
    return datetime.now(UTC)
