"""The scan on a timer, for `yuxi-dash serve`: a background thread until serve stops.

`ScanLoop` scans once at start and then every ``attach_scan_seconds``
(measured from the end of one scan to the start of the next, so a long first
scan never piles up behind itself). A scan that fails is one log line with
the error's code and its message, which names the platform by its label
only (never the URL or password), and the loop carries on. `stop()` asks a
running scan to stop between two threads; the watermark it stored says how
far it got.

With several `serve` replicas on one PostgreSQL store, only the one holding the
scan lock scans (`attach.leader`); the others check every interval and take
over when it stops. A change of role is one line through `report`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from yuxi_dash.alerts.hooks import after_attach_scan
from yuxi_dash.attach.leader import ScanLeadership
from yuxi_dash.background import BackgroundLoop
from yuxi_dash.errors import YuxiDashError
from yuxi_dash.settings import Settings

log = logging.getLogger("yuxi_dash.attach")


def describe_failure(exc: BaseException) -> str:
    """One line for a failed scan: our typed errors carry no secret; anything else, its type."""
    if isinstance(exc, YuxiDashError):
        return f"{exc.message} [{exc.code}]"
    return type(exc).__name__  # a driver's message may quote the connection string


class ScanLoop(BackgroundLoop):
    """Runs `attach.scan` every ``interval`` seconds in a daemon thread, on the leading replica."""

    job = "the attach scan"

    def __init__(
        self,
        settings: Settings,
        *,
        interval: float | None = None,
        report: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(
            interval if interval is not None else settings.attach_scan_seconds,
            thread_name="yuxi-dash-attach",
            report=report,
            leadership=ScanLeadership(settings),
        )
        self.settings = settings
        self.scans = 0

    def run_once(self) -> None:
        from yuxi_dash.attach.scanner import scan

        try:
            result = scan(self.settings, should_stop=self.stopping)
        except Exception as exc:  # noqa: BLE001 - a failed scan is one line; the next one retries
            self.failures += 1
            log.warning("attach scan failed: %s", describe_failure(exc))
            return
        self.scans += 1
        after_attach_scan(self.settings, result)  # alerts: the platform's threads moved
        if self.report is not None and (self.scans == 1 or result.failed or result.quarantined):
            self.report(
                f"attached platform {result.source}: {result.projected} threads projected, "
                f"{result.attached_threads} attached, {result.conflicts} conflicts, "
                f"{result.failed} failed, {result.quarantined} quarantined "
                f"({result.seconds:.2f} s)"
            )
