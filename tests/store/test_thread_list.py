"""`store.thread_list.crossing_within`: which threads it forecasts (below 100%, measured within
the window, not deleted, the most pressured up to its limit), with the time from now, on
SQLite (a window function) and PostgreSQL (a LATERAL read per thread)."""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa

from tests.store.forecast_builders import grow
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Conversation, utcnow
from yuxi_dash.store.thread_list import FORECAST_WINDOW, crossing_within, thread_forecasts


def test_it_forecasts_the_most_pressured_recent_threads_below_100_percent(db_url: str) -> None:
    now = utcnow()
    last = now - timedelta(minutes=1)
    grow("a", 6000, 6400, 6800, last_at=last)  # 100% in 4 turns, 240 s from its last call
    grow("b", 5000, 5500, 6000, last_at=last)  # 100% in 5 turns, 300 s
    grow("c", 4000, 4500, 5000, last_at=last)  # 100% in 7 turns, 420 s: least pressured
    grow("over", 7000, 8000, 9000, last_at=last)
    grow("old", 6000, 6500, 7000, last_at=now - timedelta(minutes=61))
    grow("gone", 6000, 6500, 7000, last_at=last)
    with session_scope() as session:
        session.execute(
            sa.update(Conversation).where(Conversation.thread_id == "gone").values(status="deleted")
        )
    with session_scope() as session:
        every = crossing_within(session, 3600, now=now)
        two = crossing_within(session, 3600, now=now, limit=2)
        agent_b = crossing_within(session, 3600, now=now, agent="agent-b")
        deleted = crossing_within(session, 3600, now=now, status="deleted")
    assert [t.thread_id for t in every.threads] == ["a", "b", "c"]
    assert {t: f["seconds_to_100"] for t, f in every.forecasts.items()} == {
        "a": 180,  # from now: the minute since the last call is taken off
        "b": 240,
        "c": 360,
    }
    assert (every.forecast, every.more, every.left_out) == (3, False, {})
    assert [t.thread_id for t in two.threads] == ["a", "b"]  # the two most pressured
    assert (two.forecast, two.more) == (2, True)
    assert (agent_b.threads, agent_b.forecast) == ([], 0)
    assert (deleted.threads, deleted.forecast) == ([], 0)  # deleted: never crossing


def test_minutes_count_from_now_and_soonest_first_compares_from_now(db_url: str) -> None:
    now = utcnow()
    # 500 a turn, 11 minutes apart: 5 turns, 55 minutes from its last call 50 minutes ago
    grow("slow", 5000, 5500, 6000, last_at=now - timedelta(minutes=50), every=timedelta(minutes=11))
    grow("quick", 6000, 6400, 6800, last_at=now, every=timedelta(minutes=2))  # 4 turns, 8 min
    grow("due", 5000, 5500, 6000, last_at=now - timedelta(minutes=30))  # 5 min ago due
    with session_scope() as session:
        found = crossing_within(session, 3600, now=now)
        later = crossing_within(session, 3600, now=now + timedelta(minutes=2))
    assert [t.thread_id for t in found.threads] == ["due", "slow", "quick"]
    assert {t: (f["turns_to_100"], f["seconds_to_100"]) for t, f in found.forecasts.items()} == {
        "due": (5, 0),  # at its pace it would have crossed: the turns stay
        "slow": (5, 300),
        "quick": (4, 480),
    }
    assert later.forecasts["slow"]["seconds_to_100"] == 180  # the turns stay, time runs


def test_a_forecast_reads_the_newest_window_of_snapshots(db_url: str) -> None:
    """Older growth beyond `FORECAST_WINDOW` snapshots is not read (both read paths)."""
    now = utcnow()
    grow("long", *range(100, 100 + 400 * FORECAST_WINDOW, 400), last_at=now - timedelta(hours=1))
    grow("long", *range(1000, 1000 + 100 * FORECAST_WINDOW, 100), last_at=now)
    with session_scope() as session:
        row = session.scalar(sa.select(Conversation).where(Conversation.thread_id == "long"))
        found = thread_forecasts(session, [row])["long"]
    short = 8192 - (1000 + 100 * (FORECAST_WINDOW - 1))  # 100 a turn, a minute apart
    turns = -(-short // 100)
    assert (found["turns_to_100"], found["seconds_to_100"]) == (turns, turns * 60)
