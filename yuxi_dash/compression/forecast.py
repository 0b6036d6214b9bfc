"""When a thread's next model input crosses 85% and 100% of its summary trigger: `forecast`.

Pure: it reads a thread's usage snapshots (any objects with ``measured_at``,
``next_llm_input_tokens``, ``summary_trigger_tokens`` and ``source``, oldest first)
and touches no database. Growth is measured from the model-call snapshots since the
thread's last compression (a ``manual_compression`` or ``auto_compaction`` snapshot
resets it): the mean tokens added per model call, and the mean time between those
calls. ``turns_to_85`` is how many more model calls until the next input is at 85%
of the trigger (0: it already is); the seconds are those turns times the mean
interval, counted from the newest model call, or from ``now`` when given: less the time
since that call, never below 0 (the turns do not change while a thread is idle; only the
time estimate does). Fewer than `MIN_MODEL_CALLS` model calls since the last compression, or no
growth, gives None with a `forecast_note` saying why instead of a guess.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from yuxi_dash.printable_record import Record
from yuxi_dash.usage import SUGGESTION_RATIO, summary_pressure_ratio

MIN_MODEL_CALLS = 3  # model-call snapshots since the last compression: two growth steps
RESETTING_SOURCES = frozenset({"manual_compression", "auto_compaction"})
MODEL_CALL = "model_call"
TOO_LITTLE_HISTORY = "too little history since the last compression to forecast"
NO_GROWTH = "not growing since the last compression: no crossing to forecast"
NO_TRIGGER = "no summary trigger to forecast against"
NO_TIME = "the recorded model calls share one time: turns only"


class SnapshotLike(Protocol):
    """The fields of a `usage_snapshots` row that a forecast reads."""

    @property
    def measured_at(self) -> datetime: ...
    @property
    def next_llm_input_tokens(self) -> int: ...
    @property
    def summary_trigger_tokens(self) -> int: ...
    @property
    def source(self) -> str: ...


@dataclass(frozen=True)
class Forecast(Record):
    """Model calls (and seconds) until the next input reaches 85% and 100% of the trigger."""

    turns_to_85: int | None
    turns_to_100: int | None
    seconds_to_85: int | None
    seconds_to_100: int | None
    forecast_note: str | None  # why a figure is None; None when every figure is given


def forecast(
    snapshots: Sequence[SnapshotLike],
    *,
    next_tokens: int | None = None,
    trigger_tokens: int | None = None,
    now: datetime | None = None,
) -> Forecast:
    """The forecast of one thread from its snapshots, oldest first.

    ``next_tokens`` and ``trigger_tokens`` are the thread's current figures (its row's);
    by default the newest snapshot's. With ``now``, the seconds count from it.
    """
    newest = snapshots[-1] if snapshots else None
    current = next_tokens if next_tokens is not None else _field(newest, "next_llm_input_tokens")
    trigger = (
        trigger_tokens if trigger_tokens is not None else _field(newest, "summary_trigger_tokens")
    )
    if current is None:
        return Forecast(None, None, None, None, TOO_LITTLE_HISTORY)
    if not trigger or trigger <= 0:
        return Forecast(None, None, None, None, NO_TRIGGER)
    calls = _model_calls_since_compression(snapshots)
    growth = calls[-1].next_llm_input_tokens - calls[0].next_llm_input_tokens if calls else 0
    note: str | None = None
    if len(calls) < MIN_MODEL_CALLS:
        note = TOO_LITTLE_HISTORY
    elif growth <= 0:
        note = NO_GROWTH
    steps = len(calls) - 1
    span = (calls[-1].measured_at - calls[0].measured_at).total_seconds() if calls else 0.0
    idle = 0  # seconds since the newest model call, when counted from now
    if now is not None and calls:
        idle = max(0, int((now - calls[-1].measured_at).total_seconds()))
    figures: list[tuple[int | None, int | None]] = []
    for percent in (round(SUGGESTION_RATIO * 100), 100):
        if summary_pressure_ratio(current, trigger) >= percent / 100:
            figures.append((0, 0))  # already there: the very next call is at or above it
            continue
        if note is not None:
            figures.append((None, None))
            continue
        # smallest k with current + k * growth / steps >= trigger * percent / 100, in integers
        short = trigger * percent - 100 * current
        turns = -(-short * steps // (100 * growth))
        seconds = max(0, round(turns * span / steps) - idle) if span > 0 else None
        figures.append((turns, seconds))
    (turns_85, seconds_85), (turns_100, seconds_100) = figures
    if turns_100 == 0:
        note = None  # at or above 100% already: nothing is left to forecast
    elif note is None and seconds_100 is None:
        note = NO_TIME
    return Forecast(turns_85, turns_100, seconds_85, seconds_100, note)


def _model_calls_since_compression(snapshots: Sequence[SnapshotLike]) -> list[SnapshotLike]:
    """The model-call snapshots after the newest compression, oldest first."""
    calls: list[SnapshotLike] = []
    for row in snapshots:
        if row.source in RESETTING_SOURCES:
            calls = []
        elif row.source == MODEL_CALL:
            calls.append(row)
    return calls


def _field(row: SnapshotLike | None, name: str) -> int | None:
    return None if row is None else int(getattr(row, name))
