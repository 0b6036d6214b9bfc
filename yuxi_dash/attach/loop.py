"""The scan on a timer, for `yuxi-dash serve`: a background thread until serve stops.

`ScanLoop` scans once at start and then every ``attach_scan_seconds``
(measured from the end of one scan to the start of the next, so a long first
scan never piles up behind itself). A scan that fails is one log line with
the error's code and its message, which names the platform by its label
only (never the URL or password), and the loop carries on (`background`).
`stop()` asks a running scan to stop: no new stretch starts, the ones under way
finish (`attach.scan_workers`); the watermark it stored says how far it got.

With several `serve` replicas on one PostgreSQL store, only the one holding the
scan lock `SCAN_LOCK_KEY` scans (`leader`); the others check every interval and
take over when it stops. A change of role is one line through `report`.
"""

from __future__ import annotations

import logging

from yuxi_dash.alerts.hooks import after_attach_scan
from yuxi_dash.background import BackgroundLoop
from yuxi_dash.leader import lock_key

SCAN_LOCK_KEY = lock_key("yuxi-dash attach scan")


class ScanLoop(BackgroundLoop):
    """Runs `attach.scan` every ``interval`` seconds in a daemon thread, on the leading replica."""

    name = "attach scan"
    thread_name = "yuxi-dash-attach"
    period_setting = "attach_scan_seconds"
    lock_key = SCAN_LOCK_KEY
    failure_detail = "message"
    log = logging.getLogger("yuxi_dash.attach")

    @property
    def scans(self) -> int:
        """The scans that ended."""
        return self.runs

    def one_pass(self) -> None:
        from yuxi_dash.attach.scanner import scan

        result = scan(self.settings, should_stop=self.stopping)
        after_attach_scan(self.settings, result)  # alerts: the platform's threads moved
        if self.report is not None and (self.runs == 0 or result.failed or result.quarantined):
            self.report(
                f"attached platform {result.source}: {result.projected} threads projected, "
                f"{result.attached_threads} attached, {result.conflicts} conflicts, "
                f"{result.failed} failed, {result.quarantined} quarantined "
                f"({result.seconds:.2f} s)"
            )
