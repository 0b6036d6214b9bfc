"""A large first scan shows each thread at its newest usage before projecting its history.

The platform is a real one (a separate process, a `create_agent` graph on LangGraph's
PostgresSaver); odd rows are written with the saver's own ``put``. A scan that shows first
must end with the rows a scan that does not gives, also when it was stopped in between; a
thread it cannot project keeps no row.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from tests.attach.checkpoints import put_checkpoint, usage, values
from tests.attach.test_projector import counts, dump, second_database  # noqa: F401 - a fixture
from tests.attach.test_quarantine import POISON_USAGE
from tests.attach.test_scan import ROUND_ONE
from tests.fixtures.platform import Platform
from yuxi_dash.attach import newest_usage, projector, scanner
from yuxi_dash.attach.batch import NULL_TASK_ID
from yuxi_dash.attach.newest_usage import drop_unprojected, show_newest_usage
from yuxi_dash.attach.platform_store import PlatformStore, platform_store
from yuxi_dash.attach.projector import ChangedThread, new_row_values
from yuxi_dash.attach.scanner import CHANGED_THREADS_SQL, scan
from yuxi_dash.attach.status import stored_progress
from yuxi_dash.settings import get_settings
from yuxi_dash.store import db
from yuxi_dash.store.checkpointer import open_postgres_store
from yuxi_dash.store.compressions import CompressionRecord
from yuxi_dash.store.models import ChatMessage, Conversation, UsageSnapshotRow, utcnow
from yuxi_dash.usage import UsageSnapshot

pytestmark = pytest.mark.services


def _changed(store: PlatformStore) -> list[ChangedThread]:
    rows = store.fetch(CHANGED_THREADS_SQL, {"floor": ""}, prepare=False)
    return [
        ChangedThread(str(r["thread_id"]), str(r["newest"]), int(r["checkpoints"])) for r in rows
    ]


def _rows() -> dict[str, Any]:
    with db.session_scope() as session:
        return {row.thread_id: row for row in session.execute(sa.select(Conversation.__table__))}


def stop_after(asked: int) -> Callable[[], bool]:
    """A ``should_stop`` that says stop from its ``asked + 1``-th question on (the show phase
    asks once per chunk before the projection asks)."""
    questions: list[None] = []

    def should_stop() -> bool:
        questions.append(None)
        return len(questions) > asked

    return should_stop


def _count(model: Any) -> int:
    with db.session_scope() as session:
        return int(session.scalar(sa.select(sa.func.count()).select_from(model)) or 0)


def test_a_scan_that_shows_first_ends_with_the_rows_of_one_that_does_not(
    db_url: str,
    second_database: str,  # noqa: F811 - the fixture imported above
    attached: Platform,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stopped right after showing (the threads at their newest usage, nothing projected),
    then resumed: the rows are those of a scan that never showed first (each thread projected
    alone, the reference path), compressions and the agent they record included."""
    shows = get_settings()
    plain = shows.model_copy(update={"database_url": second_database})
    db.get_engine(plain)
    attached.run(ROUND_ONE)
    ran = {**attached.run(ROUND_ONE), **attached.run([{**ROUND_ONE[0], "round": 2}])}  # summarizes

    stopped = scan(shows, show_first=True, should_stop=stop_after(1))  # shown, none projected
    assert stopped.stopped and stopped.projected == 0
    assert stopped.shown == 4 and stopped.shown_seconds is not None
    shown = _rows()
    assert set(shown) == set(ran)
    for thread_id, thread in ran.items():
        row = shown[thread_id]
        assert row.checkpoint_id is None  # nothing projected: its history is still to read
        assert row.summary_pressure_ratio == pytest.approx(
            thread["token_usage"]["summary_pressure_ratio"], abs=1e-4
        )
        assert row.origin == "attached" and row.platform_id == stopped.platform
    assert (shown["plat-hot"].user_id, shown["plat-hot"].agent_slug) == ("alice", "research")
    assert shown["plat-anon"].user_id == "unknown"
    assert _count(UsageSnapshotRow) == 0 and _count(ChatMessage) == 0
    progress = stored_progress(shows)
    assert progress is not None and progress.progress.shown == 4
    assert progress.progress.line().startswith("4 threads shown at their newest usage · ")

    loaded: list[str] = []  # the threads whose projected rows a batch loads
    load = projector.load_projected

    def spy(session: Any, thread_ids: list[str], **kwargs: Any) -> Any:
        loaded.extend(thread_ids)
        return load(session, thread_ids, **kwargs)

    monkeypatch.setattr(projector, "load_projected", spy)
    resumed = scan(shows)
    assert loaded == []  # a shown row holds nothing projected: nothing to load
    assert resumed.shown == 0  # every thread has a row now: projected, not shown
    reference = scan(plain, show_first=False, together=False)  # each alone: the reference path
    assert reference.shown == 0 and reference.shown_seconds is None
    assert counts(resumed) == counts(reference) and resumed.projected == 4
    rows = dump(shows)
    assert rows == dump(plain)
    assert all(rows[table] for table in rows)  # compressions too: what they record is the same
    with db.session_scope() as session:
        agents = set(session.scalars(sa.select(CompressionRecord.agent_slug)))
    assert agents == {"research"}  # the newest checkpoint's agent, in both (not "attached")


def test_only_a_newest_checkpoint_that_states_its_usage_alone_is_shown(
    db_url: str, attached: Platform
) -> None:
    """No usage, usage we cannot hold, writes of no task, an id we cannot hold: left to the
    projection. A row that exists is left as it is."""
    owner = attached.owner_conninfo
    put_checkpoint(owner, "n-good", values(tokens=6000), metadata={"user_id": "erin"})
    put_checkpoint(owner, "n-none", {"messages": values()["messages"]})
    put_checkpoint(owner, "n-nan", {**values(), "token_usage": POISON_USAGE["p-nan"]})
    put_checkpoint(owner, "bad\nid", values())
    pending = put_checkpoint(owner, "n-pending", values(tokens=7000))
    put_checkpoint(owner, "n-held", values(tokens=7500))
    saver = open_postgres_store(owner, setup=False)
    try:
        config: Any = {
            "configurable": {
                "thread_id": "n-pending",
                "checkpoint_ns": "",
                "checkpoint_id": pending,
            }
        }
        saver.saver.put_writes(config, [("token_usage", usage(100))], NULL_TASK_ID)
    finally:
        saver.close()
    with db.session_scope() as session:
        session.add(
            Conversation(
                thread_id="n-held", user_id="u", agent_slug="a", title="mine", origin="attached"
            )
        )
    store = platform_store(get_settings())
    assert isinstance(store, PlatformStore)

    assert show_newest_usage(get_settings(), store, _changed(store), "sys/db") == {"n-good"}
    rows = _rows()
    assert set(rows) == {"n-good", "n-held"}
    good = rows["n-good"]
    stated = UsageSnapshot(
        llm_input_tokens=6000, next_llm_input_tokens=6000, context_window=8000,
        summary_trigger_tokens=25_000, summary_active=False,
    )  # fmt: skip
    assert good.summary_pressure_ratio == pytest.approx(stated.summary_pressure_ratio)
    assert good.context_usage_ratio == pytest.approx(stated.context_usage_ratio)
    assert (good.user_id, good.platform_id, good.checkpoint_id) == ("erin", "sys/db", None)
    assert good.last_activity_at is not None and good.usage_measured_at is not None
    assert rows["n-held"].title == "mine" and rows["n-held"].summary_pressure_ratio in (None, 0)


def test_a_thread_shown_then_quarantined_keeps_no_row(
    db_url: str, attached: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NUL text in its messages, usage we can hold: shown, then quarantined by the projection,
    and its row goes (a quarantined thread is never drawn): in the same scan, in the scan after
    a stopped one, and in any later scan that finds such a row, window or not."""
    owner = attached.owner_conninfo
    put_checkpoint(owner, "q-good", values(tokens=20_000), metadata={"user_id": "alice"})
    nul = put_checkpoint(owner, "q-nul", values("before\x00after", tokens=30_000))

    report = scan(get_settings(), show_first=True)
    assert (report.shown, report.projected, report.quarantined) == (2, 1, 1)
    rows = _rows()
    assert set(rows) == {"q-good"} and rows["q-good"].checkpoint_id is not None

    put_checkpoint(owner, "q-nul2", values("a\x00b", tokens=30_000))
    put_checkpoint(owner, "q-good2", values(tokens=2_000))
    stopped = scan(get_settings(), show_first=True, should_stop=stop_after(1))
    assert stopped.shown == 2 and set(_rows()) == {"q-good", "q-nul2", "q-good2"}
    after = scan(get_settings())
    assert (after.shown, after.projected, after.quarantined) == (0, 1, 1)
    assert set(_rows()) == {"q-good", "q-good2"}

    # a row shown by a scan whose drop never came (busy, a crash), its thread out of the next
    # scans' window now: a later scan still drops it
    with db.session_scope() as session:
        shown = {"summary_pressure_ratio": 1.2, "usage_measured_at": utcnow()}
        session.add(Conversation(**new_row_values("q-nul"), **shown))
    monkeypatch.setattr(scanner, "OVERLAP_SECONDS", 0.0)  # as if minutes had passed
    put_checkpoint(owner, "q-later", values(tokens=1_000))
    later = scan(get_settings())
    assert (later.quarantined_skipped, later.projected) == (0, 1)  # q-nul out of its window
    assert set(_rows()) == {"q-good", "q-good2", "q-later"}
    assert nul  # still its newest checkpoint: quarantined there, never read again


def test_only_a_shown_row_nothing_refers_to_is_dropped(db_url: str) -> None:
    """Usage, no projected checkpoint, attached, no rows that refer to it: else it stays."""
    at = utcnow()
    usage = {"summary_pressure_ratio": 0.9, "usage_measured_at": at}
    with db.session_scope() as session:
        session.add(Conversation(**new_row_values("d-shown"), **usage))
        session.add(Conversation(**new_row_values("d-talked"), **usage))
        session.add(Conversation(**new_row_values("d-empty")))  # a batch's row, read alone
        session.add(Conversation(**new_row_values("d-projected"), **usage, checkpoint_id="c1"))
        session.add(Conversation(**{**new_row_values("d-ours"), "origin": "dashboard"}, **usage))
        session.flush()
        session.add(
            ChatMessage(thread_id="d-talked", sequence=1, role="user", content="hi", created_at=at)
        )
    every = ["d-shown", "d-talked", "d-empty", "d-projected", "d-ours", "d-none"]
    assert drop_unprojected(get_settings(), every) == 1
    assert set(_rows()) == {"d-talked", "d-empty", "d-projected", "d-ours"}
    assert drop_unprojected(get_settings(), []) == 0


def test_a_busy_drop_is_left_for_a_later_scan(db_url: str) -> None:
    """The shown row locked by another transaction: nothing dropped, no error; then dropped."""
    settings = get_settings().model_copy(update={"lock_timeout_seconds": 0.3})
    with db.session_scope() as session:
        session.add(Conversation(**new_row_values("b-shown"), usage_measured_at=utcnow()))
    holder = db.get_engine(settings).connect()
    try:
        if db_url.startswith("sqlite"):  # the one writer's lock, on a connection of its own
            holder.close()
            holder = sqlite3.connect(sa.engine.make_url(db_url).database, isolation_level=None)
            holder.execute("BEGIN IMMEDIATE")
        else:
            holder.begin()
            holder.execute(
                sa.select(Conversation.id)
                .where(Conversation.thread_id == "b-shown")
                .with_for_update()
            )
        assert drop_unprojected(settings, ["b-shown"]) == 0
    finally:
        holder.rollback()
        holder.close()
    assert drop_unprojected(settings, ["b-shown"]) == 1


def test_a_refused_insert_leaves_the_threads_to_the_projection(
    db_url: str, attached: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(3):
        put_checkpoint(attached.owner_conninfo, f"r-{n}", values(tokens=1000 + n))

    def refused(*_args: Any) -> set[str]:
        raise sa.exc.IntegrityError("INSERT", {}, ValueError("refused"))

    monkeypatch.setattr(newest_usage, "insert_new_rows", refused)
    report = scan(get_settings(), show_first=True)
    assert (report.shown, report.projected, report.failed) == (0, 3, 0)


def test_odd_newest_rows_are_left_to_the_projection_and_never_stop_the_scan(
    db_url: str, attached: Platform
) -> None:
    """A newest checkpoint without a time, metadata that is no object: not shown; the scan
    shows the others and projects (or quarantines) every one."""
    owner = attached.owner_conninfo
    put_checkpoint(owner, "o-good", values(tokens=6000))
    put_checkpoint(owner, "o-no-ts", values(tokens=6000))
    put_checkpoint(owner, "o-array", values(tokens=6000))
    with psycopg.connect(owner, autocommit=True) as conn:
        conn.execute(
            "UPDATE checkpoints SET checkpoint = checkpoint - 'ts' WHERE thread_id = %s",
            ("o-no-ts",),
        )
        conn.execute(
            "UPDATE checkpoints SET metadata = '[1, 2]'::jsonb WHERE thread_id = %s", ("o-array",)
        )
    store = platform_store(get_settings())
    assert isinstance(store, PlatformStore)
    shown = show_newest_usage(get_settings(), store, _changed(store))
    assert shown <= {"o-good", "o-array"} and "o-good" in shown and "o-no-ts" not in shown
    report = scan(get_settings())
    assert report.failed == 0 and report.projected + report.quarantined == 3


def test_a_scan_shows_first_from_its_threshold_on_in_chunks(
    db_url: str, attached: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(5):
        put_checkpoint(attached.owner_conninfo, f"c-{n}", values(tokens=1000 + n))
    monkeypatch.setattr(newest_usage, "CHUNK", 2)  # three chunks
    monkeypatch.setattr(scanner, "SHOW_FIRST_MIN", 6)
    stopped = scan(get_settings(), should_stop=lambda: True)
    assert stopped.shown == 0 and stopped.shown_seconds is None and _rows() == {}
    monkeypatch.setattr(scanner, "SHOW_FIRST_MIN", 5)
    stopped = scan(get_settings(), should_stop=lambda: True)
    assert stopped.shown == 0  # asked to stop before the first chunk: nothing shown
    stopped = scan(get_settings(), should_stop=stop_after(2))
    assert stopped.shown == 4 and len(_rows()) == 4  # two chunks of two, then asked to stop
    rest = scan(get_settings())
    assert rest.shown == 0 and rest.projected == 5  # one left unseen: under the threshold
