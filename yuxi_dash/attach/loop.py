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
import threading
from collections.abc import Callable

from yuxi_dash.alerts.hooks import after_attach_scan
from yuxi_dash.attach.leader import ScanLeadership
from yuxi_dash.errors import YuxiDashError
from yuxi_dash.settings import Settings

log = logging.getLogger("yuxi_dash.attach")

STOP_WAIT_SECONDS = 30.0  # how long `stop` waits for a scan to wind down


def describe_failure(exc: BaseException) -> str:
    """One line for a failed scan: our typed errors carry no secret; anything else, its type."""
    if isinstance(exc, YuxiDashError):
        return f"{exc.message} [{exc.code}]"
    return type(exc).__name__  # a driver's message may quote the connection string


class ScanLoop:
    """Runs `attach.scan` every ``interval`` seconds in a daemon thread."""

    def __init__(
        self,
        settings: Settings,
        *,
        interval: float | None = None,
        report: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.interval = float(interval if interval is not None else settings.attach_scan_seconds)
        self.report = report
        self.scans = 0
        self.failures = 0
        self.leadership = ScanLeadership(settings)
        self.leading: bool | None = None  # None until the first turn
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="yuxi-dash-attach", daemon=True)

    def start(self) -> ScanLoop:
        self._thread.start()
        return self

    def stop(self, wait_seconds: float = STOP_WAIT_SECONDS) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(wait_seconds)

    def scan_once(self) -> None:
        from yuxi_dash.attach.scanner import scan

        try:
            result = scan(self.settings, should_stop=self._stop.is_set)
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

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                leading = self.leadership.lead()
                self._note_role(leading)
                if leading:
                    self.scan_once()
                if self._stop.wait(self.interval):
                    return
        finally:
            self.leadership.release()  # another replica takes the scan on its next turn

    def _note_role(self, leading: bool) -> None:
        if leading == self.leading:
            return
        self.leading = leading
        if self.leadership.unavailable:
            return  # not "another replica": the leadership logged that the database is down
        if self.report is not None and self.leadership.needs_lock:
            self.report(
                "this replica runs the attach scan"
                if leading
                else "another replica runs the attach scan; this one takes over if it stops"
            )
