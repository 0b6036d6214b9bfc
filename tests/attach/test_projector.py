"""The batched projection of a scan gives the rows the per-thread projection gives.

One real platform (a separate process running a real `create_agent` graph on
LangGraph's PostgresSaver) is attached by two dashboards at once, each with
its own database: one scans with the batches (one platform query and one
write per table for many threads), the other with every thread projected
alone under its row lock (`scan(together=False)`, the per-thread path). After
the first scan and after an incremental one, every projected row is the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from tests.attach.test_refusals import poison
from tests.attach.test_scan import ROUND_ONE
from tests.fixtures.platform import Platform
from yuxi_dash.attach import projector
from yuxi_dash.attach.batch import NULL_TASK_ID, read_new_checkpoints
from yuxi_dash.attach.platform_store import PlatformStore, platform_store
from yuxi_dash.attach.scanner import ScanReport, scan
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store import db
from yuxi_dash.store.checkpointer import WRITER_NODE, open_postgres_store
from yuxi_dash.store.compressions import CompressionRecord
from yuxi_dash.store.models import ChatMessage, Conversation, ToolResult, UsageSnapshotRow

pytestmark = pytest.mark.services

# (table, columns not compared: row ids, and times that are "now" when the row is written)
_TABLES = (
    (Conversation, {"id", "updated_at"}),
    (UsageSnapshotRow, {"id"}),
    (ChatMessage, {"id"}),
    (ToolResult, {"id", "created_at"}),
    (CompressionRecord, {"id"}),
)
_COUNTS = ("threads_changed", "projected", "checkpoints_read", "new_checkpoints", "failed")


@pytest.fixture
def second_database(db_url: str, tmp_path: Path) -> Iterator[str]:
    """Another empty dashboard database of the same kind as ``db_url``."""
    if db_url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'per-thread.db'}"
        return
    yield from _fresh_postgres()


def _fresh_postgres() -> Iterator[str]:
    from tests.fixtures.database import ADMIN_URL, _create_database, _drop_database

    url = _create_database(ADMIN_URL)
    try:
        yield url
    finally:
        db.forget_engines()
        _drop_database(ADMIN_URL, url)


@pytest.fixture
def alone(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the threads projected alone (through `projector.project_one`), in order."""
    projected: list[str] = []
    one = projector.project_one

    def spy(settings: Settings, store: Any, thread: projector.ChangedThread, tally: Any) -> None:
        projected.append(thread.thread_id)
        one(settings, store, thread, tally)

    monkeypatch.setattr(projector, "project_one", spy)
    return projected


def dump(settings: Settings) -> dict[str, list[tuple[Any, ...]]]:
    """Every projected row, without ids and write times, in a stable order."""
    rows: dict[str, list[tuple[Any, ...]]] = {}
    with db.session_scope(settings) as session:
        for model, skipped in _TABLES:
            columns = [c for c in model.__table__.columns if c.name not in skipped]
            result = session.execute(sa.select(*columns))
            rows[model.__tablename__] = sorted(
                (tuple(r) for r in result), key=lambda r: tuple(str(v) for v in r)
            )
    return rows


def counts(report: ScanReport) -> dict[str, int]:
    return {name: getattr(report, name) for name in _COUNTS}


def test_batched_and_per_thread_scans_project_identical_rows(
    db_url: str, second_database: str, attached: Platform, alone: list[str]
) -> None:
    batched = get_settings()
    per_thread = batched.model_copy(update={"database_url": second_database})
    db.get_engine(per_thread)  # migrated like the first

    attached.run(ROUND_ONE)
    first_batched = scan(batched)
    assert alone == []  # every thread went through the batch
    first_alone = scan(per_thread, together=False)
    assert sorted(alone) == sorted(str(t["thread_id"]) for t in ROUND_ONE)
    assert counts(first_batched) == counts(first_alone)
    assert first_batched.projected == 4 and first_batched.failed == 0
    rows = dump(batched)
    assert rows == dump(per_thread)
    assert all(rows[table] for table in rows if table != "compressions")  # rows to compare

    # the platform moves on: two threads take turns (one summarizes), one is new
    attached.run(
        [
            {**ROUND_ONE[0], "round": 2},
            {**ROUND_ONE[2], "turns": 1, "round": 2},
            {"thread_id": "plat-new", "user_id": "dave", "agent": "coder", "turns": 2,
             "result_words": 400},
        ]
    )  # fmt: skip
    alone.clear()
    second_batched = scan(batched)
    assert alone == []
    second_alone = scan(per_thread, together=False)
    assert counts(second_batched) == counts(second_alone)
    assert second_batched.projected == 3 and second_batched.new_checkpoints > 0
    rows = dump(batched)
    assert rows == dump(per_thread)
    assert rows["compressions"]  # the summary of round two, recorded alike

    # steps that leave the messages alone (the batch reads them without their messages): a usage
    # update, and one that drops the usage (the state is then measured, from its messages)
    owner = open_postgres_store(attached.owner_conninfo, setup=False)
    try:
        for thread_id, bump in (("plat-cool", True), ("plat-anon", False)):
            latest = owner.latest(thread_id)
            assert latest is not None
            usage = dict(latest.values.get("token_usage") or {})
            usage["next_llm_input_tokens"] = int(usage["next_llm_input_tokens"]) + 100
            usage.update(model="gpt-test", output_tokens=42)  # as the middleware records them
            owner.write(
                thread_id,
                {"token_usage": usage if bump else {}},
                expected_checkpoint_id=latest.checkpoint_id,
            )
        # a fork (an edit or regenerate in a chat UI): a new checkpoint on an older one carries
        # that one's usage, already projected: neither path may write its snapshot again
        stated = [c for c in owner.history("plat-hot") if c.values.get("token_usage")]
        older = next(
            c for c in stated if c.values["token_usage"] != stated[0].values["token_usage"]
        )
        owner.graph.update_state(
            {"configurable": {"thread_id": "plat-hot", "checkpoint_id": older.checkpoint_id}},
            {"token_usage": older.values["token_usage"]},
            as_node=WRITER_NODE,
        )
    finally:
        owner.close()
    alone.clear()
    third_batched = scan(batched)
    assert alone == []
    third_alone = scan(per_thread, together=False)
    assert counts(third_batched) == counts(third_alone)
    assert third_batched.projected == 3
    rows = dump(batched)
    assert rows == dump(per_thread)
    with db.session_scope(batched) as session:
        tokens = session.scalars(
            sa.select(UsageSnapshotRow.llm_input_tokens)
            .where(UsageSnapshotRow.thread_id == "plat-anon")
            .order_by(UsageSnapshotRow.id.desc())
        ).first()
    assert tokens is not None and tokens > 100  # measured on the state's messages
    with db.session_scope(batched) as session:
        call = session.execute(
            sa.select(UsageSnapshotRow.model, UsageSnapshotRow.output_tokens)
            .where(UsageSnapshotRow.thread_id == "plat-cool")
            .order_by(UsageSnapshotRow.id.desc())
        ).first()
    assert call is not None and tuple(call) == ("gpt-test", 42)  # the same in both paths (dump)


def test_a_first_scan_records_the_threads_agent_on_its_compressions_on_both_paths(
    db_url: str, second_database: str, attached: Platform
) -> None:
    """A thread read from its first checkpoint is named from its newest before its checkpoints
    are projected: its compressions record its agent, not the placeholder, batched or alone."""
    batched = get_settings()
    per_thread = batched.model_copy(update={"database_url": second_database})
    db.get_engine(per_thread)
    attached.run(ROUND_ONE[:1])
    attached.run([{**ROUND_ONE[0], "round": 2}])  # summarizes
    scan(batched, show_first=False)
    scan(per_thread, show_first=False, together=False)
    rows = dump(batched)
    assert rows["compressions"] and rows == dump(per_thread)
    with db.session_scope(batched) as session:
        agents = set(session.scalars(sa.select(CompressionRecord.agent_slug)))
    assert agents == {"research"}


def _folded_checkpoint(owner: Any, thread_id: str) -> str:
    """A checkpoint of the thread between two others, at its parent's usage version (one the
    batch's query folds away)."""
    config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    history = list(owner.saver.list(config))  # newest first
    for newer, older in zip(history[1:-1], history[2:], strict=False):
        named = newer.checkpoint["channel_versions"]
        before = older.checkpoint["channel_versions"]
        if all(named.get(c) == before.get(c) for c in ("token_usage", "_summarization_event")):
            return str(newer.checkpoint["id"])
    raise AssertionError("no folded checkpoint in the thread")


@pytest.mark.parametrize("where", ["newest", "folded"])
def test_a_thread_with_writes_of_no_task_is_read_alone_and_projects_the_same_rows(
    db_url: str, second_database: str, attached: Platform, alone: list[str], where: str
) -> None:
    """Writes of no task change the state's values (get_state applies them): the batch does
    not rebuild that, it hands the thread to the per-thread path, langgraph's public API.
    Also when they sit on a checkpoint the batch's query folds away."""
    batched = get_settings()
    per_thread = batched.model_copy(update={"database_url": second_database})
    db.get_engine(per_thread)
    attached.run(ROUND_ONE[:2])
    owner = open_postgres_store(attached.owner_conninfo, setup=False)
    try:
        latest = owner.latest("plat-cool")
        assert latest is not None
        usage = dict(latest.values["token_usage"])
        usage["next_llm_input_tokens"] = int(usage["next_llm_input_tokens"]) + 500
        target = (
            latest.checkpoint_id if where == "newest" else _folded_checkpoint(owner, "plat-cool")
        )
        config: Any = {
            "configurable": {"thread_id": "plat-cool", "checkpoint_ns": "", "checkpoint_id": target}
        }
        owner.saver.put_writes(config, [("token_usage", usage)], NULL_TASK_ID)
    finally:
        owner.close()
    first_batched = scan(batched)
    assert alone == ["plat-cool"]  # the other thread went through the batch
    first_alone = scan(per_thread, together=False)
    assert counts(first_batched) == counts(first_alone)
    assert first_batched.projected == 2 and first_batched.failed == 0
    assert dump(batched) == dump(per_thread)


def test_a_thread_gone_from_the_platform_reads_as_no_checkpoints(
    db_url: str, attached: Platform
) -> None:
    """A thread deleted between the scan's listing and the batch's read costs it nothing."""
    attached.run(ROUND_ONE[1:2])
    store = platform_store(get_settings())
    assert isinstance(store, PlatformStore)
    reads = read_new_checkpoints(store, {"plat-gone": None, "plat-cool": None})
    gone, cool = reads["plat-gone"], reads["plat-cool"]
    assert gone is not None and (gone.read, gone.new, gone.newer, gone.baseline) == (0, 0, [], None)
    assert cool is not None and cool.read > 0 and cool.newer


def test_a_checkpoint_with_an_odd_format_version_costs_its_thread_alone(
    db_url: str, attached: Platform, alone: list[str]
) -> None:
    """A ``v`` that is no number marks the thread as read alone; the batch's other threads
    and the scan go on."""
    attached.run(ROUND_ONE[:2])
    with psycopg.connect(attached.owner_conninfo, autocommit=True) as conn:
        conn.execute(
            "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, '{v}', '\"x\"') "
            "WHERE thread_id = 'plat-cool'"
        )
    report = scan(get_settings())
    assert alone == ["plat-cool"]
    with db.session_scope() as session:
        projected = set(session.scalars(sa.select(Conversation.thread_id)))
    assert "plat-hot" in projected
    assert report.projected + report.quarantined == 2 and report.failed == 0


@pytest.mark.parametrize("which", ["first", "newest"])
def test_a_checkpoint_that_is_no_json_object_costs_its_thread_alone(
    db_url: str, attached: Platform, alone: list[str], which: str
) -> None:
    """The batch reads parts of a checkpoint's JSON; one that is no object (first or later)
    is read alone, as langgraph's own reader reads it."""
    attached.run(ROUND_ONE[:2])
    with psycopg.connect(attached.owner_conninfo, autocommit=True) as conn:
        ids = [
            row[0]
            for row in conn.execute(
                "SELECT checkpoint_id FROM checkpoints WHERE thread_id = 'plat-cool' "
                "ORDER BY checkpoint_id"
            )
        ]
        conn.execute(
            "UPDATE checkpoints SET checkpoint = '[]'::jsonb WHERE thread_id = 'plat-cool' "
            "AND checkpoint_id = %s",
            (ids[0] if which == "first" else ids[-1],),
        )
    report = scan(get_settings())
    assert alone == ["plat-cool"]
    assert report.projected + report.quarantined == 2 and report.failed == 0


def test_a_refused_type_in_the_graph_input_quarantines_its_thread_on_both_paths(
    db_url: str, second_database: str, attached: Platform, tmp_path: Path
) -> None:
    """The batch builds a state from its stream channels only, but decodes every blob a
    checkpoint names, as the saver does: a type outside the allow-list in the graph's input
    (``__start__``) refuses the thread on both paths, and nothing it names runs."""
    batched = get_settings()
    per_thread = batched.model_copy(update={"database_url": second_database})
    db.get_engine(per_thread)
    attached.run(ROUND_ONE[:2])
    marker = tmp_path / "pwned"
    assert poison(attached, "plat-cool", "__start__", marker) > 0
    by_batch = scan(batched)
    by_thread = scan(per_thread, together=False)
    assert not marker.exists()
    for report in (by_batch, by_thread):
        assert (report.projected, report.quarantined, report.failed) == (1, 1, 0)
    # the batch keeps the row it made for the thread before reading it alone (its detail then
    # shows the refusal); nothing was projected into it
    rows, alone = dump(batched), dump(per_thread)
    placeholder = [row for row in rows["conversations"] if row[0] == "plat-cool"]
    assert len(placeholder) == 1 and placeholder[0] not in alone["conversations"]
    rows["conversations"].remove(placeholder[0])
    assert rows == alone
    with db.session_scope(batched) as session:
        kept = session.scalar(sa.select(Conversation).where(Conversation.thread_id == "plat-cool"))
        assert kept is not None and kept.checkpoint_id is None and kept.usage_measured_at is None
