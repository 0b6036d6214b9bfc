"""The loop body every background job shares (yuxi_dash.background).

A job gives only its pass; a failed pass is one log line naming the job and the
error's code or type (never its message unless the job asks, never a driver's
message), it is counted, and the next turn runs the job again.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from yuxi_dash.background import BackgroundLoop
from yuxi_dash.errors import InvalidInput
from yuxi_dash.settings import Settings

SECRET = "hunter2-user-text"


class Flaky(BackgroundLoop):
    """Fails with a typed error, then with a driver-like one, then succeeds."""

    name = "flaky job"
    thread_name = "yuxi-dash-test-flaky"
    period_setting = "workdir_sweep_seconds"
    log = logging.getLogger("tests.background")

    def __init__(self, settings: Settings, *, interval: float | None = None) -> None:
        super().__init__(settings, interval=interval)
        self.calls = 0
        self.third = threading.Event()

    def one_pass(self) -> None:
        self.calls += 1
        if self.calls == 1:
            raise InvalidInput(f"bad thread {SECRET}")
        if self.calls == 2:
            raise RuntimeError(f"postgresql://alice:{SECRET}@db/x")
        self.third.set()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(database_url=f"sqlite:///{tmp_path / 'one.db'}", workdir_sweep_seconds=7)


def test_a_failed_pass_is_one_counted_line_and_the_loop_carries_on(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    loop = Flaky(settings, interval=0.05)
    assert loop.leadership is None  # no lock key: every replica runs it
    with caplog.at_level(logging.WARNING, logger="tests.background"):
        loop.start()
        try:
            assert loop.third.wait(30)
        finally:
            loop.stop()
    lines = [r.getMessage() for r in caplog.records if r.name == "tests.background"]
    assert lines == ["flaky job failed: [invalid_input]", "flaky job failed: RuntimeError"]
    assert (loop.failures, loop.runs) == (2, loop.calls - 2)
    assert SECRET not in caplog.text
    assert not [t for t in threading.enumerate() if t.name == "yuxi-dash-test-flaky"]


def test_the_period_comes_from_the_setting_unless_given(settings: Settings) -> None:
    assert Flaky(settings).interval == 7.0
    assert Flaky(settings, interval=0.5).interval == 0.5


def test_the_job_may_ask_for_its_typed_message(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    class Telling(Flaky):
        failure_detail = "message"  # our typed messages carry no secret (the attach scan's)

    loop = Telling(settings, interval=60)
    with caplog.at_level(logging.WARNING, logger="tests.background"):
        loop.run_once()
        loop.run_once()
        loop.run_once()
    lines = [r.getMessage() for r in caplog.records if r.name == "tests.background"]
    assert lines == [
        f"flaky job failed: bad thread {SECRET} [invalid_input]",
        "flaky job failed: RuntimeError",
    ]
    assert (loop.failures, loop.runs) == (2, 1)
