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
the one holding the session-level advisory lock `ALERT_LOOP_KEY` (`leader`,
a key of its own, so it may be another replica than the scan's). A failed
pass is one log line with the error's type (`background`).
"""

from __future__ import annotations

import logging

from yuxi_dash.alerts.evaluate import EvaluationReport, evaluate
from yuxi_dash.alerts.hooks import anything_to_do
from yuxi_dash.background import BackgroundLoop
from yuxi_dash.leader import lock_key

ALERT_LOOP_KEY = lock_key("yuxi-dash alert pass")


class AlertLoop(BackgroundLoop):
    """Runs `evaluate` (with delivery) every ``interval`` seconds, on the leading replica."""

    name = "alert pass"
    thread_name = "yuxi-dash-alerts"
    period_setting = "alert_evaluate_seconds"
    lock_key = ALERT_LOOP_KEY
    failure_detail = "type"
    log = logging.getLogger(__name__)

    passes = 0  # the evaluations run (a turn with nothing to do is none)
    last: EvaluationReport | None = None

    def one_pass(self) -> None:
        """One pass with delivery, if there is a rule, an alert or an unsent notice."""
        if not anything_to_do(self.settings):
            return
        self.last = evaluate(self.settings)
        self.passes += 1
