"""The measure of the alert rule kind ``forecast_crossing``: the minutes from now until a
thread's next model input is forecast to reach 100% of its summary trigger
(`compression.forecast`, read through `store.thread_list.active_forecasts`), so an operator
can compress it at its next idle moment.

A rule of this kind fires at or below ``fire_at`` minutes (its horizon) and resolves only
above ``clear_at`` minutes, or when the thread has no forecast any more: a compression resets
its growth (too little history since), or it has been idle longer than the rule's
`gate_minutes` (off its recorded pace). A thread at or over 100% measures 0 until then. The
minutes count from now at the pace recorded since its last compression: the time since its
newest model call is taken off, never below 0. `candidates` forecasts only the threads in a
rule's scope measured within its horizon, the `CANDIDATES_MAX` most pressured of them;
`live_minutes` reads the measure of the threads that have alerts, gated the same way (the
pass, the Alerts page, Alertmanager's annotation).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash.store.models import Conversation
from yuxi_dash.store.thread_list import active_forecasts

CANDIDATES_MAX = 2000  # threads one rule forecasts per pass: the most pressured active ones
MAX_HORIZON_MINUTES = 1440.0  # a rule's fire_at and clear_at, in minutes: at most a day
DEFAULT_HORIZON_MINUTES = 60.0


def minutes_to_threshold(forecast: dict[str, Any]) -> float | None:
    """Minutes until 100% from a `compression.forecast` (0: at or over it; None: no forecast
    or no time between the recorded calls). From now when the forecast was made from now."""
    if forecast.get("turns_to_100") == 0:
        return 0.0
    seconds = forecast.get("seconds_to_100")
    return None if seconds is None else round(float(seconds) / 60, 2)


def gate_minutes(fire_at: float, clear_at: float) -> float:
    """How recently a thread must have been measured for a rule to measure it at all: its
    horizon, or its clear_at if wider (a firing alert is held until then)."""
    return max(float(fire_at), float(clear_at))


@dataclass(frozen=True)
class Candidates:
    """`candidates`: (thread id, minutes, trigger tokens, agent, origin, status) rows."""

    rows: list[tuple[str, float, int, str, str, str]]
    capped: bool  # more threads were active than CANDIDATES_MAX: the most pressured were read


def candidates(
    session: Session,
    horizon_minutes: float,
    where: Sequence[sa.ColumnElement[bool]],
    *,
    now: datetime,
) -> Candidates:
    """The threads matching ``where`` forecast to reach 100% within ``horizon_minutes`` of
    ``now``; only those measured within the horizon (`active_forecasts`)."""
    since = now - timedelta(minutes=float(horizon_minutes))
    found = active_forecasts(session, where, since=since, now=now, limit=CANDIDATES_MAX)
    rows = []
    for row in found.rows:
        minutes = minutes_to_threshold(found.forecasts[row.thread_id])
        if minutes is not None and minutes <= horizon_minutes:
            rows.append(
                (
                    row.thread_id,
                    minutes,
                    int(row.summary_trigger_tokens),
                    row.agent_slug,
                    row.origin,
                    row.status,
                )
            )
    return Candidates(rows=rows, capped=found.more)


def live_minutes(
    session: Session, wanted: Collection[tuple[str, float]], *, now: datetime
) -> dict[tuple[str, float], float]:
    """``(thread_id, gate) -> minutes to 100%`` from now, for each asked (thread, gate in
    minutes: `gate_minutes`) whose thread has a forecast and was measured within the gate (a
    deleted, gone, idle or unforecastable thread is left out). One read per distinct gate."""
    gates: dict[float, set[str]] = {}
    for thread_id, gate in wanted:
        gates.setdefault(float(gate), set()).add(thread_id)
    out: dict[tuple[str, float], float] = {}
    for gate, ids in gates.items():
        found = active_forecasts(
            session,
            [Conversation.thread_id.in_(sorted(ids)), Conversation.status != "deleted"],
            since=now - timedelta(minutes=gate),
            now=now,
            limit=len(ids),
        )
        for row in found.rows:
            minutes = minutes_to_threshold(found.forecasts[row.thread_id])
            if minutes is not None:
                out[(row.thread_id, gate)] = minutes
    return out
