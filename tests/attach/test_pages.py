"""The dashboard's pages on an attached platform's thread (AppTest over app.py, on the demo).

The 85% list shows the platform's hot thread with its compress button disabled
and the reason; thread detail draws the state the platform's checkpointer holds.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from streamlit.testing.v1 import AppTest

from tests.attach.conftest import Platform
from yuxi_dash.cli import main
from yuxi_dash.settings import Settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.queries import list_threads
from yuxi_dash.ui.format import pct

pytestmark = pytest.mark.services

HOT = {"thread_id": "plat-hot", "user_id": "alice", "agent": "research", "turns": 3,
       "result_words": 250}  # fmt: skip
REASON = "this thread belongs to the attached platform"


def test_threads_page_lists_the_attached_thread_with_compress_disabled(
    demo_env: Settings,
    attached: Platform,
    app_test: Callable[..., AppTest],
) -> None:
    ran = attached.run([HOT])
    assert ran["plat-hot"]["token_usage"]["summary_pressure_ratio"] >= 0.85
    assert main(["attach", "scan"]) == 0

    at = app_test("pages/threads.py")
    assert not at.exception
    # attached threads cannot be compressed without YUXI_DASH_PLATFORM_URL: hidden by the
    # "Can compress now" toggle, shown once the list shows every thread
    assert "plat-hot" not in set(at.dataframe[0].value["thread"])
    assert any("attached with no platform endpoint" in c.value for c in at.caption)
    at = at.toggle(key="threads_actionable_only").set_value(False).run()
    listed = at.dataframe[0].value
    assert "plat-hot" in listed["thread"].tolist()
    row = listed[listed["thread"] == "plat-hot"].iloc[0]
    assert (row["user"], row["compression"]) == ("alice", "attached")  # not compressed here

    at.selectbox(key="compress_thread").set_value("plat-hot").run()
    assert not at.exception
    button = at.button(key="compress_one")
    assert button.disabled
    assert button.help == REASON
    assert any(f"Cannot compress: {REASON}." in c.value for c in at.caption)
    assert "plat-hot" not in at.multiselect(key="compress_selection").options

    # a demo thread next to it can still be compressed: the reason is the thread's own
    with session_scope(demo_env) as session:
        rows = list_threads(session, min_pressure=0.85, limit=1000)
    ours = next(t.thread_id for t in rows if not t.attached and t.capable and not t.busy_reason)
    at.selectbox(key="compress_thread").set_value(ours).run()
    assert not at.button(key="compress_one").disabled


def test_thread_detail_draws_the_platform_state(
    demo_env: Settings,
    attached: Platform,
    app_test: Callable[..., AppTest],
) -> None:
    ran = attached.run([HOT])
    assert main(["attach", "scan"]) == 0

    at = app_test()
    at.query_params["thread"] = "plat-hot"
    at.switch_page("pages/thread_detail.py").run()
    assert not at.exception
    assert not at.error
    captions = " ".join(c.value for c in at.caption)
    assert "alice" in captions and "research" in captions
    messages = ran["plat-hot"]["messages"]
    assert f"{messages:,} messages" in captions  # the platform's state, not an empty one
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Summary pressure"] == pct(
        ran["plat-hot"]["token_usage"]["summary_pressure_ratio"]
    )
    chat = [d.value for d in at.dataframe if "sequence" in d.value.columns]
    assert chat and len(chat[0]) == messages
