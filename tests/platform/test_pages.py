"""The Threads ≥ 85% page and thread detail compress an attached platform's threads (AppTest).

On the demo, with the stand-in platform attached and its endpoint configured:
one thread through the dialog, a bulk of a busy thread and one whose agent the
platform cannot compress (one line each), the 422 remembered so the button says
why, and the compress button of thread detail.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from streamlit.testing.v1 import AppTest

from tests.fixtures.platform import Platform, PlatformServer
from yuxi_dash.cli import main
from yuxi_dash.settings import Settings

pytestmark = pytest.mark.services

PAGE = "app_pages/threads.py"
THREADS = [
    {"thread_id": "plat-a", "user_id": "alice", "agent": "research", "turns": 3,
     "result_words": 250},
    {"thread_id": "plat-b", "user_id": "bob", "agent": "research", "turns": 3,
     "result_words": 250},
    {"thread_id": "plat-c", "user_id": "carol", "agent": "writer", "turns": 3,
     "result_words": 250},
]  # fmt: skip


def test_the_threads_page_compresses_platform_threads(
    demo_env: Settings,
    attached: Platform,
    platform_configured: PlatformServer,
    app_test: Callable[..., AppTest],
) -> None:
    attached.run(THREADS)
    assert main(["attach", "scan"]) == 0
    platform_configured.control(busy=["plat-b"], unsupported_agents=["writer"])

    at = app_test(PAGE)
    assert not at.exception
    # with the endpoint set, attached threads can be compressed now: listed under the toggle
    assert at.toggle(key="threads_actionable_only").value
    assert {"plat-a", "plat-c"} <= set(at.dataframe[0].value["thread"])
    at.selectbox(key="compress_thread").set_value("plat-a").run()
    assert not at.button(key="compress_one").disabled  # the platform decides now
    at.button(key="compress_one").click().run()
    assert not at.exception
    preview = at.table[-1].value
    assert preview.index.tolist() == ["plat-a"]
    assert int(preview["Messages to summarize"].iloc[0]) > 0  # read from the platform's state
    at.button(key="confirm_compress").click().run()
    assert not at.exception
    (line,) = [s.value for s in at.success]
    assert line.startswith("plat-a: compressed ") and "→" in line
    assert [c["thread_id"] for c in platform_configured.calls()] == ["plat-a"]

    options = at.multiselect(key="compress_selection").options
    assert {"plat-b", "plat-c"} <= set(options)
    at.multiselect(key="compress_selection").set_value(["plat-b", "plat-c"]).run()
    at.button(key="compress_bulk").click().run()
    at.button(key="confirm_compress").click().run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert any(e.startswith("plat-b: Busy") and "[thread_busy]" in e for e in errors), errors
    assert any(
        e.startswith("plat-c: Unsupported") and "[compression_unsupported]" in e for e in errors
    ), errors

    # the 422 is remembered: plat-c's button is disabled and says why
    at.selectbox(key="compress_thread").set_value("plat-c").run()
    button = at.button(key="compress_one")
    assert button.disabled
    assert button.help == "the platform said agent writer does not support context compression"
    assert "plat-c" not in at.multiselect(key="compress_selection").options
    assert "plat-c" not in set(at.dataframe[0].value["thread"])  # hidden by the toggle now


def test_thread_detail_compresses_a_platform_thread(
    demo_env: Settings,
    attached: Platform,
    platform_configured: PlatformServer,
    app_test: Callable[..., AppTest],
) -> None:
    attached.run(THREADS[:1])
    assert main(["attach", "scan"]) == 0
    at = app_test()
    at.query_params["thread"] = "plat-a"
    at.switch_page("app_pages/thread_detail.py").run()
    assert not at.exception
    button = at.button(key="detail_compress")
    assert not button.disabled
    button.click().run()
    at.button(key="confirm_compress").click().run()
    assert not at.exception
    (line,) = [s.value for s in at.success]
    assert line.startswith("plat-a: compressed ")
    assert len(platform_configured.calls()) == 1
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Summary active"] == "yes"  # the detail reloaded from the new projection
