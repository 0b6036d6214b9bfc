"""The workdir sweep on a timer, for `yuxi-dash serve`: a background thread until serve stops.

`SweepLoop` runs `service.sweep.sweep_workdir` every `workdir_sweep_seconds`
(0: never), the first run one interval after start, as the actor `serve:sweep`
with the admin role (the process is the operator's own deployment). Each run is
audited like a manual one. A run that fails is one log line with the error's
code, and the loop carries on (`background`). It is not started when a platform
is attached: the sweep would remove nothing there (`held: attached_platform`).
Replicas may each run it; the files lock and the checks made under it keep two
sweeps (and a compress) from ever removing a file something names.
"""

from __future__ import annotations

import logging

from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.background import BackgroundLoop
from yuxi_dash.settings import Settings

SWEEP_ACTOR = Actor(id="serve:sweep", role=Role.ADMIN, via="serve")


class SweepLoop(BackgroundLoop):
    """Runs the workdir sweep every ``interval`` seconds in a daemon thread (every replica)."""

    name = "workdir sweep"
    thread_name = "yuxi-dash-sweep"
    period_setting = "workdir_sweep_seconds"
    first_run_now = False
    log = logging.getLogger(__name__)

    @staticmethod
    def wanted(settings: Settings) -> bool:
        """Whether `serve` runs it: an interval is set and no platform shares the workdir."""
        return settings.workdir_sweep_seconds > 0 and not settings.attach_configured

    def one_pass(self) -> None:
        from yuxi_dash.service.sweep import sweep_workdir

        result = sweep_workdir(actor=SWEEP_ACTOR, settings=self.settings)
        if self.report is not None and result.files:
            self.report(f"workdir sweep removed {len(result.files)} orphaned offloaded files")
