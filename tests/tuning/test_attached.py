"""yuxi_dash.tuning over an attached platform's threads: read from its checkpointer, only read.

The platform is a separate process running a real `create_agent` graph with our middleware
and LangGraph's PostgresSaver (`tests.fixtures.platform`); the dashboard attaches read-only,
scans, and the lab replays the platform's threads beside ours.
"""

from __future__ import annotations

import pytest

from tests.attach.platform import CONTEXT_WINDOW, KEEP_MESSAGES, SUMMARY_THRESHOLD
from tests.fixtures.platform import Platform
from tests.service.builders import OPERATOR
from tests.tuning.fleet_builders import recorded_summaries
from yuxi_dash.agents import AGENT_DEFAULTS
from yuxi_dash.cli import main
from yuxi_dash.service import upsert_agent
from yuxi_dash.store.db import session_scope
from yuxi_dash.tuning.plan import plan_tuning

pytestmark = pytest.mark.services

THREADS = [
    {"thread_id": "plat-long", "user_id": "alice", "agent": "research", "turns": 8,
     "result_words": 900},
    {"thread_id": "plat-short", "user_id": "bob", "agent": "research", "turns": 1,
     "result_words": 40},
]  # fmt: skip


def test_attached_threads_are_replayed_from_the_platforms_checkpointer(
    attached: Platform, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = attached.run(THREADS)
    assert main(["attach", "scan", "--json"]) == 0
    capsys.readouterr()
    newest = {thread_id: attached.latest_id(thread_id) for thread_id in ran}
    unlisted = plan_tuning("research", actor=OPERATOR)  # no agent row here: the defaults
    assert unlisted.current_settings.summary_threshold_k == AGENT_DEFAULTS["summary_threshold"]
    assert unlisted.current_compresses and "whether it compresses is unknown" in unlisted.notes[0]
    with session_scope() as session:  # the platform agent's own settings
        upsert_agent(
            session,
            "research",
            name="Research",
            capabilities=["context_compression"],
            context_window=CONTEXT_WINDOW,
            summary_threshold=SUMMARY_THRESHOLD,
            summary_keep_messages=KEEP_MESSAGES,
        )
    run = plan_tuning("research", actor=OPERATOR, summary_threshold_k=1)
    assert sorted(row.thread_id for row in run.planned) == ["plat-long", "plat-short"]
    assert {row.origin for row in run.planned} == {"attached"}
    run.step()
    result = run.finish()
    assert not result.unreadable and result.unrestored == 0  # files from the platform's volume
    assert result.current.threads == 2 and result.current.turns > 2
    for entry in result.threads:  # the settings in force: the platform's own compressions
        summarized, _inputs = recorded_summaries(entry["thread_id"])
        assert entry["current"]["compression_turns"] == [turn + 1 for turn in summarized]
        assert entry["origin"].startswith("attached: ")  # as every page names its source
    assert result.current.compressions >= 1
    assert result.proposed.compressions >= result.current.compressions
    assert {thread_id: attached.latest_id(thread_id) for thread_id in ran} == newest
