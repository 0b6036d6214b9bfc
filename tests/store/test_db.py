"""Engines, sessions and migrations (yuxi_dash.store.db) on SQLite and real PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store import compressions, db
from yuxi_dash.store.models import Agent, Base

TABLES = {
    "agents",
    "api_tokens",
    "api_idempotency_keys",
    "conversations",
    "agent_runs",
    "run_requests",
    "scan_watermarks",
    "attach_quarantine",
    "usage_snapshots",
    "chat_messages",
    "tool_results",
    "audit_log",
    "memory_corrections",
    "alert_rules",
    "alert_states",
    "alert_outbox",
    "alert_channels",
    "scan_timings",
    "compressions",
}


# The checkpointer's own tables (PostgreSQL keeps them in our database; SQLite in a file beside it).
CHECKPOINT_TABLES = {
    "checkpoints",
    "checkpoint_blobs",
    "checkpoint_writes",
    "checkpoint_migrations",
}


def _all_tables(url: str) -> set[str]:
    engine = db.create_engine_for_url(url)
    try:
        return set(sa.inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def _not_a_checkpoint_table(name: str | None, type_: str, parent_names: dict[str, str]) -> bool:
    table = name if type_ == "table" else parent_names.get("table_name")
    return table not in CHECKPOINT_TABLES


def _tables(url: str) -> set[str]:
    return _all_tables(url) - CHECKPOINT_TABLES


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_migrations_up_down_up(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = (
        f"sqlite:///{tmp_path / 'mig' / 'm.db'}"
        if backend == "sqlite"
        else request.getfixturevalue("fresh_postgres_url")
    )
    assert db.current_revision(url) is None
    db.upgrade(url)
    assert db.current_revision(url) == "0014"
    assert _tables(url) == TABLES
    if backend == "postgresql":  # the migration step set up the checkpointer's own tables
        assert _all_tables(url) >= CHECKPOINT_TABLES
    db.downgrade(url, "base")
    assert db.current_revision(url) is None
    assert _tables(url) == set()
    db.upgrade(url)
    assert _tables(url) == TABLES


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_migrated_schema_matches_models(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Autogenerate against the migrated database finds nothing to add: models == migrations."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    url = (
        f"sqlite:///{tmp_path / 'cmp.db'}"
        if backend == "sqlite"
        else request.getfixturevalue("fresh_postgres_url")
    )
    db.upgrade(url)
    engine = db.create_engine_for_url(url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn, opts={"include_name": _not_a_checkpoint_table}
            )
            assert compressions.CompressionRecord.__table__.metadata is Base.metadata
            diff = compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()
    assert diff == []


def test_get_engine_migrates_once_and_creates_parent_dir(tmp_path: Path) -> None:
    db.forget_engines()
    target = tmp_path / "deep" / "er" / "store.db"
    settings = Settings(database_url=f"sqlite:///{target}")
    engine = db.get_engine(settings)
    assert target.exists()
    assert db.get_engine(settings) is engine
    assert db.current_revision(settings.database_url) == "0014"
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 5000


def test_session_scope_commits_and_rolls_back() -> None:
    with db.session_scope() as session:
        session.add(Agent(slug="a1", name="A1", capabilities=[]))
    with pytest.raises(RuntimeError):
        with db.session_scope() as session:
            session.add(Agent(slug="a2", name="A2", capabilities=[]))
            session.flush()
            raise RuntimeError("boom")
    with db.session_scope() as session:
        assert session.scalars(sa.select(Agent.slug)).all() == ["a1"]


def test_sqlite_locked_session_takes_the_write_lock() -> None:
    """While one locked session is open, a second cannot take the lock (busy -> error)."""
    settings = Settings(database_url=get_settings().database_url, lock_timeout_seconds=0.2)
    db.get_engine(settings)
    with db.locked_session(settings):
        with pytest.raises(sa.exc.OperationalError, match="locked"):
            with db.locked_session(settings) as second:
                second.execute(sa.text("SELECT 1"))


def test_postgres_engine_survives_a_server_side_disconnect(postgres_url: str) -> None:
    """pool_pre_ping: a pooled connection killed by the server is replaced, not fatal."""
    engine = db.create_engine_for_url(postgres_url)
    try:
        with engine.connect() as conn:
            pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
        killer = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
        with killer.connect() as conn:
            conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        killer.dispose()
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT 1").scalar() == 1
            assert conn.exec_driver_sql("SELECT pg_backend_pid()").scalar() != pid
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_database_errors_never_carry_statement_parameters(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = (
        f"sqlite:///{tmp_path / 'p.db'}"
        if backend == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    engine = db.create_engine_for_url(url)
    try:
        with pytest.raises(sa.exc.DBAPIError) as caught, engine.connect() as connection:
            connection.execute(
                sa.text("SELECT * FROM no_such_table WHERE x = :secret"),
                {"secret": "user-said-something-private"},
            )
    finally:
        engine.dispose()
    assert "no_such_table" in str(caught.value)  # the statement is still there to debug
    assert "user-said-something-private" not in str(caught.value)


def test_a_postgres_server_that_never_answers_fails_within_the_connect_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A listener that takes the connection and says nothing: the engine gives up in time."""
    import socket
    import threading
    import time

    monkeypatch.setattr(db, "CONNECT_TIMEOUT", 1)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)  # the kernel accepts; nobody ever answers
        port = silent.getsockname()[1]
        engine = db.create_engine_for_url(f"postgresql://u@127.0.0.1:{port}/x")
        failed: list[BaseException] = []

        def connect() -> None:
            try:
                engine.connect()
            except BaseException as exc:  # noqa: BLE001 - what the attempt ended with
                failed.append(exc)

        attempt = threading.Thread(target=connect, daemon=True)  # never hangs the test run
        started = time.monotonic()
        attempt.start()
        attempt.join(timeout=15)
        waited = time.monotonic() - started
        assert not attempt.is_alive(), "no deadline: still waiting for a server that never answers"
        assert len(failed) == 1 and isinstance(failed[0], sa.exc.OperationalError), failed
        assert waited < 10, waited
        engine.dispose()
    given = db.create_engine_for_url(f"postgresql://u@127.0.0.1:{port}/x?connect_timeout=7")
    assert given.dialect.create_connect_args(given.url)[1].get("connect_timeout") == "7"
    given.dispose()


def test_normalize_url_uses_psycopg3() -> None:
    assert db.normalize_url("postgres://h/d") == "postgresql+psycopg://h/d"
    assert db.normalize_url("postgresql://h/d") == "postgresql+psycopg://h/d"
    assert db.normalize_url("sqlite:///x.db") == "sqlite:///x.db"


def test_two_processes_migrating_at_once_on_postgresql(fresh_postgres_url: str) -> None:
    """The advisory lock in env.py: concurrent upgrades from separate processes all succeed."""
    import subprocess
    import sys

    code = "import sys; from yuxi_dash.store import db; db.upgrade(sys.argv[1])"
    root = Path(__file__).resolve().parents[2]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, fresh_postgres_url],
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    results = [p.communicate(timeout=120) + (p.returncode,) for p in procs]
    assert [rc for _out, _err, rc in results] == [0, 0, 0], [err for _o, err, _rc in results]
    assert db.current_revision(fresh_postgres_url) == "0014"
    assert _tables(fresh_postgres_url) == TABLES


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_upgrade_moves_legacy_thread_states_into_checkpoints(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A database at 0001 with a thread_states row: after the upgrade the thread's first
    checkpoint holds its messages and summary event in deepagents' format, and the table is gone."""
    from langchain_core.messages import AIMessage, HumanMessage, messages_to_dict

    from yuxi_dash.compression.state_format import SUMMARIZATION_EVENT_KEY, TOKEN_USAGE_KEY
    from yuxi_dash.store.checkpointer import open_checkpoint_store

    url = (
        f"sqlite:///{tmp_path / 'legacy.db'}"
        if backend == "sqlite"
        else request.getfixturevalue("fresh_postgres_url")
    )
    db.upgrade(url, "0001")
    summary = HumanMessage(
        "[Conversation summary] earlier", additional_kwargs={"lc_source": "summarization"}
    )
    engine = db.create_engine_for_url(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO conversations (thread_id, user_id, agent_slug, title, status, "
                    "created_at, updated_at, last_activity_at, llm_input_tokens, "
                    "next_llm_input_tokens, context_window, context_usage_ratio, "
                    "summary_trigger_tokens, summary_pressure_ratio, summary_active) VALUES "
                    "('old', 'u1', 'a', '', 'active', :at, :at, :at, 0, 0, 0, 0, 0, 0, false)"
                ),
                {"at": "2026-11-01 00:00:00"},
            )
            conn.execute(
                sa.text(
                    "INSERT INTO thread_states (thread_id, version, messages, summary, "
                    "history_session_id, token_usage, updated_at) VALUES "
                    "('old', 3, :messages, :summary, 'sess', :usage, :at)"
                ),
                {
                    "messages": json.dumps(
                        messages_to_dict([HumanMessage("q1"), AIMessage("a1"), HumanMessage("q2")])
                    ),
                    "summary": json.dumps(
                        {
                            "cutoff_index": 2,
                            "summary_message": messages_to_dict([summary])[0],
                            "file_path": "outputs/conversation_history/session_sess.md",
                        }
                    ),
                    "usage": json.dumps({"summary_pressure_ratio": 0.5}),
                    "at": "2026-11-01 00:00:00",
                },
            )
        db.upgrade(url)
        assert "thread_states" not in _all_tables(url)
        with engine.connect() as conn:
            checkpoint_id = conn.execute(
                sa.text("SELECT checkpoint_id FROM conversations WHERE thread_id = 'old'")
            ).scalar()
    finally:
        engine.dispose()
    store = open_checkpoint_store(db.normalize_url(url))
    try:
        latest = store.latest("old")
    finally:
        store.close()
    assert latest is not None and latest.checkpoint_id == checkpoint_id
    assert [m.content for m in latest.values["messages"]] == ["q1", "a1", "q2"]
    event = latest.values[SUMMARIZATION_EVENT_KEY]
    assert event["cutoff_index"] == 2 and event["summary_message"].content == summary.content
    assert latest.values[TOKEN_USAGE_KEY] == {"summary_pressure_ratio": 0.5}
    assert [m.content for m in latest.context().model_visible_messages()] == [
        summary.content,
        "q2",
    ]


def _at_revision(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, revision: str
) -> tuple[str, sa.Engine]:
    """A new database of ``backend`` migrated up to ``revision`` (its URL, an engine on it)."""
    url = (
        f"sqlite:///{tmp_path / 'old.db'}"
        if backend == "sqlite"
        else request.getfixturevalue("fresh_postgres_url")
    )
    db.upgrade(url, revision)
    return url, db.create_engine_for_url(url)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_0013_adds_the_call_model_and_output_tokens_as_null_for_old_rows(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url, engine = _at_revision(backend, tmp_path, request, "0012")
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO conversations (thread_id, user_id, agent_slug, title, status, "
                    "created_at, updated_at, last_activity_at, llm_input_tokens, "
                    "next_llm_input_tokens, context_window, context_usage_ratio, "
                    "summary_trigger_tokens, summary_pressure_ratio, summary_active) VALUES "
                    "('old', 'u1', 'a', '', 'active', :at, :at, :at, 0, 0, 0, 0, 0, 0, false)"
                ),
                {"at": "2026-11-01 00:00:00"},
            )
            conn.execute(
                sa.text(
                    "INSERT INTO usage_snapshots (thread_id, measured_at, llm_input_tokens, "
                    "next_llm_input_tokens, context_window, context_usage_ratio, "
                    "summary_trigger_tokens, summary_pressure_ratio, summary_active, source) "
                    "VALUES ('old', :at, 10, 12, 100, 0.1, 50, 0.24, false, 'model_call')"
                ),
                {"at": "2026-11-01 00:00:00"},
            )
        db.upgrade(url)
        with engine.connect() as conn:
            row = conn.execute(sa.text("SELECT model, output_tokens FROM usage_snapshots")).one()
        assert tuple(row) == (None, None)
        db.downgrade(url, "0012")
        columns = {c["name"] for c in sa.inspect(engine).get_columns("usage_snapshots")}
        assert "model" not in columns and "output_tokens" not in columns
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM usage_snapshots")).scalar() == 1
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_0014_adds_scan_progress_and_window_size_as_null_for_old_rows(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url, engine = _at_revision(backend, tmp_path, request, "0013")
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO scan_watermarks (source, checkpoint_id, scanned_at, threads) "
                    "VALUES ('pg:1', 'c1', :at, 3)"
                ),
                {"at": "2026-11-01 00:00:00"},
            )
        db.upgrade(url)
        with engine.connect() as conn:
            row = conn.execute(
                sa.text(
                    "SELECT checkpoint_id, progress, window_rows, table_rows FROM scan_watermarks"
                )
            ).one()
        assert tuple(row) == ("c1", None, None, None)
    finally:
        engine.dispose()
