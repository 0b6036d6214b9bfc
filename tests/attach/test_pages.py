"""The dashboard's pages on an attached platform's thread (AppTest over app.py, on the demo).

The 85% list shows the platform's hot thread with its compress button disabled
and the reason; thread detail draws the state the platform's checkpointer holds.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import ormsgpack
import psycopg
import pytest
from streamlit.testing.v1 import AppTest

from tests.attach.checkpoints import put_checkpoint, usage, values
from tests.fixtures.platform import Platform
from yuxi_dash.cli import main
from yuxi_dash.settings import Settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.queries import list_threads
from yuxi_dash.ui.page_text import pct

pytestmark = pytest.mark.services

HOT = {"thread_id": "plat-hot", "user_id": "alice", "agent": "research", "turns": 3,
       "result_words": 250}  # fmt: skip
REASON = "this thread belongs to the attached platform"
IN_2100 = "243dd56b-5a6c-6000-8000-000000000000"  # a UUIDv6 id dated 2100-01-01


def _label(platform: Platform) -> str:
    """What the platform's threads are called everywhere: "attached: host:port/database"."""
    from yuxi_dash.attach import source_label

    return f"attached: {source_label(platform.reader_conninfo)}"


def test_threads_page_lists_the_attached_thread_with_compress_disabled(
    demo_env: Settings,
    attached: Platform,
    app_test: Callable[..., AppTest],
) -> None:
    ran = attached.run([HOT])
    assert ran["plat-hot"]["token_usage"]["summary_pressure_ratio"] >= 0.85
    assert main(["attach", "scan"]) == 0

    at = app_test("app_pages/threads.py")
    assert not at.exception
    # attached threads cannot be compressed without YUXI_DASH_PLATFORM_URL: hidden by the
    # "Can compress now" toggle, shown once the list shows every thread
    assert "plat-hot" not in set(at.dataframe[0].value["thread"])
    assert any("attached with no platform endpoint" in c.value for c in at.caption)
    at = at.toggle(key="threads_actionable_only").set_value(False).run()
    listed = at.dataframe[0].value
    assert "plat-hot" in listed["thread"].tolist()
    row = listed[listed["thread"] == "plat-hot"].iloc[0]
    label = _label(attached)
    assert (row["user"], row["compression"]) == ("alice", label)  # not compressed here
    reason = (
        f"{label}: the platform owns this thread; "
        "set YUXI_DASH_PLATFORM_URL to compress it through the platform"
    )

    at.selectbox(key="compress_thread").set_value("plat-hot").run()
    assert not at.exception
    button = at.button(key="compress_one")
    assert button.disabled
    assert button.help == reason
    assert any(f"Cannot compress: {reason}." in c.value for c in at.caption)
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
    at.switch_page("app_pages/thread_detail.py").run()
    assert not at.exception
    assert not at.error
    captions = " ".join(c.value for c in at.caption)
    assert "alice" in captions and "research" in captions
    label = _label(attached)  # it says it is attached, never "compression unsupported"
    assert label in captions and "unsupported" not in captions
    assert any(i.value.startswith(label) for i in at.info)
    messages = ran["plat-hot"]["messages"]
    assert f"{messages:,} messages" in captions  # the platform's state, not an empty one
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Summary pressure"] == pct(
        ran["plat-hot"]["token_usage"]["summary_pressure_ratio"]
    )
    chat = [d.value for d in at.dataframe if "sequence" in d.value.columns]
    assert chat and len(chat[0]) == messages
    assert not any("is not projected yet" in c.value for c in at.caption)


def test_thread_detail_says_a_thread_shown_has_its_history_to_come(
    demo_env: Settings,
    attached: Platform,
    app_test: Callable[..., AppTest],
) -> None:
    """A first scan stopped after showing: the page draws the platform's state and says the
    history is still to be projected."""
    from tests.attach.test_newest_usage import stop_after
    from yuxi_dash.attach.scanner import scan
    from yuxi_dash.settings import get_settings

    ran = attached.run([HOT])
    report = scan(get_settings(), show_first=True, should_stop=stop_after(1))
    assert report.shown == 1 and report.projected == 0

    at = app_test()
    at.query_params["thread"] = "plat-hot"
    at.switch_page("app_pages/thread_detail.py").run()
    assert not at.exception and not at.error
    assert any(c.value.startswith("Its history (usage timeline, chat record") for c in at.caption)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Summary pressure"] == pct(
        ran["plat-hot"]["token_usage"]["summary_pressure_ratio"]
    )


def test_attach_status_page_lists_quarantined_and_flagged_threads_literally(
    demo_env: Settings,
    attached: Platform,
    app_test: Callable[..., AppTest],
) -> None:
    owner = attached.owner_conninfo
    put_checkpoint(owner, "bad\x1b[31mred", values())  # an id our tables cannot hold
    put_checkpoint(owner, "p-neg", {**values(), "token_usage": usage(-5000)})
    put_checkpoint(owner, "p-2100", values(), checkpoint_id=IN_2100)
    put_checkpoint(owner, "p-call", values())  # its usage blob then names os.system
    call = ormsgpack.Ext(0, ormsgpack.packb(("os", "system", "true")))
    with psycopg.connect(owner, autocommit=True) as conn:
        conn.execute(
            "UPDATE checkpoint_blobs SET blob = %s WHERE thread_id = 'p-call' "
            "AND channel = 'token_usage'",
            (ormsgpack.packb({"llm_input_tokens": 5, "x": call}),),
        )
    assert main(["attach", "scan"]) == 0

    at = app_test("app_pages/attach_status.py")
    assert not at.exception
    assert [s.value for s in at.subheader] == ["Quarantined (3)", "Flagged (1)"]
    quarantined, flagged = (d.value for d in at.dataframe)
    assert sorted(zip(quarantined["thread"], quarantined["code"], strict=True)) == [
        ("bad\\x1b[31mred", "invalid_input"),
        ("p-call", "checkpoint_refused"),
        ("p-neg", "impossible_usage"),
    ]
    assert flagged["thread"].tolist() == ["p-2100"]
    assert flagged["code"].tolist() == ["checkpoint_in_future"]
    assert any("platform" in c.value for c in at.caption)


def test_attach_status_page_gives_the_missing_index_statement_until_it_exists(
    demo_env: Settings,
    attached: Platform,
    app_test: Callable[..., AppTest],
) -> None:
    from yuxi_dash.attach.platforms import CREATE_INDEX_STATEMENT

    put_checkpoint(attached.owner_conninfo, "p-one", values())
    assert main(["attach", "scan"]) == 0
    at = app_test("app_pages/attach_status.py")
    assert not at.exception
    [info] = [i.value for i in at.info if "checkpoint_id" in i.value]
    assert "has no index on checkpoint_id" in info and " ms" in info
    assert [c.value for c in at.code] == [CREATE_INDEX_STATEMENT]

    with psycopg.connect(attached.owner_conninfo, autocommit=True) as conn:
        conn.execute(CREATE_INDEX_STATEMENT)
    assert main(["attach", "scan"]) == 0
    at = app_test("app_pages/attach_status.py")
    assert not at.exception
    assert not [i for i in at.info if "checkpoint_id" in i.value] and not list(at.code)


def test_attach_status_page_says_what_the_index_would_save_on_this_platform(
    demo_env: Settings,
    attached: Platform,
    app_test: Callable[..., AppTest],
) -> None:
    for thread_id in ("p-one", "p-two", "p-three"):
        put_checkpoint(attached.owner_conninfo, thread_id, values())
    with psycopg.connect(attached.owner_conninfo, autocommit=True) as conn:
        conn.execute("ANALYZE checkpoints")  # the catalog's estimate the saving is measured on
    assert main(["attach", "scan"]) == 0
    put_checkpoint(attached.owner_conninfo, "p-four", values())
    assert main(["attach", "scan"]) == 0  # incremental: one checkpoint in the window of four
    at = app_test("app_pages/attach_status.py")
    assert not at.exception
    [saving] = [c.value for c in at.caption if "saved per scan" in c.value]
    assert "That query read about 3 checkpoints for the" in saving, saving
    assert "a day at one scan every" in saving
    [last] = [c.value for c in at.caption if c.value.startswith("The last scan projected")]
    assert "1 threads" in last


def test_attach_status_page_shows_a_running_scans_progress(
    demo_env: Settings,
    attached: Platform,
    app_test: Callable[..., AppTest],
) -> None:
    from yuxi_dash.attach import source_label
    from yuxi_dash.store.models import ScanWatermark, utcnow

    progress = {
        "threads_done": 250,
        "threads_total": 1000,
        "checkpoints_done": 5000,
        "checkpoints_total": 20000,
        "seconds": 5.0,
        "updated_at": utcnow().isoformat(),
        "state": "running",
        "scan_id": "another-scan",
    }
    with session_scope() as session:
        session.add(ScanWatermark(source=source_label(attached.reader_conninfo), progress=progress))
    at = app_test("app_pages/attach_status.py")
    assert not at.exception
    [bar] = at.get("progress")
    assert bar.proto.value == 25
    assert bar.proto.text == (
        "Scanning: 250 of 1,000 threads (5,000 of 20,000 checkpoints) · 50 threads/s · "
        "about 15 s left"
    )
    assert any("as each batch is projected" in c.value for c in at.caption)

    with session_scope() as session:  # a first scan that showed its new threads first
        row = session.get(ScanWatermark, source_label(attached.reader_conninfo))
        assert row is not None
        row.progress = {**progress, "shown": 1200, "updated_at": utcnow().isoformat()}
    at = app_test("app_pages/attach_status.py")
    assert not at.exception
    assert any(
        c.value.startswith("1,200 threads new to the dashboard show on the other pages at their "
                           "newest usage")
        for c in at.caption
    )  # fmt: skip


@pytest.mark.parametrize(
    ("state", "updated", "said"),
    [
        ("stopped", 0, "(stopped)"),
        ("failed", 0, "(failed)"),
        ("running", 600, "(no word from it since)"),  # a running row nobody writes any more
    ],
)
def test_attach_status_page_says_how_the_last_scan_ended(
    demo_env: Settings,
    attached: Platform,
    app_test: Callable[..., AppTest],
    state: str,
    updated: int,
    said: str,
) -> None:
    from datetime import timedelta

    from yuxi_dash.attach import source_label
    from yuxi_dash.store.models import ScanWatermark, utcnow

    progress = {
        "scan_id": "an-earlier-scan",
        "state": state,
        "threads_done": 2,
        "threads_total": 4,
        "checkpoints_done": 30,
        "checkpoints_total": 60,
        "seconds": 1.5,
        "updated_at": (utcnow() - timedelta(seconds=updated)).isoformat(),
    }
    with session_scope() as session:
        session.add(ScanWatermark(source=source_label(attached.reader_conninfo), progress=progress))
    at = app_test("app_pages/attach_status.py")
    assert not at.exception
    assert not at.get("progress")  # nothing is running
    [ended] = [c.value for c in at.caption if c.value.startswith("The last scan ended after")]
    assert ended.startswith("The last scan ended after 2 of 4 threads " + said), ended


def test_the_cli_says_a_thread_is_attached(
    demo_env: Settings, attached: Platform, capsys: pytest.CaptureFixture[str]
) -> None:
    attached.run([HOT])
    assert main(["attach", "scan"]) == 0
    capsys.readouterr()
    label = _label(attached)
    assert main(["context", "plat-hot"]) == 0
    assert capsys.readouterr().out.startswith(f"thread plat-hot ({label}, agent research")
    assert main(["context", "plat-hot", "--json"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert (view["attached"], view["compression"]) == (True, label)
    assert main(["threads", "--user", "alice", "--json"]) == 0
    rows = {r["thread_id"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["plat-hot"]["compression"] == label
    assert main(["threads", "--user", "alice"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("plat-hot"))
    assert line.rstrip().endswith(label)


def test_the_platform_and_the_demo_results_both_check_ok(
    demo_env: Settings, attached: Platform, app_test: Callable[..., AppTest]
) -> None:
    """Two workdirs: the platform's files on its volume, the demo's on ours (issue 29 item 5)."""
    attached.run([{**HOT, "turns": 2, "result_words": 1500}])  # the platform offloads results
    assert main(["attach", "scan"]) == 0
    at = app_test("app_pages/tool_results.py")
    assert not at.exception
    threads = set(at.dataframe[0].value["thread_id"])
    assert "plat-hot" in threads and any(t.startswith("demo-") for t in threads)
    assert any(c.value.endswith("SHA-256 re-checked: all ok.") for c in at.caption)


def test_every_list_says_a_thread_is_attached(
    demo_env: Settings,
    attached: Platform,
    app_test: Callable[..., AppTest],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 29 item 4: the overview's points and the tool-results list name the platform too."""
    from yuxi_dash.ui import loaders

    files = {**HOT, "thread_id": "plat-files", "turns": 2, "result_words": 1500}  # offloads
    attached.run([HOT, files])
    assert main(["attach", "scan"]) == 0
    label = _label(attached)

    loaders.clear_loaders()
    points = loaders.pressure_overview()["points"].set_index("thread_id")["origin"]
    assert points["plat-hot"] == label
    assert {o for t, o in points.items() if t.startswith("demo-")} == {"ours"}
    at = app_test("app_pages/overview.py")
    assert not at.exception

    at = app_test("app_pages/tool_results.py")
    assert not at.exception
    listing = at.dataframe[0].value
    origin = dict(zip(listing["thread_id"], listing["origin"], strict=True))
    assert origin["plat-files"] == label
    assert {o for t, o in origin.items() if t.startswith("demo-")} == {"ours"}

    capsys.readouterr()
    assert main(["tool-results", "--thread", "plat-files", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(r["attached"] and label.endswith(r["platform"]) for r in rows)
    assert main(["tool-results", "--thread", "plat-files"]) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if "plat-files" in x]
    assert lines and all(label in x for x in lines)
