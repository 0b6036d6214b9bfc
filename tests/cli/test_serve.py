"""`yuxi-dash serve`: migrations, demo seeding only into an empty database, the local bind."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from yuxi_dash.cli import main
from yuxi_dash.cli.serve import app_path, streamlit_command
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
    import yuxi_dash.demo.seed

    calls: list[bool] = []
    real_seed = yuxi_dash.demo.seed.seed_demo

    def seed_threads_only(
        settings: Settings, *, reset: bool = False, memory: bool = True, progress=None
    ):
        calls.append(memory)
        assert progress is not None  # serve shows the seeding stages
        return real_seed(settings, reset=reset, memory=False)  # memory graphs: tests/memory

    monkeypatch.setattr(yuxi_dash.demo.seed, "seed_demo", seed_threads_only)
    code, data = _dry_run(capsys, "--demo")
    assert code == 0 and data["demo_seeded"]["threads"] > 0
    with session_scope() as session:
        seeded = count_threads(session)
    assert seeded > 0
    code, data = _dry_run(capsys, "--demo")
    assert code == 0 and data["demo_seeded"] is None  # not empty any more: left alone
    assert calls == [True]


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
