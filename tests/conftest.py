"""Root test configuration: isolate every test from the developer's `var/` and `.env`.

Service fixtures live in tests/fixtures/ (one module per real part) and are
loaded as plugins here so any test directory can use them. The Hypothesis
profile (`ci` or `dev`, tests/fixtures/profiles.py) is loaded here.
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures import profiles
from yuxi_dash.files.workdir import Workdir
from yuxi_dash.settings import get_settings

profiles.load()


def pytest_configure(config: pytest.Config) -> None:
    """The controller (or a run without xdist) names this run; its workers inherit the name."""
    from tests.fixtures.app import RUN_ENV  # imported here: loaded as a plugin, asserts rewritten

    if not hasattr(config, "workerinput"):
        os.environ[RUN_ENV] = uuid.uuid4().hex[:12]


def pytest_deselected(items: list[pytest.Item]) -> None:
    """Name the files of the `serial` tests a run leaves out, in $YUXI_DASH_SERIAL_FILES.

    `.ci/test` then runs the serial part on those files alone, without
    collecting the whole suite a second time.
    """
    listing = os.environ.get("YUXI_DASH_SERIAL_FILES")
    serial = sorted({str(item.path) for item in items if item.get_closest_marker("serial")})
    if listing and serial:
        with open(listing, "a", encoding="utf-8") as out:
            out.write("".join(f"{path}\n" for path in serial))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """After every worker is done: drop the run's demo template database, if one was made."""
    from tests.fixtures.app import drop_demo_template

    if not hasattr(session.config, "workerinput") and session.config.option.collectonly is False:
        drop_demo_template()


pytest_plugins = [
    "tests.fixtures.database",
    "tests.fixtures.graph",
    "tests.fixtures.desk",
    "tests.fixtures.app",
    "tests.fixtures.monitoring",
    "tests.fixtures.platform",
    "tests.fixtures.hostile_http",
]

_ISOLATED_ENV = (
    "YUXI_DASH_DATABASE_URL",
    "YUXI_DASH_WORKDIR",
    "YUXI_DASH_ATTACH_CHECKPOINTER",
    "YUXI_DASH_ATTACH_SCAN_SECONDS",
    "YUXI_DASH_WORKDIR_SWEEP_GRACE_SECONDS",
    "YUXI_DASH_WORKDIR_SWEEP_SECONDS",
    "YUXI_DASH_PLATFORM_URL",
    "YUXI_DASH_PLATFORM_TOKEN",
    "YUXI_DASH_PLATFORM_TOKEN_FILE",
    "YUXI_DASH_PLATFORM_CONNECT_TIMEOUT_SECONDS",
    "YUXI_DASH_PLATFORM_DEADLINE_SECONDS",
    "YUXI_DASH_PLATFORM_ALLOW_INSECURE_HTTP",
    "YUXI_DASH_FALKORDB_DIR",
    "YUXI_DASH_LD_FLAGS_FILE",
    "YUXI_DASH_REDIS_URL",
    "YUXI_DASH_SUMMARIZER_BASE_URL",
    "YUXI_DASH_SUMMARIZER_API_KEY",
    "YUXI_DASH_SUMMARIZER_MODEL",
    "YUXI_DASH_AUTH_MODE",
    "YUXI_DASH_CLI_ROLE",
    "YUXI_DASH_CLI_ACTOR",
    "YUXI_DASH_API_ALLOW_NETWORK",
    "YUXI_DASH_API_HEADER_TIMEOUT_SECONDS",
    "YUXI_DASH_API_MAX_CONNECTIONS",
    "YUXI_DASH_ALERTMANAGER_URL",
    "YUXI_DASH_ALERT_WEBHOOK_URL",
    "YUXI_DASH_ALERT_WEBHOOK_SECRET",
    "YUXI_DASH_ALERT_DEADLINE_SECONDS",
    "YUXI_DASH_LABEL_AGENTS_MAX",
    "YUXI_DASH_MODEL_PRICES",
    "YUXI_DASH_PUBLIC_URL",
    "LAUNCHDARKLY_SDK_KEY",
    "GRAPHITI_FALKORDB_HOST",
    "GRAPHITI_FALKORDB_PORT",
    "GRAPHITI_FALKORDB_PASSWORD",
)


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty SQLite database migrated to head, once per worker (a copy is cheaper)."""
    from yuxi_dash.store.db import upgrade

    path = tmp_path_factory.mktemp("migrated") / "yuxi_dash.db"
    upgrade(f"sqlite:///{path}")
    assert not path.with_name(path.name + "-wal").exists(), "the migration left a WAL behind"
    return path


_MAIN = sys.modules["__main__"]  # the interpreter's own (pytest, or an xdist worker)


@pytest.fixture(autouse=True)
def interpreter_main(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts with the interpreter's ``__main__``.

    Streamlit's script runner (AppTest) installs the page it ran as ``__main__`` and leaves
    it there; a process spawned later in the same worker (the attach scan's, the tuning
    fleet's) would then run that page before its task.
    """
    monkeypatch.setitem(sys.modules, "__main__", _MAIN)


@pytest.fixture(autouse=True)
def isolated_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, migrated_sqlite: Path
) -> Iterator[Path]:
    """Point every store at a fresh temp dir; never read the developer's `.env`.

    The database there starts as a copy of `migrated_sqlite`: empty, at head.
    """
    for name in _ISOLATED_ENV:
        monkeypatch.delenv(name, raising=False)
    shutil.copyfile(migrated_sqlite, tmp_path / "yuxi_dash.db")
    monkeypatch.chdir(tmp_path)  # `.env` and relative `var/` paths resolve here
    monkeypatch.setenv("YUXI_DASH_DATABASE_URL", f"sqlite:///{tmp_path / 'yuxi_dash.db'}")
    monkeypatch.setenv("YUXI_DASH_WORKDIR", str(tmp_path / "workdir"))
    monkeypatch.setenv("YUXI_DASH_FALKORDB_DIR", str(tmp_path / "falkordb"))
    monkeypatch.setenv("GRAPHITI_TELEMETRY_ENABLED", "false")
    Workdir(tmp_path / "workdir").initialize()  # first set-up, as `yuxi-dash db upgrade` does
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


# Fixtures that need a real server (PostgreSQL, FalkorDB) or a browser; a test
# using any of them, directly or through another fixture, is marked `services`,
# so `pytest -m "not services"` runs the fast subset with none of them.
_SERVICE_FIXTURES = frozenset(
    {
        "postgres_url",
        "fresh_postgres_url",
        "demo_postgres",  # a demo seeded into its own PostgreSQL database
        "platform",  # tests/attach: an attached platform's own PostgreSQL database
        "falkordb_server",
        "falkordb_dir",
        "alertmanager",  # tests/alerts: a real Alertmanager on loopback
        "prometheus",  # tests/api: a real Prometheus scraping /metrics
    }
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        callspec = getattr(item, "callspec", None)
        # a test parametrized over backends asks for PostgreSQL by the param "postgresql"
        on_postgres = callspec is not None and any(
            isinstance(value, str) and value == "postgresql" for value in callspec.params.values()
        )
        if fixtures & _SERVICE_FIXTURES or on_postgres or item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.services)
