"""The sample platform (`deploy/sample-platform.sh`): the demo, attached, names its users and agents.

The demo seeded into PostgreSQL (the run's template, copied here) is the
sample platform's database. The dashboard attaches to it with a role that may
only SELECT the three checkpoint tables; `attach scan` must give each thread
the user and agent the demo's own rows hold, read from checkpoint metadata
(`run_config` puts them there), never `unknown` / `attached`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

from tests.fixtures.app import DEMO_POSTGRES, once_per_run
from tests.fixtures.database import ADMIN_URL, _create_database, _drop_database
from yuxi_dash.attach.projector import ATTACHED_AGENT, UNKNOWN_USER
from yuxi_dash.cli import main
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import ORIGIN_ATTACHED, Conversation

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "deploy" / "sample-platform.sh"
TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")

Rows = dict[str, tuple[str, str]]


def _conninfo(url: str, username: str | None = None) -> str:
    parsed = sa.engine.make_url(url).set(drivername="postgresql")
    if username is not None:
        parsed = parsed.set(username=username)
    return parsed.render_as_string(False)


@pytest.fixture
def sample_platform(
    demo_postgres: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Rows]]:
    """A copy of the run's demo template and a role that may only SELECT its checkpoints.

    Yields the role's conninfo and the demo's own (user, agent) per thread.
    """
    with once_per_run(tmp_path_factory, DEMO_POSTGRES) as (root, made):
        assert made, "demo_postgres seeds the template first"
        template = json.loads((root / "template.json").read_text())["template"]
        url = _create_database(ADMIN_URL, template=template)  # the template is never touched
    database = sa.engine.make_url(url).database
    role = f"yuxi_sample_{uuid.uuid4().hex[:10]}"
    try:
        with psycopg.connect(_conninfo(ADMIN_URL), autocommit=True) as conn:
            conn.execute(f'CREATE ROLE "{role}" LOGIN')
            conn.execute(f'GRANT CONNECT ON DATABASE "{database}" TO "{role}"')
        with psycopg.connect(_conninfo(url), autocommit=True) as conn:
            conn.execute(f'GRANT USAGE ON SCHEMA public TO "{role}"')
            conn.execute(f'GRANT SELECT ON {", ".join(TABLES)} TO "{role}"')
            rows = conn.execute(
                "SELECT thread_id, user_id, agent_slug FROM conversations"
            ).fetchall()
        yield _conninfo(url, role), {thread: (user, agent) for thread, user, agent in rows}
    finally:
        from yuxi_dash.attach.platform_store import close_platform_stores

        close_platform_stores()
        _drop_database(ADMIN_URL, url)
        with psycopg.connect(_conninfo(ADMIN_URL), autocommit=True) as conn:
            conn.execute(f'DROP ROLE IF EXISTS "{role}"')


@pytest.mark.services
def test_the_attached_demo_names_each_threads_user_and_agent(
    sample_platform: tuple[str, Rows],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    reader, demo = sample_platform
    assert len(demo) > 10 and len({user for user, _ in demo.values()}) > 1
    # the role reads the checkpoints and nothing else (the demo's own rows stay hidden)
    with psycopg.connect(reader, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM checkpoints").fetchone() is not None
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT count(*) FROM conversations")

    monkeypatch.setenv("YUXI_DASH_ATTACH_CHECKPOINTER", reader)  # our own: a fresh SQLite
    get_settings.cache_clear()
    capsys.readouterr()
    code = main(["attach", "scan", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    assert report["projected"] == len(demo), report
    assert report["conflicts"] == 0 and report["failed"] == 0, report

    with session_scope(get_settings()) as session:
        attached = {
            conv.thread_id: (conv.user_id, conv.agent_slug)
            for conv in session.scalars(
                sa.select(Conversation).where(Conversation.origin == ORIGIN_ATTACHED)
            )
        }
    assert attached == demo
    assert all(
        user != UNKNOWN_USER and agent != ATTACHED_AGENT for user, agent in attached.values()
    )


def test_the_script_is_valid_bash() -> None:
    checked = subprocess.run(
        ["bash", "-n", str(SCRIPT)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stderr
    text = SCRIPT.read_text()
    assert text.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in text
    if shutil.which("shellcheck") is None:
        return  # not installed here: the syntax check above still ran
    linted = subprocess.run(
        ["shellcheck", str(SCRIPT)], capture_output=True, text=True, check=False
    )
    assert linted.returncode == 0, linted.stdout
