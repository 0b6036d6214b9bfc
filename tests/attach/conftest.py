"""A "platform" for the attach tests: its own PostgreSQL database, a read-only role, a runner.

`platform` creates a fresh database (like the database fixtures do) and a
login role that may only read it (SELECT on the saver's tables, nothing
else), and runs `tests/attach/platform.py` as a separate process: a real
`create_agent` graph with LangGraph's PostgresSaver writing there, as the
platform's owner. The dashboard attaches with the read-only role.

`platform_server` runs the platform's HTTP side too (`tests/attach/platform_server.py`,
uvicorn, its compress endpoint); `platform_configured` points the dashboard at
it (YUXI_DASH_PLATFORM_URL, its token, a 5 s read timeout).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import sqlalchemy as sa

from tests.fixtures.database import ADMIN_URL, _create_database, _drop_database
from yuxi_dash.files.workdir import Workdir

REPO = Path(__file__).resolve().parents[2]
PLATFORM_SECONDS = 180


@dataclass
class Platform:
    """The platform's database, the read-only role the dashboard uses, and its workdir."""

    owner_conninfo: str  # the platform's own connection (it writes)
    reader_conninfo: str  # the read-only role the dashboard attaches with
    role: str
    password_conninfo: str  # the same role with a password in the URL (trust auth ignores it)
    workdir: Path

    def run(
        self, threads: list[dict[str, Any]], *, clock_offset_seconds: float = 0
    ) -> dict[str, dict[str, Any]]:
        """Run the platform process over ``threads``; its result per thread id."""
        spec = {
            "conninfo": self.owner_conninfo,
            "workdir": str(self.workdir),
            "clock_offset_seconds": clock_offset_seconds,
            "threads": threads,
        }
        path = self.workdir.parent / f"platform-{uuid.uuid4().hex[:8]}.json"
        path.write_text(json.dumps(spec))
        env = {k: v for k, v in os.environ.items() if not k.startswith("YUXI_DASH_")}
        env["PYTHONPATH"] = str(REPO)
        done = subprocess.run(
            [sys.executable, "-m", "tests.attach.platform", str(path)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=PLATFORM_SECONDS,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return {t["thread_id"]: t for t in json.loads(done.stdout)["threads"]}

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.owner_conninfo, autocommit=True) as conn:
            return list(conn.execute(sql, params).fetchall())

    def latest_id(self, thread_id: str) -> str:
        rows = self.rows(
            "SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = ''",
            thread_id,
        )
        return str(rows[0][0])


def _conninfo(url: str, *, username: str | None = None, password: str | None = None) -> str:
    parsed = sa.engine.make_url(url).set(drivername="postgresql")
    if username is not None:
        parsed = parsed.set(username=username)
    if password is not None:
        parsed = parsed.set(password=password)
    return parsed.render_as_string(False)


@pytest.fixture
def platform(tmp_path: Path) -> Iterator[Platform]:
    """A fresh platform database, a read-only role on it, and the shared workdir."""
    url = _create_database(ADMIN_URL)
    database = sa.engine.make_url(url).database
    role = f"yuxi_reader_{uuid.uuid4().hex[:10]}"
    owner = _conninfo(url)
    admin = _conninfo(ADMIN_URL)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'GRANT CONNECT ON DATABASE "{database}" TO "{role}"')
    with psycopg.connect(owner, autocommit=True) as conn:
        # the tables the platform's saver creates later: readable by the role, nothing more
        conn.execute(
            f'ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO "{role}"'
        )
    workdir = tmp_path / "platform-workdir"  # the platform's volume (YUXI_DASH_ATTACH_WORKDIR)
    Workdir(workdir).initialize()  # set up by the platform, as ours is by `db upgrade`
    try:
        yield Platform(
            owner_conninfo=owner,
            reader_conninfo=_conninfo(url, username=role),
            role=role,
            password_conninfo=_conninfo(url, username=role, password="hunter2-Secret"),
            workdir=workdir,
        )
    finally:
        from yuxi_dash.attach.stores import close_platform_stores

        close_platform_stores()
        _drop_database(ADMIN_URL, url)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP ROLE IF EXISTS "{role}"')


@pytest.fixture
def attached(platform: Platform, monkeypatch: pytest.MonkeyPatch) -> Iterator[Platform]:
    """The dashboard configured to attach to ``platform`` with its read-only role."""
    from yuxi_dash.settings import get_settings

    monkeypatch.setenv("YUXI_DASH_ATTACH_CHECKPOINTER", platform.reader_conninfo)
    # the platform's own volume; ours (YUXI_DASH_WORKDIR) stays the dashboard's
    monkeypatch.setenv("YUXI_DASH_ATTACH_WORKDIR", str(platform.workdir))
    get_settings.cache_clear()
    yield platform
    get_settings.cache_clear()


SERVER_START_SECONDS = 120
TOKEN = "stand-in-token-0123456789"


@dataclass
class PlatformServer:
    """The stand-in platform's HTTP side (`tests/attach/platform_server.py`), running."""

    url: str
    token: str

    def control(self, **settings: Any) -> None:
        response = httpx.post(f"{self.url}/_control", json=settings, timeout=10)
        response.raise_for_status()

    def record(self) -> dict[str, Any]:
        response = httpx.get(f"{self.url}/_record", timeout=10)
        response.raise_for_status()
        return dict(response.json())

    def calls(self) -> list[dict[str, Any]]:
        return list(self.record()["calls"])


@contextmanager
def serve_platform(platform: Platform, *, token: str = TOKEN) -> Iterator[PlatformServer]:
    """Run the stand-in platform server on a free port for the block (its process always ended)."""
    from tests.fixtures.live_server import free_port, started

    port = free_port()
    spec = {
        "conninfo": platform.owner_conninfo,
        "workdir": str(platform.workdir),
        "token": token,
        "port": port,
    }
    path = platform.workdir.parent / f"platform-server-{port}.json"
    path.write_text(json.dumps(spec))
    env = {k: v for k, v in os.environ.items() if not k.startswith("YUXI_DASH_")}
    env["PYTHONPATH"] = str(REPO)
    command = [sys.executable, "-m", "tests.attach.platform_server", str(path)]
    with started(command, cwd=REPO, env=env) as process:
        server = PlatformServer(url=f"http://127.0.0.1:{port}", token=token)
        deadline = time.monotonic() + SERVER_START_SECONDS
        while True:
            if process.popen.poll() is not None:
                pytest.fail(f"the stand-in platform exited:\n{process.text()}")
            try:
                server.record()
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    pytest.fail(f"the stand-in platform did not start:\n{process.text()}")
                time.sleep(0.2)
        yield server


@pytest.fixture
def platform_server(attached: Platform) -> Iterator[PlatformServer]:
    """The stand-in platform serving its compress endpoint over ``attached``'s database."""
    attached.workdir.mkdir(parents=True, exist_ok=True)
    with serve_platform(attached) as server:
        yield server


@pytest.fixture
def platform_configured(
    platform_server: PlatformServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[PlatformServer]:
    """The dashboard pointed at the stand-in: URL, token, a short read timeout (5 s)."""
    from yuxi_dash.platform.client import close_platform_clients
    from yuxi_dash.settings import get_settings

    monkeypatch.setenv("YUXI_DASH_PLATFORM_URL", platform_server.url)
    monkeypatch.setenv("YUXI_DASH_PLATFORM_TOKEN", platform_server.token)
    monkeypatch.setenv("YUXI_DASH_PLATFORM_READ_TIMEOUT_SECONDS", "5")
    get_settings.cache_clear()
    close_platform_clients()
    yield platform_server
    close_platform_clients()
    get_settings.cache_clear()
