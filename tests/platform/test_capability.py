"""One capability verdict (`store.origin`) for the pages and the CLI, per agent named.

The platform's 422 is remembered per agent the platform named; a thread it named no
agent for (the projector's fallback slug) is never grouped with the others under that
slug. The Threads page and `yuxi-dash compress` give the same verdict for each thread:
the stand-in platform of tests/platform/test_compress.py, attached and configured.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from streamlit.testing.v1 import AppTest

from tests.fixtures.platform import Platform, PlatformServer
from yuxi_dash.access.audit import record_audit, wait_for_pending_audit
from yuxi_dash.cli import main
from yuxi_dash.settings import Settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Conversation
from yuxi_dash.store.queries import list_audit
from yuxi_dash.ui.loaders import clear_loaders

ACTOR = "ops@example.com"
PLATFORM = "http://platform.example:8080"
UNNAMED_AGENT = "attached"  # README "Attach to a platform": no assistant_id nor graph_id
HOT = {"turns": 3, "result_words": 250}  # over 85%: listed on the Threads page
THREADS = [
    {"thread_id": "bare-a", "user_id": "alice", **HOT},  # no assistant_id
    {"thread_id": "bare-b", "user_id": "bob", **HOT},  # no assistant_id
    {"thread_id": "named-c", "user_id": "carol", "agent": "research", **HOT},
]


def _answer(thread_id: str, agent: str, outcome: str, **detail: Any) -> None:
    """An audit row as a platform compress writes it (`platform.compress`)."""
    code = "compression_unsupported" if outcome == "refused" else outcome
    record_audit(
        actor=ACTOR,
        action="compress",
        target=f"thread:{thread_id}",
        outcome=outcome,
        detail={"platform": PLATFORM, "agent": agent, "code": code, **detail},
    )


def test_a_422_is_kept_per_named_agent_and_per_thread_without_one(db_url: str) -> None:
    from yuxi_dash.store.origin import UNNAMED_AGENT as FALLBACK
    from yuxi_dash.store.origin import platform_refusals

    assert FALLBACK == UNNAMED_AGENT
    _answer("bare-1", UNNAMED_AGENT, "refused")
    _answer("named-1", "research", "refused")
    _answer("bare-2", UNNAMED_AGENT, "completed")  # another unnamed thread: clears nothing
    _answer("bare-3", UNNAMED_AGENT, "refused", remembered=True)  # not the platform's word
    with session_scope() as session:
        found = platform_refusals(session)
    assert set(found.agents) == {"research"} and set(found.threads) == {"bare-1"}
    assert found.of("bare-1", UNNAMED_AGENT) and "bare-1" in found.threads["bare-1"]
    assert found.of("bare-2", UNNAMED_AGENT) is None  # never the fallback name's verdict
    assert found.of("named-2", "research") == (
        "the platform said agent research does not support context compression"
    )

    _answer("named-2", "research", "completed")  # the agent can now: every thread of it can
    _answer("bare-1", UNNAMED_AGENT, "no_op")
    with session_scope() as session:
        found = platform_refusals(session)
    assert (dict(found.agents), dict(found.threads)) == ({}, {})


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    capsys.readouterr()
    code = main([*args, "--actor", ACTOR, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else None


def _page_verdicts(app_test: Callable[..., AppTest], threads: list[str]) -> dict[str, Any]:
    """Thread -> None (the page offers Compress…) or the reason its button gives."""
    clear_loaders()
    at = app_test("app_pages/threads.py")
    assert not at.exception
    verdicts: dict[str, Any] = {}
    for thread_id in threads:
        at.selectbox(key="compress_thread").set_value(thread_id).run()
        button = at.button(key="compress_one")
        verdicts[thread_id] = button.help if button.disabled else None
    return verdicts


@pytest.mark.services
def test_one_refusal_blocks_only_its_agent_or_thread_and_page_and_cli_agree(
    demo_env: Settings,
    attached: Platform,
    platform_configured: PlatformServer,
    app_test: Callable[..., AppTest],
    capsys: pytest.CaptureFixture[str],
) -> None:
    attached.run(THREADS)
    assert main(["attach", "scan"]) == 0
    with session_scope() as session:
        rows = session.execute(sa.select(Conversation.thread_id, Conversation.agent_slug))
        agents = {thread_id: agent for thread_id, agent in rows}
    assert (agents["bare-a"], agents["bare-b"], agents["named-c"]) == (
        UNNAMED_AGENT, UNNAMED_AGENT, "research",
    )  # fmt: skip

    platform_configured.control(unsupported_agents=[None])  # no assistant_id: 422 there
    code, refused = _cli(capsys, "compress", "bare-a")
    assert (code, refused["error"]["code"]) == (5, "compression_unsupported")
    platform_configured.control(unsupported_agents=["research"])
    assert _cli(capsys, "compress", "named-c")[0] == 5
    platform_configured.control(unsupported_agents=[])  # the platform would take each now
    assert len(platform_configured.calls()) == 2

    page = _page_verdicts(app_test, ["bare-a", "bare-b", "named-c"])
    assert page["bare-b"] is None  # the 422 of bare-a is not every unnamed thread's
    assert "thread bare-a" in page["bare-a"] and "names no agent" in page["bare-a"]
    assert (
        page["named-c"] == "the platform said agent research does not support context compression"
    )

    # the CLI gives the page's verdict: refused without a call where the page refuses
    code, lines = _cli(capsys, "compress", "bare-a", "named-c")
    assert code == 5
    assert [(line["thread_id"], line["error"]["code"]) for line in lines] == [
        ("bare-a", "compression_unsupported"),
        ("named-c", "compression_unsupported"),
    ]
    assert "bare-a" in lines[0]["error"]["message"]
    assert len(platform_configured.calls()) == 2  # nothing was sent
    code, done = _cli(capsys, "compress", "bare-b")  # offered by the page: sent, and done
    assert (code, done["status"]) == (0, "completed")
    assert [c["thread_id"] for c in platform_configured.calls()][2:] == ["bare-b"]
    wait_for_pending_audit()
    with session_scope() as session:
        rows = list_audit(session, action="compress", target="thread:bare-a")
    newest = max(rows, key=lambda r: r.id)
    assert (newest.outcome, newest.detail["remembered"]) == ("refused", True)

    # asking the platform again is explicit; its answer replaces what was remembered
    from yuxi_dash.store.origin import platform_refusals

    code, done = _cli(capsys, "compress", "bare-a", "--ask-platform")
    assert (code, done["status"]) == (0, "completed")
    with session_scope() as session:
        found = platform_refusals(session)
    assert dict(found.threads) == {} and set(found.agents) == {"research"}
