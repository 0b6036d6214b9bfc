"""Attach in `yuxi-dash serve`, the secret connection string, a platform that is down, no writes."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

from tests.fixtures.platform import Platform
from yuxi_dash.attach.checkpoint_clock import checkpoint_time, floor_id, scan_floor
from yuxi_dash.attach.loop import ScanLoop
from yuxi_dash.attach.platform_store import PlatformStore
from yuxi_dash.cli import main
from yuxi_dash.errors import ThreadAttached
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.checkpointer import open_postgres_store
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Conversation

SECRET = "hunter2-Secret"
DOWN = f"postgresql://reader:{SECRET}@127.0.0.1:1/platform"
ONE = {"thread_id": "plat-one", "user_id": "alice", "turns": 1, "result_words": 40}
TWO = {"thread_id": "plat-two", "user_id": "bob", "turns": 1, "result_words": 40}


def _attached_threads() -> set[str]:
    with session_scope() as session:
        return set(
            session.scalars(
                sa.select(Conversation.thread_id).where(Conversation.origin == "attached")
            )
        )


@pytest.mark.services
def test_serve_scans_every_n_seconds_until_it_stops(
    attached: Platform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from yuxi_dash.cli import serve

    attached.run([ONE])
    flag = tmp_path / "platform-moved"
    # the "dashboard" child: waits until the platform moved, then lives for a few scans
    child = (
        "import pathlib, sys, time\n"
        f"flag = pathlib.Path({str(flag)!r})\n"
        "deadline = time.time() + 120\n"
        "while not flag.exists() and time.time() < deadline:\n"
        "    time.sleep(0.05)\n"
        "time.sleep(2.0)\n"
    )
    monkeypatch.setattr(serve, "streamlit_command", lambda s, a: [sys.executable, "-c", child])
    monkeypatch.setenv("YUXI_DASH_ATTACH_SCAN_SECONDS", "0.3")
    monkeypatch.setenv("GRAPHITI_FALKORDB_HOST", "127.0.0.1")  # external: nothing to start
    monkeypatch.setenv("GRAPHITI_FALKORDB_PORT", "1")
    get_settings.cache_clear()

    def move_platform() -> None:
        try:
            attached.run([TWO])
        finally:
            flag.touch()

    mover = threading.Thread(target=move_platform)
    mover.start()
    args = argparse.Namespace(demo=False, dry_run=False, streamlit_args=[])
    result = serve.run_serve(args)
    mover.join()
    assert result.exit_code == 0
    # the thread the platform started while serve ran was projected by a later scan
    assert _attached_threads() == {"plat-one", "plat-two"}
    assert not [t for t in threading.enumerate() if t.name == "yuxi-dash-attach"]


def test_a_failed_scan_is_one_log_line_without_the_url(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("YUXI_DASH_ATTACH_CHECKPOINTER", DOWN)
    get_settings.cache_clear()
    loop = ScanLoop(get_settings(), interval=60)
    with caplog.at_level(logging.WARNING):
        loop.run_once()
    records = [r for r in caplog.records if r.name == "yuxi_dash.attach"]
    assert len(records) == 1 and loop.failures == 1
    line = records[0].getMessage()
    assert "\n" not in line and "[attach_unavailable]" in line
    assert "127.0.0.1:1/platform" in line
    assert SECRET not in caplog.text and "postgresql://" not in caplog.text


def test_an_unreachable_platform_is_one_line_naming_its_label(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("YUXI_DASH_ATTACH_CHECKPOINTER", DOWN)
    get_settings.cache_clear()
    assert main(["attach", "scan"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and "[attach_unavailable]" in captured.err
    assert SECRET not in captured.err and "postgresql://" not in captured.err
    assert main(["attach", "scan", "--json"]) == 1
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["code"] == "attach_unavailable" and SECRET not in error["message"]


def test_not_attached_is_said_plainly(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["attach", "scan"]) == 1
    assert "YUXI_DASH_ATTACH_CHECKPOINTER is not set" in capsys.readouterr().err
    assert main(["attach", "status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["configured"] is False


@pytest.mark.services
def test_the_connection_string_is_never_printed(
    platform: Platform, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    platform.run([ONE])
    monkeypatch.setenv("YUXI_DASH_ATTACH_CHECKPOINTER", platform.password_conninfo)
    get_settings.cache_clear()
    assert SECRET not in repr(get_settings()) and SECRET not in str(get_settings().model_dump())
    outputs = []
    for args in (["attach", "scan"], ["attach", "status"], ["threads"]):
        for extra in ([], ["--json"]):
            assert main([*args, *extra]) == 0
            captured = capsys.readouterr()
            outputs.append(captured.out + captured.err)
    assert _attached_threads() == {"plat-one"}
    for output in outputs:
        assert SECRET not in output and platform.role not in output


@pytest.mark.services
def test_nothing_is_written_to_the_platform(platform: Platform) -> None:
    platform.run([ONE])
    store = PlatformStore(platform.owner_conninfo)  # even with a role that could write
    try:
        latest = store.latest("plat-one")
        assert latest is not None
        with pytest.raises(ThreadAttached):
            store.write(
                "plat-one", {"token_usage": {}}, expected_checkpoint_id=latest.checkpoint_id
            )
        # below the refusal, the connections themselves are read-only
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            store.graph.update_state(
                {"configurable": {"thread_id": "plat-one", "checkpoint_ns": ""}},
                {"token_usage": {}},
                as_node="model",
            )
    finally:
        store.close()
    assert platform.latest_id("plat-one") == latest.checkpoint_id
    # and opening it runs no setup: the saver's migrations table is left as the platform has it
    rows = platform.rows("SELECT count(*) FROM checkpoint_migrations")
    owned = open_postgres_store(platform.reader_conninfo, setup=False, read_only=True)
    owned.close()
    assert platform.rows("SELECT count(*) FROM checkpoint_migrations") == rows


def test_the_scan_floor_steps_back_the_overlap_on_the_ids_clock() -> None:
    from langgraph.checkpoint.base.id import uuid6

    ids = [str(uuid6(clock_seq=step)) for step in range(-1, 5)]
    assert ids == sorted(ids)  # created in order, sorted as strings
    ticks = [checkpoint_time(i) for i in ids]
    assert all(t is not None for t in ticks)
    assert ticks == sorted(t or 0 for t in ticks)
    for checkpoint_id, tick in zip(ids, ticks, strict=True):
        assert tick is not None
        assert floor_id(tick) <= checkpoint_id < floor_id(tick + 1)
    newest = ids[-1]
    floor = scan_floor(newest, 300)
    assert checkpoint_time(floor) == checkpoint_time(newest) - 300 * 10_000_000  # type: ignore[operator]
    assert all(floor < i for i in ids)
    assert scan_floor("", 300) == ""
    assert scan_floor("not-a-uuid6", 300) == ""  # no clock to step back on: read everything
    assert scan_floor("3b241101-e2bb-4255-8caf-4136c566a962", 300) == ""  # a UUIDv4


def test_settings_keep_the_checkpointer_secret() -> None:
    settings = Settings(attach_checkpointer=DOWN)
    assert settings.attach_configured and settings.attach_scan_seconds == 30
    assert SECRET not in repr(settings) and SECRET not in settings.model_dump_json()
    assert not Settings(attach_checkpointer="").attach_configured
