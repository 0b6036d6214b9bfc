"""The resource owner (`yuxi_dash.resources`): lazy creation, reverse-order close, no import effects.

The owner's rules are checked on a private `ResourceManager` (so closing
everything never touches the resources other tests share); the wiring of the
real accessors is checked through the process owner, one kind at a time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from yuxi_dash.resources import (
    AUDIT_WRITER,
    FALKORDB_CHILDREN,
    FLAG_EVALUATORS,
    GRAPH_CLIENTS,
    SQL_ENGINES,
    Kind,
    ResourceManager,
    get_resources,
)
from yuxi_dash.settings import Settings, get_settings

REPO = Path(__file__).resolve().parents[1]
THING: Kind[Any] = Kind("test-thing")
OTHER: Kind[Any] = Kind("test-other")


def _maker(log: list[str], name: str) -> Any:
    def create() -> dict[str, Any]:
        log.append(f"create {name}")
        return {"name": name, "closed": False}

    return create


def _closer(log: list[str]) -> Any:
    def close(thing: dict[str, Any]) -> None:
        thing["closed"] = True
        log.append(f"close {thing['name']}")

    return close


# --- the owner's rules ---------------------------------------------------------


def test_creation_is_lazy_and_once_per_key() -> None:
    log: list[str] = []
    owner = ResourceManager(register_at_exit=False)
    assert owner.peek(THING, "a") is None and log == []  # asking does not create
    first = owner.acquire(THING, "a", _maker(log, "a"), _closer(log))
    again = owner.acquire(THING, "a", _maker(log, "a-again"), _closer(log))
    other_key = owner.acquire(THING, "b", _maker(log, "b"), _closer(log))
    assert first is again and other_key is not first
    assert log == ["create a", "create b"]
    assert owner.keys(THING) == ["a", "b"] and owner.keys(OTHER) == []


def test_close_all_closes_newest_first_and_a_second_close_does_nothing() -> None:
    log: list[str] = []
    owner = ResourceManager(register_at_exit=False)
    made = [
        owner.acquire(kind, name, _maker(log, name), _closer(log))
        for kind, name in ((THING, "engine"), (OTHER, "server"), (THING, "client"))
    ]
    log.clear()
    assert owner.close_all() == 3
    assert log == ["close client", "close server", "close engine"]
    assert all(thing["closed"] for thing in made)
    assert owner.close_all() == 0 and log == ["close client", "close server", "close engine"]
    assert owner.keys(THING) == [] and owner.peek(THING, "engine") is None
    fresh = owner.acquire(THING, "engine", _maker(log, "engine2"), _closer(log))
    assert fresh is not made[0] and not fresh["closed"]  # after a close: created anew


def test_close_kind_closes_only_that_kind_newest_first() -> None:
    log: list[str] = []
    owner = ResourceManager(register_at_exit=False)
    for kind, name in ((THING, "t1"), (OTHER, "o1"), (THING, "t2")):
        owner.acquire(kind, name, _maker(log, name), _closer(log))
    log.clear()
    assert owner.close_kind(THING) == 2
    assert log == ["close t2", "close t1"]
    assert owner.keys(OTHER) == ["o1"]
    assert owner.release(OTHER, "o1") and not owner.release(OTHER, "o1")


def test_a_failing_close_is_logged_by_type_and_the_rest_still_close(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log: list[str] = []
    owner = ResourceManager(register_at_exit=False)

    def broken(_thing: dict[str, Any]) -> None:
        raise RuntimeError("postgresql://user:secret@db/x")

    owner.acquire(THING, "first", _maker(log, "first"), _closer(log))
    owner.acquire(THING, "broken", _maker(log, "broken"), broken)
    owner.acquire(THING, "last", _maker(log, "last"), _closer(log))
    with caplog.at_level("WARNING", logger="yuxi_dash.resources"):
        assert owner.close_all() == 3
    assert log[-2:] == ["close last", "close first"]
    assert "RuntimeError" in caplog.text and "secret" not in caplog.text


def test_a_failed_creation_registers_nothing_and_is_tried_again() -> None:
    owner = ResourceManager(register_at_exit=False)
    calls = []

    def flaky() -> dict[str, Any]:
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("down")
        return {"name": "up"}

    with pytest.raises(ConnectionError):
        owner.acquire(THING, "k", flaky, lambda _t: None)
    assert owner.keys(THING) == []
    assert owner.acquire(THING, "k", flaky, lambda _t: None) == {"name": "up"}
    assert len(calls) == 2


def test_threads_asking_at_once_share_one_resource() -> None:
    owner = ResourceManager(register_at_exit=False)
    created = []
    start = threading.Barrier(8)
    got: list[Any] = []

    def slow() -> object:
        created.append(1)
        time.sleep(0.05)
        return object()

    def ask() -> None:
        start.wait()
        got.append(owner.acquire(THING, "shared", slow, lambda _t: None))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(created) == 1 and len({id(thing) for thing in got}) == 1


def test_a_slow_creation_does_not_block_another_kind() -> None:
    owner = ResourceManager(register_at_exit=False)
    inside = threading.Event()
    release = threading.Event()

    def slow() -> str:
        inside.set()
        release.wait(10)
        return "slow"

    worker = threading.Thread(target=lambda: owner.acquire(THING, "s", slow, lambda _t: None))
    worker.start()
    try:
        assert inside.wait(10)
        began = time.monotonic()
        assert owner.acquire(OTHER, "fast", lambda: "fast", lambda _t: None) == "fast"
        assert time.monotonic() - began < 1.0
    finally:
        release.set()
        worker.join()


def test_a_resource_created_while_closing_is_closed_too() -> None:
    """A closing resource may need another (the audit writer its engine): that one goes next."""
    log: list[str] = []
    owner = ResourceManager(register_at_exit=False)

    def close_writer(thing: dict[str, Any]) -> None:
        owner.acquire(OTHER, "engine", _maker(log, "engine"), _closer(log))
        _closer(log)(thing)

    owner.acquire(THING, "writer", _maker(log, "writer"), close_writer)
    assert owner.close_all() == 2
    assert log == ["create writer", "create engine", "close writer", "close engine"]


def test_the_process_owner_registers_its_exit_hook_once() -> None:
    """At exit the owner closes everything: checked in a child process that really exits."""
    script = """
import atexit
from yuxi_dash.resources import Kind, get_resources
registered = []
real = atexit.register
atexit.register = lambda fn, *a, **k: (registered.append(fn), real(fn, *a, **k))[1]
owner = get_resources()
kind = Kind("demo")
for key in ("first", "second"):
    owner.acquire(kind, key, lambda key=key: key, lambda thing: print("closed", thing, flush=True))
print("hooks", len(registered), flush=True)
"""
    out = _run_python(script)
    assert out.splitlines() == ["hooks 1", "closed second", "closed first"]


# --- the real accessors delegate to the process owner --------------------------


def test_engines_live_in_the_owner_and_forget_engines_disposes_them(tmp_path: Path) -> None:
    from yuxi_dash.store import db

    settings = Settings(database_url=f"sqlite:///{tmp_path / 'own.db'}")
    key = (db.normalize_url(settings.database_url), float(settings.lock_timeout_seconds))
    assert get_resources().peek(SQL_ENGINES, key) is None
    engine = db.get_engine(settings)
    assert get_resources().peek(SQL_ENGINES, key) is engine
    disposed = []
    sa.event.listen(engine, "engine_disposed", lambda _engine: disposed.append(1))
    db.forget_engines()
    assert disposed == [1] and get_resources().keys(SQL_ENGINES) == []
    assert db.get_engine(settings) is not engine


def test_flag_evaluators_live_in_the_owner(tmp_path: Path) -> None:
    from yuxi_dash.demo.flags import demo_flags
    from yuxi_dash.flags import close_evaluators, get_flag_evaluator

    path = tmp_path / "flags.json"
    path.write_text(json.dumps(demo_flags(["u0"])))
    close_evaluators()
    evaluator = get_flag_evaluator(Settings(ld_flags_file=path))
    assert get_flag_evaluator(Settings(ld_flags_file=path)) is evaluator
    assert len(get_resources().keys(FLAG_EVALUATORS)) == 1
    os.utime(path, ns=(1, 1))  # an edited file: the stale evaluator is closed and replaced
    again = get_flag_evaluator(Settings(ld_flags_file=path))
    assert again is not evaluator and len(get_resources().keys(FLAG_EVALUATORS)) == 1
    close_evaluators()
    assert get_resources().keys(FLAG_EVALUATORS) == []


def test_closing_the_audit_writer_lands_its_rows_and_ends_the_thread() -> None:
    from yuxi_dash.access.audit import record_audit_eventually
    from yuxi_dash.store.db import get_engine, locked_session, session_scope
    from yuxi_dash.store.queries import list_audit

    quick = Settings(database_url=get_settings().database_url, lock_timeout_seconds=0.2)
    get_engine(quick)
    with locked_session(quick):
        record_audit_eventually(
            actor="ops", action="compress", target="thread:t7", outcome="refused", settings=quick
        )
        writer = get_resources().peek(AUDIT_WRITER, None)
        assert writer is not None and writer.is_alive()
    assert get_resources().release(AUDIT_WRITER, None)  # drains the queue, then stops
    assert not writer.is_alive()
    with session_scope() as session:
        (row,) = list_audit(session, target="thread:t7")
    assert row.outcome == "refused"


@pytest.mark.services
def test_stopping_a_server_closes_its_clients_before_it_goes(tmp_path: Path) -> None:
    from yuxi_dash.memory.graph.client import get_client
    from yuxi_dash.memory.graph.server import ensure_server, stop_server

    settings = Settings(falkordb_data_dir=tmp_path / "fdb")
    handle = ensure_server(settings)
    try:
        assert handle.started and handle.pid in get_resources().keys(FALKORDB_CHILDREN)
        client = get_client(settings)
        assert get_client(settings) is client
        assert client.db.connection.ping()
        assert os.environ.get("GRAPHITI_TELEMETRY_ENABLED") == "false"
    finally:
        assert stop_server(settings)
    clients = get_resources().keys(GRAPH_CLIENTS)
    assert not any(isinstance(key, tuple) and key[4] == handle.pid for key in clients)
    assert handle.pid not in get_resources().keys(FALKORDB_CHILDREN)
    # the client's connections were closed (the server's going did not have to break them)
    pool: Any = client.db.connection.connection_pool
    connections = [*pool._available_connections, *pool._in_use_connections]
    assert connections and all(conn._sock is None for conn in connections)


# --- nothing happens at import ----------------------------------------------------

_IMPORT_CHECK = """
import importlib, json, os, sys
import streamlit  # sets MPLBACKEND itself at import: not ours, so before the snapshot
import yuxi_dash.settings as settings_module

calls = []
real_init = settings_module.Settings.__init__
def spy(self, *args, **kwargs):
    calls.append(1)
    real_init(self, *args, **kwargs)
settings_module.Settings.__init__ = spy
before = dict(os.environ)
for name in sys.argv[1:]:
    importlib.import_module(name)
from yuxi_dash.resources import get_resources
import logging
print(json.dumps({
    "settings_read": len(calls),
    "env_changed": sorted(k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k)),
    "resources": len(get_resources()._entries),
    "langgraph_filters": len(logging.getLogger("langgraph").filters),
}))
"""


def _run_python(script: str, *args: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def _import_check(modules: list[str], extra_path: Path | None = None) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "GRAPHITI_TELEMETRY_ENABLED"}
    env["YUXI_DASH_CACHE_TTL_SECONDS"] = "poisoned"  # any Settings() here would raise
    env["YUXI_DASH_LOCK_TIMEOUT_SECONDS"] = "poisoned"
    if extra_path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(extra_path), env.get("PYTHONPATH", "")])
    out = _run_python(_IMPORT_CHECK, *modules, env=env)
    return json.loads(out.strip().splitlines()[-1])


def _modules(package: str) -> list[str]:
    root = REPO / package.replace(".", "/")
    names = [package]
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        if parts[-1] != "__init__":
            names.append(".".join(parts))
    return names


def test_importing_memory_ui_and_the_owners_reads_no_settings_and_touches_no_env() -> None:
    modules = [
        *_modules("yuxi_dash.memory"),
        *_modules("yuxi_dash.ui"),
        *_modules("yuxi_dash.cli"),
        "yuxi_dash.resources",
        "yuxi_dash.flags",
        "yuxi_dash.access.audit",
        "yuxi_dash.access.roles",
        "yuxi_dash.store.db",
        "yuxi_dash.store.checkpointer",
    ]
    assert "yuxi_dash.memory.views.warm_context" in modules and "yuxi_dash.ui.loaders" in modules
    report = _import_check(modules)
    assert report == {"settings_read": 0, "env_changed": [], "resources": 0, "langgraph_filters": 0}


def test_the_import_check_sees_a_module_that_sets_the_environment(tmp_path: Path) -> None:
    """The check above can fail: a module doing either at import is caught."""
    (tmp_path / "noisy_env.py").write_text(
        'import os\nos.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")\n'
    )
    (tmp_path / "noisy_settings.py").write_text(
        "from yuxi_dash.settings import Settings\n"
        "try:\n    Settings()\nexcept Exception:\n    pass\n"
    )
    report = _import_check(["noisy_env", "noisy_settings"], extra_path=tmp_path)
    assert report["env_changed"] == ["GRAPHITI_TELEMETRY_ENABLED"]
    assert report["settings_read"] == 1
