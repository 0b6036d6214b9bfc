"""Offloaded tool results: listing, re-hash verification, confined and audited reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from yuxi_dash import service
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.errors import InvalidInput, PathRefused, ToolResultNotFound
from yuxi_dash.files.workdir import Workdir
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import ToolResult
from yuxi_dash.store.queries import list_audit
from yuxi_dash.tool_results.index import (
    count_tool_results,
    list_tool_results,
    read_tool_result,
    verify_tool_results,
)

VIEWER = Actor(id="support@example.com", role=Role.VIEWER)


def _seed() -> dict[str, int]:
    """Two threads of two users with three saved files; returns index ids by name."""
    workdir = Workdir(get_settings().workdir)
    saved = {
        "logs": ("t1", "run_command", "log line\n" * 500),
        "kb": ("t1", "query_kb", '{"results": [' + '{"id": 1}, ' * 300 + "{}]}"),
        "web": ("t2", "web_search", "result " * 800),
    }
    ids: dict[str, int] = {}
    files = {}
    with session_scope() as session:
        service.upsert_agent(session, "agent-a", capabilities=["context_compression"])
        service.create_thread(session, "t1", user_id="u1", agent_slug="agent-a")
        service.create_thread(session, "t2", user_id="u2", agent_slug="agent-a")
        for name, (thread_id, tool, content) in saved.items():
            file = files[name] = workdir.save_tool_result(tool, content)
            service.index_saved_files(session, thread_id, [(f"call-{name}", tool, file)])
            ids[name] = session.scalar(sa.select(ToolResult.id).where(ToolResult.path == file.path))
        # indexing the same file again for the same thread adds nothing
        assert (
            service.index_saved_files(session, "t1", [("again", "run_command", files["logs"])]) == 0
        )
    return ids


def test_list_and_count_with_filters(db_url: str) -> None:
    _seed()
    with session_scope() as session:
        everything = list_tool_results(session)
        assert {r.tool_name for r in everything} == {"run_command", "query_kb", "web_search"}
        assert count_tool_results(session) == 3
        assert {r.tool_name for r in list_tool_results(session, thread_id="t1")} == {
            "run_command",
            "query_kb",
        }
        (web,) = list_tool_results(session, user_id="u2")
        assert web.tool_name == "web_search" and web.user_id == "u2"
        assert web.approx_tokens == -(-web.chars // 4)
        assert {r.tool_name for r in list_tool_results(session, min_chars=4500)} == {
            "run_command",
            "web_search",
        }
        assert count_tool_results(session, tool_name="query_kb") == 1
        assert len(list_tool_results(session, limit=2)) == 2
        assert len(list_tool_results(session, limit=2, offset=2)) == 1


def test_verify_reports_ok_mismatch_and_missing(db_url: str) -> None:
    _seed()
    root = Path(get_settings().workdir)
    with session_scope() as session:
        rows = {r.tool_name: r for r in list_tool_results(session)}
        assert verify_tool_results(session).counts == {"ok": 3, "mismatch": 0, "missing": 0}
        (root / rows["run_command"].path).write_text("tampered")
        (root / rows["web_search"].path).unlink()
        report = verify_tool_results(session)
    assert report.counts == {"ok": 1, "mismatch": 1, "missing": 1}
    assert not report.all_ok
    statuses = {r.tool_name: r.status for r in report.results}
    assert statuses == {"run_command": "mismatch", "query_kb": "ok", "web_search": "missing"}
    assert report.to_dict()["checked"] == 3
    own_session = verify_tool_results(thread_id="t1")  # opens its own session
    assert sorted(r.status for r in own_session) == ["mismatch", "ok"] and len(own_session) == 2


def test_verify_pages_as_the_listing_pages(db_url: str) -> None:
    ids = _seed()
    # newest first is not id order: the first indexed file is the newest
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    with session_scope() as session:
        for name, minutes in (("logs", 2), ("kb", 0), ("web", 1)):
            session.get(ToolResult, ids[name]).created_at = t0 + timedelta(minutes=minutes)
    with session_scope() as session:
        listed = [r.id for r in list_tool_results(session)]
        assert listed == [ids["logs"], ids["web"], ids["kb"]]
        for limit, offset in ((1, 0), (2, 0), (1, 1), (2, 1), (5, 2), (0, 0), (1, 3)):
            page = verify_tool_results(session, limit=limit, offset=offset)
            # exactly the listing's page, reported by id
            assert [r.id for r in page] == sorted(listed[offset : offset + limit])
        assert [r.id for r in verify_tool_results(session, offset=1)] == sorted(listed[1:])
        assert [r.id for r in verify_tool_results(session)] == sorted(listed)  # no page: every row
        t1 = [r.id for r in list_tool_results(session, thread_id="t1")]
        assert [r.id for r in verify_tool_results(session, thread_id="t1", limit=1)] == t1[:1]
        narrowed = verify_tool_results(session, result_ids=[ids["kb"], ids["web"]], limit=1)
        assert [r.id for r in narrowed] == [ids["web"]]  # result ids narrow first, then the page
        newest = session.get(ToolResult, ids["logs"]).path
    (Path(get_settings().workdir) / newest).unlink()
    page = verify_tool_results(limit=1)  # its own session
    assert page.counts == {"ok": 0, "mismatch": 0, "missing": 1}
    assert verify_tool_results(limit=2, offset=1).all_ok
    for bad in ({"limit": -1}, {"offset": -1}):
        with pytest.raises(InvalidInput):
            verify_tool_results(**bad)


def test_verify_treats_an_escaping_path_as_missing(db_url: str) -> None:
    ids = _seed()
    with session_scope() as session:
        session.get(ToolResult, ids["kb"]).path = "../../etc/passwd"
    with session_scope() as session:
        report = verify_tool_results(session, thread_id="t1")
    assert {r.id: r.status for r in report.results}[ids["kb"]] == "missing"


def test_read_returns_a_window_and_audits(db_url: str) -> None:
    ids = _seed()
    content = read_tool_result(ids["logs"], actor=VIEWER, offset=9, limit=18)
    assert content.text == "log line\nlog line\n"
    assert content.total_chars == 4500 and content.truncated and content.integrity == "ok"
    with session_scope() as session:
        (audit,) = list_audit(session, action="read_tool_result")
    assert (audit.actor, audit.outcome, audit.target) == (
        VIEWER.id,
        "ok",
        f"tool_result:{ids['logs']}",
    )
    assert audit.detail["path"] == content.path
    assert "text" not in audit.detail and "log line" not in str(audit.detail)


def test_read_of_a_damaged_file_is_a_mismatch_not_a_crash(db_url: str) -> None:
    ids = _seed()
    with session_scope() as session:
        path = session.get(ToolResult, ids["logs"]).path
    target = Path(get_settings().workdir) / path
    target.write_text("log line\n" * 500)  # same text: the recorded hash still holds
    assert read_tool_result(ids["logs"], actor=VIEWER).integrity == "ok"
    target.write_bytes(b"log line\n\xff\xfe broken")  # not UTF-8 any more
    content = read_tool_result(ids["logs"], actor=VIEWER)
    assert content.integrity == "mismatch"
    assert content.text.startswith("log line\n") and "broken" in content.text
    with session_scope() as session:
        audits = list_audit(session, action="read_tool_result")
    assert [a.detail["integrity"] for a in audits] == ["mismatch", "ok"]


def test_read_refuses_paths_outside_the_workdir_and_audits(db_url: str, tmp_path: Path) -> None:
    ids = _seed()
    secret = tmp_path / "secret.txt"
    secret.write_text("not yours")
    with session_scope() as session:
        session.get(ToolResult, ids["kb"]).path = "../secret.txt"
        session.get(ToolResult, ids["web"]).path = str(secret)
    for result_id in (ids["kb"], ids["web"]):
        with pytest.raises(PathRefused):
            read_tool_result(result_id, actor=VIEWER)
    with session_scope() as session:
        audits = list_audit(session, action="read_tool_result")
    assert [a.outcome for a in audits] == ["refused", "refused"]
    assert {a.detail["code"] for a in audits} == {"path_refused"}


def test_read_missing_file_and_unknown_id(db_url: str) -> None:
    ids = _seed()
    with session_scope() as session:
        path = session.get(ToolResult, ids["web"]).path
    (Path(get_settings().workdir) / path).unlink()
    with pytest.raises(ToolResultNotFound):
        read_tool_result(ids["web"], actor=VIEWER)
    with pytest.raises(ToolResultNotFound):
        read_tool_result(99999, actor=VIEWER)


def test_the_platform_and_our_results_resolve_against_their_own_workdirs(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29 item 5: YUXI_DASH_ATTACH_WORKDIR holds the platform's files, ours stay ours."""
    from yuxi_dash.store.models import Conversation
    from yuxi_dash.wording import check_label

    ids = _seed()  # t1 and t2, ours, in YUXI_DASH_WORKDIR
    platform_root = tmp_path / "platform-volume"
    Workdir(platform_root).initialize()
    saved = Workdir(platform_root).save_tool_result("query_kb", "platform result " * 400)
    with session_scope() as session:
        service.create_thread(session, "plat-1", user_id="u1", agent_slug="agent-a")
        session.execute(
            sa.update(Conversation)
            .where(Conversation.thread_id == "plat-1")
            .values(origin="attached")
        )
        service.index_saved_files(session, "plat-1", [("call-p", "query_kb", saved)])
        platform_id = session.scalar(sa.select(ToolResult.id).where(ToolResult.path == saved.path))
    monkeypatch.setenv("YUXI_DASH_ATTACH_WORKDIR", str(platform_root))
    get_settings.cache_clear()

    report = verify_tool_results()
    assert report.all_ok and len(report) == 4  # both volumes: every file where it belongs
    content = read_tool_result(platform_id, actor=VIEWER)
    assert content.integrity == "ok" and content.text.startswith("platform result")
    assert read_tool_result(ids["web"], actor=VIEWER).integrity == "ok"

    # the platform's volume not mounted here: its files are "not on this volume", ours ok
    monkeypatch.setenv("YUXI_DASH_ATTACH_WORKDIR", str(tmp_path / "not-mounted"))
    get_settings.cache_clear()
    statuses = {r.id: r.status for r in verify_tool_results()}
    assert statuses.pop(platform_id) == "missing"
    assert set(statuses.values()) == {"ok"}
    assert check_label("missing") == "file not on this volume"
    assert check_label("mismatch") == "content changed"


def test_the_attach_workdir_defaults_to_ours(db_url: str) -> None:
    settings = get_settings()
    assert settings.attach_workdir is None
    assert settings.workdir_for("attached") == settings.workdir_for("dashboard") == settings.workdir
