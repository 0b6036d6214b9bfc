"""Tests for the forecast fields of `yuxi-dash threads --json`, on SQLite and PostgreSQL.

Usage is written the way projection and compress write it (`apply_usage`), then
read back through the command; the forecasts of a page come from one query.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from yuxi_dash import service
from yuxi_dash.cli import main
from yuxi_dash.service.usage_writes import apply_usage
from yuxi_dash.store.db import get_engine, session_scope
from yuxi_dash.store.models import Conversation
from yuxi_dash.store.queries import list_threads
from yuxi_dash.store.thread_list import FORECAST_WINDOW, thread_forecasts
from yuxi_dash.usage import usage_snapshot

START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
TRIGGER = 10_000
FIELDS = ("turns_to_85", "turns_to_100", "seconds_to_85", "seconds_to_100", "forecast_note")


def record(thread_id: str, *usage: tuple[int, str], minute: int = 0) -> None:
    """A thread (created on first use) and one snapshot per (next tokens, source), a minute apart."""
    with session_scope() as session:
        service.upsert_agent(session, "agent-a", capabilities=["context_compression"])
        conv = session.scalar(sa.select(Conversation).where(Conversation.thread_id == thread_id))
        if conv is None:
            conv = service.create_thread(session, thread_id, user_id="u1", agent_slug="agent-a")
        for i, (tokens, source) in enumerate(usage):
            figures = usage_snapshot(
                llm_input_tokens=tokens,
                next_llm_input_tokens=tokens,
                context_window=128_000,
                summary_trigger_tokens=TRIGGER,
                summary_active=False,
            )
            at = START + timedelta(minutes=minute + i)
            apply_usage(session, conv, figures, source=source, measured_at=at)


def calls(*tokens: int) -> list[tuple[int, str]]:
    return [(t, "model_call") for t in tokens]


def forecasts(capsys: pytest.CaptureFixture[str]) -> dict[str, tuple[Any, ...]]:
    code = main(["threads", "--json"])
    out, _ = capsys.readouterr()
    assert code == 0, out
    return {row["thread_id"]: tuple(row[f] for f in FIELDS) for row in json.loads(out)}


def test_threads_json_forecasts_each_thread(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    record("growing", *calls(4000, 4500, 5000))  # 500 a turn, a minute apart
    record("reset", *calls(4000, 6000, 8000))  # 2,000 a turn, then a compression
    record("reset", (3000, "manual_compression"), minute=10)
    record("reset", *calls(3100, 3200, 3300), minute=20)  # 100 a turn since
    record("young", *calls(4000, 6000, 8000))
    record("young", (3000, "auto_compaction"), *calls(3100, 3200), minute=10)
    record("over", *calls(9000, 10_200, 10_500))
    got = forecasts(capsys)
    assert got["growing"] == (7, 10, 420, 600, None)
    assert got["reset"] == (52, 67, 3120, 4020, None)
    note = "too little history since the last compression to forecast"
    assert got["young"] == (None, None, None, None, note)
    assert got["over"] == (0, 0, 0, 0, None)


def test_a_thread_without_snapshots_says_so(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with session_scope() as session:
        service.upsert_agent(session, "agent-a", capabilities=["context_compression"])
        service.create_thread(session, "bare", user_id="u1", agent_slug="agent-a")
    assert forecasts(capsys)["bare"][4] == "no summary trigger to forecast against"
    record("bare", *calls(9000))  # one snapshot at 90%: 85% reached, 100% unknown
    note = "too little history since the last compression to forecast"
    assert forecasts(capsys)["bare"] == (0, None, 0, None, note)


@contextmanager
def statements() -> Iterator[list[str]]:
    seen: list[str] = []

    def count(*args: Any) -> None:
        seen.append(args[2])

    engine = get_engine()
    sa.event.listen(engine, "before_cursor_execute", count)
    try:
        yield seen
    finally:
        sa.event.remove(engine, "before_cursor_execute", count)


def test_a_page_of_forecasts_is_one_query_reading_a_window(db_url: str) -> None:
    slow = [1000 + 10 * i for i in range(20)]  # 10 a turn, then 100 a turn: 40 snapshots
    fast = [1190 + 100 * (i + 1) for i in range(20)]
    for n in range(5):
        record(f"t{n}", *calls(*slow, *fast))
    with session_scope() as session:
        items = list_threads(session, limit=50)
        with statements() as seen:
            got = thread_forecasts(session, items)
    assert len(seen) == 1 and "usage_snapshots" in seen[0]
    # the newest 20 only: 100 a turn from 3,190, so 5,310 to 85% (54 turns), 6,810 to 100% (69)
    assert {(f["turns_to_85"], f["turns_to_100"]) for f in got.values()} == {(54, 69)}
    assert FORECAST_WINDOW == 20  # all 40 would average 56 a turn: 95 and 122 turns
