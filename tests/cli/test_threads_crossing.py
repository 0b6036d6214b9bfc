"""`yuxi-dash threads --crossing-within MINUTES`: the Overview's "Crossing within the hour" on
the command line (the same store function), on SQLite and PostgreSQL.

Growth is written as projection writes usage (`tests.store.forecast_builders.grow`), ending a
minute before now, so the turns are exact; the seconds count from now: a minute less, and the
moments the command took (`near`).
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from tests.store.forecast_builders import grow
from yuxi_dash.cli import main
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AuditEntry, utcnow


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, json.loads(out) if "--json" in argv else out, err


def near(got: int, from_last_call: int) -> bool:
    """``got`` is ``from_last_call`` less the minute since the last call (and a few seconds)."""
    return from_last_call - 70 <= got <= from_last_call - 60


def test_crossing_within_lists_100_percent_first_then_85_soonest_first(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    last = utcnow() - timedelta(minutes=1)
    grow("t-soon", 5000, 5500, 6000, last_at=last)  # 100% in 5 turns, 300 s
    grow("t-next", 6000, 6400, 6800, last_at=last)  # 100% in 4 turns, 240 s
    grow("t-later", 1000, 1100, 1200, last_at=last)  # 85% in 58 turns; 100% in 70
    grow("t-young", 7000, 7500, last_at=last)  # too little history
    code, rows, err = run(capsys, "threads", "--crossing-within", "60", "--json")
    assert code == 0
    assert [(r["thread_id"], r["turns_to_100"], r["turns_to_85"]) for r in rows] == [
        ("t-next", 4, 1),
        ("t-soon", 5, 2),
        ("t-later", 70, 58),
    ]
    expected = {"t-next": (240, 60), "t-soon": (300, 120), "t-later": (4200, 3480)}
    for row in rows:  # from the last call: 4 turns a minute apart is 240 s; from now, less
        to_100, to_85 = expected[row["thread_id"]]
        assert near(row["seconds_to_100"], to_100) and near(row["seconds_to_85"], to_85), row
    assert err == (  # the list stays the JSON: what was not listed goes to stderr
        "yuxi-dash: not listed, no forecast: too little history since the last compression "
        "to forecast: 1\n"
    )
    code, rows, _ = run(capsys, "threads", "--crossing-within", "4", "--json")
    assert [r["thread_id"] for r in rows] == ["t-next", "t-soon"]  # 100% within 4 min: 3 and 4
    code, rows, _ = run(capsys, "threads", "--crossing-within", "2", "--json")
    assert [r["thread_id"] for r in rows] == ["t-next", "t-soon"]  # 85% within 2 min: 0 and 1
    code, rows, _ = run(
        capsys, "threads", "--crossing-within", "60", "--status", "deleted", "--json"
    )
    assert rows == []
    code, text, _ = run(capsys, "threads", "--crossing-within", "60", "--limit", "2")
    assert code == 0
    lines = text.splitlines()
    assert lines[-2] == (
        "2 of 3 threads, forecast to cross 100% or 85% within 60 min, 100% first, soonest "
        "first; --offset 2 for more; deleted threads: --status deleted"
    )
    assert lines[-1] == (
        "not listed, no forecast: too little history since the last compression to forecast: 1"
    )
    plain = run(capsys, "threads", "--json")[1]  # without the flag: highest pressure first
    assert plain[0]["thread_id"] == "t-young"


def test_a_crossing_window_over_a_day_is_refused_and_audited(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "threads", "--crossing-within", "1441", "--json")
    assert code == 2 and out["error"]["code"] == "invalid_input"
    assert "at most 1,440 minutes" in out["error"]["message"]
    with session_scope() as session:
        refused = session.scalars(
            sa.select(AuditEntry.outcome).where(AuditEntry.action == "cli.threads")
        ).all()
    assert refused == ["refused"]
