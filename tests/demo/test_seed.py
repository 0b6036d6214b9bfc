"""Tests for yuxi_dash.demo.seed: the threads first, then the graphs of the demo users."""

from __future__ import annotations

from pathlib import Path

import pytest

from yuxi_dash.demo.seed import seed_demo
from yuxi_dash.demo.threads import DemoReport
from yuxi_dash.settings import Settings
from yuxi_dash.sim.story import DEMO_USERS


def _settings(root: Path) -> Settings:
    return Settings(
        database_url=f"sqlite:///{root / 'yuxi_dash.db'}",
        workdir=root / "workdir",
        falkordb_data_dir=root / "falkordb",
    )


def test_memory_seeding_is_called_with_the_demo_users(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import yuxi_dash.demo.seed as demo_seed

    calls: list[tuple[tuple[str, ...], bool]] = []

    def fake_graphs(
        settings: Settings, users: tuple[str, ...], *, reset: bool, now: object = None
    ) -> dict:
        calls.append((tuple(users), reset))
        return {"graphs": 28, "skipped_existing": 2}

    monkeypatch.setattr(demo_seed, "seed_demo_threads", lambda *a, **k: DemoReport(threads=1))
    monkeypatch.setattr(demo_seed, "seed_demo_graphs", fake_graphs)
    report = seed_demo(_settings(tmp_path), reset=True)
    assert calls == [(DEMO_USERS, True)]
    assert report.graphs == 30
