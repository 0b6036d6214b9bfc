"""The one-line calls that keep alerts current: after a usage write, after an attach scan.

Both run an evaluation pass that only writes: state rows, audit rows and
outbox rows, in one transaction. Nothing here sends anything: Alertmanager
and the webhook are reached from the background pass (`alerts.loop`, in
`yuxi-dash serve`) or `yuxi-dash alerts evaluate`, so a slow or unreachable
receiver never holds a compress, a finished run, an import or a scan. The
hooks never raise: an alerting failure is one log line with the error's
type. `after_attach_scan` also records how long the scan took
(``scan_timings``, read by /metrics).
"""

from __future__ import annotations

import logging
from typing import Protocol

import sqlalchemy as sa

from yuxi_dash.alerts.evaluate import evaluate
from yuxi_dash.settings import Settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AlertOutbox, AlertRule, AlertState, ScanTiming, utcnow

log = logging.getLogger(__name__)

HOOK_WAIT_SECONDS = (
    5.0  # a write waits this long at most for a running pass; the next pass catches up
)


class ScanFigures(Protocol):
    """What the hook reads of a scan's report (`attach.scanner.ScanReport`)."""

    @property
    def source(self) -> str: ...
    @property
    def seconds(self) -> float: ...
    @property
    def projected(self) -> int: ...


def anything_to_do(settings: Settings) -> bool:
    """A rule, an alert or an unsent notice exists (else a pass has nothing to read or send)."""
    with session_scope(settings) as session:
        return bool(
            session.scalar(sa.select(AlertRule.id).limit(1))
            or session.scalar(sa.select(AlertState.id).limit(1))
            or session.scalar(
                sa.select(AlertOutbox.id).where(AlertOutbox.sent_at.is_(None)).limit(1)
            )
        )


def evaluate_quietly(settings: Settings, thread_id: str | None = None) -> None:
    """One evaluation pass (of one thread, if named) that sends nothing; failures are logged."""
    try:
        if anything_to_do(settings):
            evaluate(settings, deliver=False, wait_seconds=HOOK_WAIT_SECONDS, thread_id=thread_id)
    except Exception as exc:  # noqa: BLE001 - alerting must not fail the write it follows
        log.warning("alert evaluation failed: %s", type(exc).__name__)


def after_usage_write(settings: Settings, thread_id: str | None = None) -> None:
    """After a usage write of one of our own threads (a compress, a run, an import) committed.

    With ``thread_id``, only that thread's alerts are evaluated (the others did not move).
    """
    evaluate_quietly(settings, thread_id)


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
