"""The one-line calls that keep alerts current: after a usage write, after an attach scan.

Both run an evaluation pass (and its delivery) and never raise: an alerting
failure is one log line with the error's type, never a failed compress or
scan. `after_attach_scan` also records how long the scan took (``scan_timings``,
read by /metrics).
"""

from __future__ import annotations

import logging
from typing import Protocol

import sqlalchemy as sa

from yuxi_dash.alerts.evaluate import evaluate
from yuxi_dash.settings import Settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AlertRule, AlertState, ScanTiming, utcnow

log = logging.getLogger(__name__)


class ScanFigures(Protocol):
    """What the hook reads of a scan's report (`attach.scanner.ScanReport`)."""

    @property
    def source(self) -> str: ...
    @property
    def seconds(self) -> float: ...
    @property
    def projected(self) -> int: ...


def _anything_to_do(settings: Settings) -> bool:
    with session_scope(settings) as session:
        return bool(
            session.scalar(sa.select(AlertRule.id).limit(1))
            or session.scalar(sa.select(AlertState.id).limit(1))
        )


def evaluate_quietly(settings: Settings) -> None:
    """One evaluation pass; a failure is logged, never raised."""
    try:
        if _anything_to_do(settings):
            evaluate(settings)
    except Exception as exc:  # noqa: BLE001 - alerting must not fail the write it follows
        log.warning("alert evaluation failed: %s", type(exc).__name__)


def after_usage_write(settings: Settings) -> None:
    """After a usage write of one of our own threads (a compress, a projection) committed."""
    evaluate_quietly(settings)


def after_attach_scan(settings: Settings, report: ScanFigures) -> None:
    """After an attach scan: its timing, then an evaluation of the platform's threads."""
    try:
        with session_scope(settings) as session:
            row = session.get(ScanTiming, report.source)
            if row is None:
                row = ScanTiming(source=report.source)
                session.add(row)
            row.seconds = float(report.seconds)
            row.projected = int(report.projected)
            row.finished_at = utcnow()
    except Exception as exc:  # noqa: BLE001
        log.warning("could not record the scan timing: %s", type(exc).__name__)
    evaluate_quietly(settings)
