"""A job on a timer in a daemon thread, for `yuxi-dash serve`: the attach scan, the alert pass, the sweep.

Rules:
- A job is a subclass that gives its name, thread name, period setting, lock key
  and `one_pass`; the loop body is here, once. A failed pass is one log line
  (`<name> failed:` and the error's code or type, never a driver's message or
  user data), counted in `failures`; the loop carries on. A pass that ends is
  counted in `runs`. The next run starts ``interval`` seconds after the last one
  ended; with ``first_run_now`` False the first run waits one interval too.
- With a ``lock_key``, a replica runs the job only while it holds that advisory
  lock (`leader.Leadership`), says once when it takes or loses the turn, and
  releases the lock when the loop stops, so another replica takes over.
- `stop` sets the stop flag and waits up to ``wait_seconds`` for the run in progress.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import ClassVar, Literal, Self

from yuxi_dash.errors import YuxiDashError
from yuxi_dash.leader import Leadership
from yuxi_dash.settings import Settings

STOP_WAIT_SECONDS = 30.0  # how long `stop` waits for a run to wind down

FailureDetail = Literal["type", "code", "message"]


def describe_failure(exc: BaseException, detail: FailureDetail = "code") -> str:
    """One line for a failed pass: a typed error's code (with "message", its message too:
    our typed messages carry no secret); "type", or any other error, its type only (a
    driver's message may quote the connection string)."""
    if detail == "type" or not isinstance(exc, YuxiDashError):
        return type(exc).__name__
    if detail == "message":
        return f"{exc.message} [{exc.code}]"
    return f"[{exc.code}]"


class BackgroundLoop:
    """Runs `one_pass` every ``interval`` seconds in a daemon thread."""

    name = "background job"  # log lines: "<name> failed"; replica lines: "the <name>"
    thread_name = "yuxi-dash-background"
    period_setting = ""  # the Settings field that holds the interval in seconds
    lock_key: int | None = None  # one replica at a time runs it; None: every replica
    first_run_now = True
    failure_detail: FailureDetail = "code"
    log: ClassVar[logging.Logger] = logging.getLogger(__name__)

    def __init__(
        self,
        settings: Settings,
        *,
        interval: float | None = None,
        report: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        period = interval if interval is not None else getattr(settings, self.period_setting)
        self.interval = float(period)
        self.report = report
        self.leadership = (
            None
            if self.lock_key is None
            else Leadership(settings, key=self.lock_key, label=self.name)
        )
        self.runs = 0
        self.failures = 0
        self.leading: bool | None = None  # None until the first turn
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)

    def one_pass(self) -> None:
        """The job itself, once; it may raise: `run_once` logs and counts the failure."""
        raise NotImplementedError

    def run_once(self) -> None:
        """One pass; a failure is one log line and the loop carries on."""
        try:
            self.one_pass()
        except Exception as exc:  # noqa: BLE001 - a failed pass is one line; the next one retries
            self.failures += 1
            self.log.warning("%s failed: %s", self.name, describe_failure(exc, self.failure_detail))
            return
        self.runs += 1

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

    def _say_turn(self, leadership: Leadership, leading: bool) -> None:
        if leadership.unavailable:
            return  # not "another replica": the leadership logged that the database is down
        if self.report is not None and leadership.needs_lock:
            self.report(
                f"this replica runs the {self.name}"
                if leading
                else f"another replica runs the {self.name}; this one takes over if it stops"
            )
