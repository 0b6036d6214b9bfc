"""The first look at an offloaded result (yuxi_dash.tool_results.opened): what the model got, and the file.

A real thread compressed by the service (its tool results offloaded into the real workdir,
the preview messages in its real checkpoint), then the file changed or removed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.service.builders import OPERATOR, seed_thread
from yuxi_dash import sources
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.compression import parse_saved_result
from yuxi_dash.errors import PathRefused
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import ToolResult
from yuxi_dash.store.queries import get_thread, list_audit
from yuxi_dash.tool_results.index import READ_ACTION
from yuxi_dash.tool_results.opened import open_tool_result

VIEWER = Actor(id="support@example.com", role=Role.VIEWER)


def _offloaded() -> tuple[int, str, Path]:
    """A compressed thread's offloaded result: (its id, the preview the model got, its file)."""
    seed_thread("t1")
    assert sources.compress_thread_context("t1", actor=OPERATOR).status == "completed"
    with session_scope() as session:
        row = session.scalars(sa.select(ToolResult).order_by(ToolResult.id)).first()
        assert row is not None and row.tool_call_id, "the compress offloads tool results"
        (message,) = [
            m
            for m in get_thread(session, "t1").state.messages
            if getattr(m, "tool_call_id", None) == row.tool_call_id
        ]
        saved = parse_saved_result(message.content)
        assert saved is not None and saved.path == row.path
        return row.id, str(message.content), Path(get_settings().workdir) / row.path


def test_what_the_model_got_comes_from_the_checkpoint_whatever_the_file_became(
    db_url: str,
) -> None:
    result_id, sent, file = _offloaded()
    first = open_tool_result(result_id, actor=VIEWER)
    assert (first.integrity, first.sent) == ("ok", sent)
    assert first.content is not None and first.content.text == file.read_text()

    file.write_text("tampered")
    changed = open_tool_result(result_id, actor=VIEWER)
    assert (changed.integrity, changed.sent) == ("mismatch", sent)  # not rebuilt from the file
    assert changed.content is not None and changed.content.text == "tampered"

    file.unlink()
    gone = open_tool_result(result_id, actor=VIEWER)  # no refusal: the model's copy is shown
    assert (gone.integrity, gone.sent, gone.content) == ("missing", sent, None)
    with session_scope() as session:
        reads = list_audit(session, action=READ_ACTION)
    assert [(r.outcome, r.detail["integrity"], r.detail["sent"]) for r in reads] == [
        ("ok", "missing", True),
        ("ok", "mismatch", True),
        ("ok", "ok", True),
    ]
    assert all("tampered" not in str(r.detail) for r in reads)  # never the content


def test_a_result_the_checkpoint_does_not_hold_says_so(db_url: str) -> None:
    result_id, _, _ = _offloaded()
    with session_scope() as session:
        session.get(ToolResult, result_id).tool_call_id = "no-such-call"
    opened = open_tool_result(result_id, actor=VIEWER)
    assert opened.sent is None and opened.integrity == "ok"
    assert opened.sent_missing == "the thread's newest checkpoint does not hold it"


def test_a_path_out_of_the_workdir_is_refused_and_audited(db_url: str) -> None:
    result_id, _, _ = _offloaded()
    with session_scope() as session:
        session.get(ToolResult, result_id).path = "../../etc/passwd"
    with pytest.raises(PathRefused):
        open_tool_result(result_id, actor=VIEWER)
    with session_scope() as session:
        (read,) = list_audit(session, action=READ_ACTION)
    assert (read.outcome, read.detail["code"]) == ("refused", "path_refused")
