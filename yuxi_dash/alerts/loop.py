"""The alert pass on a timer, for `yuxi-dash serve`: a background thread until serve stops.

`AlertLoop` runs one evaluation pass with delivery every
``alert_evaluate_seconds`` (from the end of one pass to the start of the
next). It is what makes time count: a pending alert whose ``for_seconds``
has elapsed fires on the next pass without any new usage write, and it is
the only place (besides `yuxi-dash alerts evaluate`) where Alertmanager is
posted and the webhook outbox drained: the hooks after a write only write.
With several replicas on one PostgreSQL store, one at a time runs the pass:
the one holding the session-level advisory lock `ALERT_LOOP_KEY`
(`attach.leader.ScanLeadership`, a key of its own, so it may be another
replica than the scan's). A failed pass is one log line with the error's type.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable

from yuxi_dash.alerts.evaluate import EvaluationReport, evaluate
from yuxi_dash.alerts.hooks import anything_to_do
from yuxi_dash.attach.leader import ScanLeadership
from yuxi_dash.settings import Settings

log = logging.getLogger(__name__)

ALERT_LOOP_KEY = int.from_bytes(
    hashlib.sha256(b"yuxi-dash alert pass").digest()[:8], "big", signed=True
)
STOP_WAIT_SECONDS = 30.0  # how long `stop` waits for a pass (and its sends) to end


class AlertLoop:
    """Runs `evaluate` (with delivery) every ``interval`` seconds in a daemon thread."""

    def __init__(
        self,
        settings: Settings,
        *,
        interval: float | None = None,
        report: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.interval = float(interval if interval is not None else settings.alert_evaluate_seconds)
        self.report = report
        self.passes = 0
        self.failures = 0
        self.last: EvaluationReport | None = None
        self.leadership = ScanLeadership(settings, key=ALERT_LOOP_KEY, label="alert pass")
        self.leading: bool | None = None  # None until the first turn
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="yuxi-dash-alerts", daemon=True)

    def start(self) -> AlertLoop:
        self._thread.start()
        return self

    def stop(self, wait_seconds: float = STOP_WAIT_SECONDS) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(wait_seconds)

    def pass_once(self) -> None:
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

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                leading = self.leadership.lead()
                self._note_role(leading)
                if leading:
                    self.pass_once()
                if self._stop.wait(self.interval):
                    return
        finally:
            self.leadership.release()  # another replica takes the pass on its next turn

    def _note_role(self, leading: bool) -> None:
        if leading == self.leading:
            return
        self.leading = leading
        if self.leadership.unavailable:
            return
        if self.report is not None and self.leadership.needs_lock:
            self.report(
                "this replica runs the alert pass"
                if leading
                else "another replica runs the alert pass; this one takes over if it stops"
            )
