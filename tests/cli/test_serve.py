"""`yuxi-dash serve`: migrations, demo seeding only into an empty database, the local bind."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.service.builders import seed_thread
from yuxi_dash.cli import main
from yuxi_dash.cli.serve import app_path, streamlit_command
from yuxi_dash.demo.threads import DemoReport
from yuxi_dash.errors import InvalidInput
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import current_revision, session_scope
from yuxi_dash.store.queries import count_threads


def _dry_run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    code = main(["serve", "--dry-run", "--json", *argv])
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_dry_run_migrates_and_binds_loopback_in_local_mode(
    capsys: pytest.CaptureFixture[str], isolated_settings: Path
) -> None:
    (isolated_settings / "yuxi_dash.db").unlink()  # no database yet: serve makes and migrates it
    code, data = _dry_run(capsys, "--server.port", "8765")
    assert code == 0
    assert data["migrated"] is True and data["demo_seeded"] is None
    assert current_revision(Settings().database_url) is not None
    command = data["command"]
    assert command[:4] == [sys.executable, "-m", "streamlit", "run"]
    assert Path(command[4]) == app_path() and app_path().name == "app.py" and app_path().is_file()
    assert command[5:] == ["--server.address", "127.0.0.1", "--server.port", "8765"]


def test_local_mode_refuses_a_network_bind(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["serve", "--dry-run", "--json", "--server.address", "0.0.0.0"])
    error = json.loads(capsys.readouterr().out)["error"]
    assert code == 2 and error["code"] == "invalid_input"
    assert "127.0.0.1" in error["message"]


@pytest.mark.parametrize(
    "args",
    [
        ["--server.address", "127.0.0.1", "--server.address", "0.0.0.0"],
        ["--server.address=127.0.0.1", "--server.address=0.0.0.0"],
        ["--server.address", "localhost", "--server.port", "1", "--server.address=::"],
    ],
)
def test_local_mode_checks_the_last_address_streamlit_will_bind(args: list[str]) -> None:
    with pytest.raises(InvalidInput):
        streamlit_command(Settings(auth_mode="local"), args)


def test_local_mode_accepts_a_last_address_on_loopback() -> None:
    args = ["--server.address", "0.0.0.0", "--server.address=127.0.0.1"]
    assert streamlit_command(Settings(auth_mode="local"), args)[-3:] == args


def test_other_modes_pass_the_address_through() -> None:
    command = streamlit_command(Settings(auth_mode="proxy"), ["--server.address=0.0.0.0"])
    assert command[-1] == "--server.address=0.0.0.0"
    assert "127.0.0.1" not in command


def test_demo_seeds_an_empty_database_once(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`serve --demo` calls the demo seeder (memory on, progress shown) on an empty database
    only. The seeder here writes one real thread, so the second start finds the database
    in use; the real seeder from empty is the `demo` command's test (tests/cli/test_threads.py)
    and tests/demo/'s."""
    import yuxi_dash.demo.seed

    calls: list[tuple[bool, bool]] = []

    def seed_one_thread(
        settings: Settings, *, reset: bool = False, memory: bool = True, progress=None
    ) -> DemoReport:
        assert progress is not None  # serve shows the seeding stages
        calls.append((reset, memory))
        seed_thread("demo-stand-in")
        return DemoReport(threads=1, users=1)

    monkeypatch.setattr(yuxi_dash.demo.seed, "seed_demo", seed_one_thread)
    code, data = _dry_run(capsys, "--demo")
    assert code == 0 and data["demo_seeded"]["threads"] == 1
    with session_scope() as session:
        assert count_threads(session) == 1
    code, data = _dry_run(capsys, "--demo")
    assert code == 0 and data["demo_seeded"] is None  # not empty any more: left alone
    assert calls == [(False, True)]


def test_demo_gates_memory_by_the_shipped_flag_file_unless_configured(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    import yuxi_dash.demo.seed
    from yuxi_dash.demo.flags import DEMO_FLAGS_FILE

    monkeypatch.setattr(yuxi_dash.demo.seed, "seed_demo", lambda *a, **k: None)
    monkeypatch.setattr("yuxi_dash.cli.serve._database_is_empty", lambda settings: False)
    code, data = _dry_run(capsys)
    assert code == 0 and data["environment"] == {}  # not a demo: nothing configured
    code, data = _dry_run(capsys, "--demo")
    assert code == 0
    assert data["environment"] == {"YUXI_DASH_LD_FLAGS_FILE": str(DEMO_FLAGS_FILE)}

    own = tmp_path / "flags.json"
    monkeypatch.setenv("YUXI_DASH_LD_FLAGS_FILE", str(own))
    get_settings.cache_clear()
    code, data = _dry_run(capsys, "--demo")
    assert code == 0 and data["environment"] == {}  # an operator's own file wins
