"""`yuxi-dash demo` and `serve --demo`: seed the demo threads, then the users' memory graphs.

Both seeders use the same cast (`yuxi_dash.sim.story.DEMO_USERS`) and story,
so support staff can read a user's memory next to their chats. Seeding is
deterministic and idempotent; `reset=True` starts both clean.
"""

from __future__ import annotations

from datetime import datetime

from yuxi_dash.demo.graphs import seed_demo_graphs
from yuxi_dash.demo.threads import DemoReport, Progress, quiet, seed_demo_threads
from yuxi_dash.settings import Settings
from yuxi_dash.sim.story import DEMO_USERS


def seed_demo(
    settings: Settings,
    *,
    reset: bool = False,
    memory: bool = True,
    now: datetime | None = None,
    progress: Progress = quiet,
) -> DemoReport:
    """Seed threads, then (when `memory`) the users' graphs; `reset` starts both clean."""
    report = seed_demo_threads(settings, reset=reset, now=now, progress=progress)
    if memory:
        progress(f"writing {len(DEMO_USERS)} user memory graphs")
        # the threads' story time, so each episode is dated at its message
        anchor = datetime.fromisoformat(report.anchor) if report.anchor else None
        result = seed_demo_graphs(settings, DEMO_USERS, reset=reset, now=anchor)
        report.graphs = int(result.get("graphs", 0)) + int(result.get("skipped_existing", 0))
        if result.get("skipped_existing"):
            report.notes.append(f"{result['skipped_existing']} user graphs already present")
    return report
