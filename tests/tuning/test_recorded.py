"""yuxi_dash.tuning.recorded: an agent's threads read back with their originals and overhead."""

from __future__ import annotations

import shutil
from pathlib import Path

import sqlalchemy as sa
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from tests.tuning.fleet_builders import AGENT, simulated_fleet
from yuxi_dash.agents import AGENT_DEFAULTS
from yuxi_dash.compression import is_saved_result, parse_saved_result
from yuxi_dash.files.workdir import Workdir
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Conversation, UsageSnapshotRow
from yuxi_dash.store.thread_store import state_store
from yuxi_dash.tuning.recorded import (
    RecordedThread,
    agent_settings,
    load_recorded,
    overhead_tokens,
    restore_originals,
    thread_rows,
)


def _loaded() -> list[RecordedThread]:
    settings = get_settings()
    with session_scope() as session:
        rows = thread_rows(session, AGENT)
    found = list(load_recorded(rows, settings, Workdir(settings.workdir)))
    return [thread for thread in found if isinstance(thread, RecordedThread)]


def test_rows_count_model_calls_and_leave_deleted_threads_out() -> None:
    ids = simulated_fleet(threads=3, turns=3)
    with session_scope() as session:
        session.query(Conversation).filter_by(thread_id=ids[1]).update(
            {"status": "deleted", "deleted_at": Conversation.created_at}
        )
    with session_scope() as session:
        rows = thread_rows(session, AGENT)
    assert [row.thread_id for row in rows] == [ids[0], ids[2]]
    assert all(row.model_calls >= 3 and row.origin == "own" for row in rows)
    assert {row.label for row in rows} == {"ours"}
    with session_scope() as session:
        assert thread_rows(session, "nobody") == []
        first = session.scalars(
            sa.select(UsageSnapshotRow).where(UsageSnapshotRow.thread_id == ids[0])
        ).first()
        assert first is not None
        columns = {c.key: getattr(first, c.key) for c in UsageSnapshotRow.__table__.columns}
        session.add(UsageSnapshotRow(**{**columns, "id": None, "source": "manual_compression"}))
    with session_scope() as session:
        again = thread_rows(session, AGENT)
    assert [row.model_calls for row in again] == [row.model_calls for row in rows]  # no call


def test_offloaded_results_get_their_originals_back() -> None:
    simulated_fleet(threads=1, turns=6)
    [thread] = _loaded()
    stored = state_store(get_settings()).latest(thread.thread_id)
    assert stored is not None
    recorded = stored.context().messages
    offloaded = [n for n, m in enumerate(recorded) if is_saved_result(m)]
    assert offloaded and thread.unrestored == 0
    for index in offloaded:
        assert not is_saved_result(thread.messages[index])
        assert len(str(thread.messages[index].content)) > len(str(recorded[index].content))


def test_a_missing_file_leaves_the_header_and_is_counted() -> None:
    simulated_fleet(threads=1, turns=6)
    shutil.rmtree(Path(get_settings().workdir) / "outputs" / "large_tool_results")
    [thread] = _loaded()
    assert thread.unrestored > 0
    assert sum(is_saved_result(m) for m in thread.messages) == thread.unrestored
    messages, missing = restore_originals(thread.messages, None)
    assert missing == thread.unrestored and messages == thread.messages


def test_only_the_tool_results_directory_is_read_back() -> None:
    simulated_fleet(threads=1, turns=6)
    settings = get_settings()
    stored = state_store(settings).latest(_loaded()[0].thread_id)
    assert stored is not None
    [message, *_] = [m for m in stored.context().messages if is_saved_result(m)]
    saved = parse_saved_result(message.content)
    assert saved is not None
    workdir = Workdir(settings.workdir)
    original, _status = workdir.read_verified(saved.path, saved.sha256)
    workdir.write_file("outputs/elsewhere.txt", original)  # the same bytes, another place
    moved = message.model_copy(
        update={"content": str(message.content).replace(saved.path, "outputs/elsewhere.txt")}
    )
    assert restore_originals([message], workdir)[1] == 0
    assert restore_originals([moved], workdir)[1] == 1  # left as its header


def test_the_overhead_is_the_first_calls_count_less_its_messages() -> None:
    call = {"name": "query_kb", "args": {"q": "x"}, "id": "c1"}
    messages = [
        HumanMessage("hello"),
        AIMessage("", tool_calls=[call]),
        ToolMessage("r", tool_call_id="c1"),
    ]
    from yuxi_dash.compression import count_tokens

    exchanged = count_tokens(messages[:2])
    assert overhead_tokens(messages, ("model_call", exchanged + 240)) == 240
    assert overhead_tokens(messages, ("auto_compaction", exchanged + 240)) == 0
    assert overhead_tokens(messages, None) == 0
    assert overhead_tokens([HumanMessage("no call yet")], ("model_call", 500)) == 0


def test_agents_with_threads_but_no_row_have_the_defaults() -> None:
    simulated_fleet(threads=1, turns=1)
    with session_scope() as session:
        session.add(Conversation(thread_id="plat-1", user_id="u9", agent_slug="platform-agent"))
    with session_scope() as session:
        found = {agent["slug"]: agent for agent in agent_settings(session)}
    assert found[AGENT]["summary_threshold"] == 8
    assert found["platform-agent"] == {"slug": "platform-agent", **AGENT_DEFAULTS}
