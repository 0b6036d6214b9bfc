"""The alert pass on a timer, for `yuxi-dash serve`: a background thread until serve stops.

`AlertLoop` runs one evaluation pass with delivery every
``alert_evaluate_seconds`` (from the end of one pass to the start of the
next). It is what makes time count: a pending alert whose ``for_seconds``
has elapsed fires on the next pass without any new usage write, and it is
the only place (besides `yuxi-dash alerts evaluate`) where Alertmanager is
posted and the webhook outbox drained: the hooks after a write only write.
Those posts take at most ``alert_deadline_seconds`` per channel (`alerts.delivery`),
so a slow receiver cannot stall the loop.
With several replicas on one PostgreSQL store, one at a time runs the pass:
the one holding the session-level advisory lock `ALERT_LOOP_KEY`
(`attach.leader.ScanLeadership`, a key of its own, so it may be another
replica than the scan's). A failed pass is one log line with the error's type.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable

from yuxi_dash.alerts.evaluate import EvaluationReport, evaluate
from yuxi_dash.alerts.hooks import anything_to_do
from yuxi_dash.attach.leader import ScanLeadership
from yuxi_dash.background import BackgroundLoop
from yuxi_dash.settings import Settings

log = logging.getLogger(__name__)

ALERT_LOOP_KEY = int.from_bytes(
    hashlib.sha256(b"yuxi-dash alert pass").digest()[:8], "big", signed=True
)


class AlertLoop(BackgroundLoop):
    """Runs `evaluate` (with delivery) every ``interval`` seconds, on the leading replica."""

    job = "the alert pass"

    def __init__(
        self,
        settings: Settings,
        *,
        interval: float | None = None,
        report: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(
            interval if interval is not None else settings.alert_evaluate_seconds,
            thread_name="yuxi-dash-alerts",
            report=report,
            leadership=ScanLeadership(settings, key=ALERT_LOOP_KEY, label="alert pass"),
        )
        self.settings = settings
        self.passes = 0
        self.last: EvaluationReport | None = None

    def run_once(self) -> None:
        """One pass with delivery, if there is a rule, an alert or an unsent notice."""
        try:
            if not anything_to_do(self.settings):
                return
            self.last = evaluate(self.settings)
        except Exception as exc:  # noqa: BLE001 - a failed pass is one line; the next one retries
            self.failures += 1
            log.warning("alert pass failed: %s", type(exc).__name__)
            return
        self.passes += 1
