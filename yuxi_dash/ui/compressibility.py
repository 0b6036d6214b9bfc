"""Why a thread can or cannot be compressed now, counted and said the same on every page.

`compress_blocker` is the reason a page shows where the button would be; `blocked_kind`
sorts a row into a kind (deleted, cannot here, busy) so the 85% list's counts add up
(`hidden_line`); `cannot_compress_line` and `attached_note` are the captions. An attached
thread with a platform endpoint set is the platform's to judge.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.store.origin import ROUTE_NONE, ROUTE_PLATFORM
from yuxi_dash.ui.page_text import text_or_none
from yuxi_dash.wording import attached_label


def compress_blocker(row: Mapping[str, Any], actor: Actor) -> str | None:
    """Why the compress action cannot succeed for this thread row (None: it may).

    The page disables the button with this reason; the service still decides.
    """
    if actor.role < Role.OPERATOR:
        return f"needs the operator role ({actor.id} is {actor.role.label})"
    if row.get("status") == "deleted":
        return "thread is deleted"
    if row.get("attached"):  # the platform decides: its busy check and capability are its own
        return text_or_none(row.get("platform_blocker"))
    if not row.get("capable"):
        return f"agent {row.get('agent_slug')} does not support context compression"
    reason = text_or_none(row.get("busy_reason"))
    if reason:
        return f"thread is busy ({reason})"
    return None


def blocked_kind(row: Mapping[str, Any]) -> str | None:
    """Why a thread cannot be compressed now, as a kind (the actor's role aside): "deleted";
    "here" when it cannot be compressed from this dashboard at all (its agent does not support
    context compression, or an attached platform's thread with no platform endpoint set, or one
    the platform refused as unsupported); "busy" (running, queued or interrupted: wait);
    None when it can be. An attached thread with the endpoint set is the platform's to judge.
    """
    if row.get("status") == "deleted":
        return "deleted"
    if row.get("attached"):
        if row.get("compress_route") == ROUTE_NONE:
            return "no_endpoint"
        return "unsupported" if text_or_none(row.get("platform_blocker")) else None
    if not row.get("capable"):
        return "unsupported"
    return "busy" if text_or_none(row.get("busy_reason")) else None


HERE_KINDS = ("unsupported", "no_endpoint", "deleted")  # cannot be compressed from here at all


def hidden_line(kinds: Mapping[str, int], *, role_blocked: int = 0) -> str | None:
    """What the threads hidden by "Can compress now" are, so the figures add up:
    "30 threads that cannot be compressed now are hidden: 27 cannot be compressed here and
    3 are busy (running, queued or interrupted) …". None when nothing is hidden."""
    here = sum(kinds.get(kind, 0) for kind in HERE_KINDS)
    busy = kinds.get("busy", 0)
    total = here + busy + role_blocked
    if not total:
        return None
    parts = []
    if role_blocked:
        parts.append(f"{role_blocked:,} need the operator role to compress")
    if here:
        no_endpoint = kinds.get("no_endpoint", 0)
        parts.append(
            f"{here:,} cannot be compressed here"
            + (
                f" ({no_endpoint:,} attached with no platform endpoint: set YUXI_DASH_PLATFORM_URL)"
                if no_endpoint
                else ""
            )
        )
    if busy:
        parts.append(
            f"{busy:,} {'is' if busy == 1 else 'are'} busy (running, queued or interrupted)"
        )
    made_of = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return (
        f"{total:,} threads that cannot be compressed now are hidden: {made_of}. "
        "Turn off “Can compress now” to see them."
    )


def attached_note(platform: str | None, *, route: str) -> str:
    """What thread detail says of an attached platform's thread (``route``: `store.origin`)."""
    how = (
        "a compress is sent to the platform's endpoint"
        if route == ROUTE_PLATFORM
        else "set YUXI_DASH_PLATFORM_URL to compress it through the platform"
    )
    return f"{attached_label(platform)}: the platform owns this thread; {how}"


def cannot_compress_line(
    unsupported: int, attached: Mapping[str, int], deleted: int = 0
) -> str | None:
    """The threads of a list that cannot be compressed here (`blocked_kind` in `HERE_KINDS`),
    counted together, with why; busy threads are not among them (they can be, later).

    ``attached`` counts the attached threads no platform endpoint is set for, per
    `attached_label`; None when there are none.
    """
    total = unsupported + sum(attached.values()) + deleted
    if not total:
        return None
    parts = []
    if unsupported:
        parts.append(f"{unsupported:,} because their agent does not support context compression")
    parts.extend(f"{n:,} {label} (its platform compresses them)" for label, n in attached.items())
    if deleted:
        parts.append(f"{deleted:,} deleted")
    return f"{total:,} of these threads cannot be compressed here: {'; '.join(parts)}."
