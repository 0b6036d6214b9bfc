"""A job on a timer in a daemon thread, for `yuxi-dash serve`: the attach scan, the alert pass, the sweep.

Rules:
- `run_once` is the job; a subclass catches its own failures (one log line) so
  the loop carries on. The next run starts ``interval`` seconds after the last
  one ended; with ``first_run_now`` False the first run waits one interval too.
- With a `ScanLeadership`, a replica runs the job only while it holds that
  advisory lock, says once when it takes or loses the turn, and releases the
  lock when the loop stops, so another replica takes over on its next turn.
- `stop` sets the stop flag and waits up to ``wait_seconds`` for the run in progress.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Self

from yuxi_dash.attach.leader import ScanLeadership

STOP_WAIT_SECONDS = 30.0  # how long `stop` waits for a run to wind down


class BackgroundLoop:
    """Runs `run_once` every ``interval`` seconds in a daemon thread."""

    job = "a background job"  # how the replica lines name it
    first_run_now = True

    def __init__(
        self,
        interval: float,
        *,
        thread_name: str,
        report: Callable[[str], None] | None = None,
        leadership: ScanLeadership | None = None,
    ) -> None:
        self.interval = float(interval)
        self.report = report
        self.leadership = leadership
        self.failures = 0
        self.leading: bool | None = None  # None until the first turn
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=thread_name, daemon=True)

    def run_once(self) -> None:
        raise NotImplementedError

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self, wait_seconds: float = STOP_WAIT_SECONDS) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(wait_seconds)

    def stopping(self) -> bool:
        return self._stop.is_set()

    def _run(self) -> None:
        try:
            if not self.first_run_now and self._stop.wait(self.interval):
                return
            while not self._stop.is_set():
                if self._my_turn():
                    self.run_once()
                if self._stop.wait(self.interval):
                    return
        finally:
            if self.leadership is not None:
                self.leadership.release()  # another replica takes the job on its next turn

    def _my_turn(self) -> bool:
        if self.leadership is None:
            return True
        leading = self.leadership.lead()
        if leading != self.leading:
            self.leading = leading
            self._say_turn(self.leadership, leading)
        return leading

    def _say_turn(self, leadership: ScanLeadership, leading: bool) -> None:
        if leadership.unavailable:
            return  # not "another replica": the leadership logged that the database is down
        if self.report is not None and leadership.needs_lock:
            self.report(
                f"this replica runs {self.job}"
                if leading
                else f"another replica runs {self.job}; this one takes over if it stops"
            )
