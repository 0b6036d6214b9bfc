"""Checkpoint ids as a clock: LangGraph's UUIDv6 ids, their time, and the scanner's floor.

LangGraph names every checkpoint ``str(uuid6(clock_seq=step))``: its first 60 bits are the
creation time in 100-ns ticks since 1582-10-15, most significant first, in lowercase hex with
hyphens at fixed places. So one checkpointer's ids sort by creation time as plain strings
(the saver finds a thread's latest with ``ORDER BY checkpoint_id DESC``), and an id can be
turned back into a time.

The scanner reads from a floor ``OVERLAP`` before its watermark (the newest id seen) and
never later than ``OVERLAP`` before the platform database's ``now()`` (`scan_floor`): an id
holds the writer's clock when the step ended, not the commit time, so a checkpoint can
become visible after a scan saw a larger id (a replica's clock behind, a late commit, an id
dated 2100). The threads in that window whose newest checkpoint is already projected are
skipped without a state read.
"""

from __future__ import annotations

import uuid
from datetime import datetime

OVERLAP_SECONDS = 300.0  # clock skew between platform replicas and late commits it tolerates
TICKS_PER_SECOND = 10_000_000  # UUID time is in 100-ns ticks
UUID_EPOCH_TICKS = 0x01B21DD213814000  # 1970-01-01 in ticks since 1582-10-15


def checkpoint_time(checkpoint_id: str) -> int | None:
    """The creation time stated by a UUIDv6 checkpoint id (100-ns ticks), None if not UUIDv6."""
    try:
        value = uuid.UUID(checkpoint_id)
    except (ValueError, TypeError, AttributeError):
        return None
    if value.version != 6 or str(value) != checkpoint_id:
        return None  # not LangGraph's format (or not in its canonical spelling): no clock
    high_and_mid = value.int >> 80  # time bits 59..12
    low = (value.int >> 64) & 0x0FFF  # time bits 11..0, after the version nibble
    return (high_and_mid << 12) | low


def floor_id(ticks: int) -> str:
    """The smallest UUIDv6 id of time ``ticks``: every id created at or after it sorts >= it."""
    ticks = max(0, ticks)
    value = ((ticks >> 12) & 0xFFFF_FFFF_FFFF) << 80
    value |= (0x6000 | (ticks & 0x0FFF)) << 64  # version 6, then the low time bits
    value |= 0x8000 << 48  # the RFC 4122 variant; clock sequence and node all zero
    return str(uuid.UUID(int=value))


def clock_ticks(moment: datetime) -> int:
    """``moment`` (timezone-aware) in UUID time: 100-ns ticks since 1582-10-15."""
    return int(moment.timestamp() * TICKS_PER_SECOND) + UUID_EPOCH_TICKS


def scan_floor(
    watermark: str, overlap_seconds: float = OVERLAP_SECONDS, *, now: datetime | None = None
) -> str:
    """Where a scan reads from: ``overlap_seconds`` before the watermark ("" reads everything),
    and never later than ``overlap_seconds`` before ``now`` (the platform database's clock).

    The watermark follows the ids seen, and one id dated ahead (up to the clock cap)
    would otherwise lift the floor past a checkpoint a replica behind writes now.
    A watermark that is not a UUIDv6 id (a checkpointer naming checkpoints
    some other way) gives no clock to step back on: every scan reads from the
    start, which is slower but loses nothing.
    """
    if not watermark:
        return ""
    ticks = checkpoint_time(watermark)
    if ticks is None:
        return ""
    if now is not None:
        ticks = min(ticks, clock_ticks(now))
    return floor_id(ticks - int(overlap_seconds * TICKS_PER_SECOND))
