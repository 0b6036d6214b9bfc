"""Tests for yuxi_dash.compression.forecast: turns and time to 85% and 100%, from hand-built rows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from yuxi_dash.compression.forecast import (
    NO_GROWTH,
    NO_TIME,
    NO_TRIGGER,
    TOO_LITTLE_HISTORY,
    Forecast,
    forecast,
)

START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
TRIGGER = 10_000


@dataclass(frozen=True)
class Row:
    measured_at: datetime
    next_llm_input_tokens: int
    summary_trigger_tokens: int
    source: str = "model_call"


def calls(*tokens: int, every: int = 60, source: str = "model_call", start: int = 0) -> list[Row]:
    """One row per figure, `every` seconds apart from minute `start`."""
    return [
        Row(START + timedelta(seconds=start * 60 + i * every), t, TRIGGER, source)
        for i, t in enumerate(tokens)
    ]


def test_a_thread_growing_500_a_turn_gives_the_exact_turns_and_time() -> None:
    # at 5,000 of 10,000: 85% is 3,500 away (7 turns), 100% is 5,000 away (10 turns)
    assert forecast(calls(4000, 4500, 5000)) == Forecast(7, 10, 420, 600, None)


def test_a_fraction_of_a_turn_counts_as_a_whole_turn() -> None:
    # 300 a turn from 8,000: 500 to 85% is 1.67 turns (2), 2,000 to 100% is 6.67 (7)
    got = forecast(calls(7400, 7700, 8000, every=30))
    assert (got.turns_to_85, got.turns_to_100) == (2, 7)
    assert (got.seconds_to_85, got.seconds_to_100) == (60, 210)


def test_a_compression_resets_the_growth() -> None:
    before = calls(4000, 6000, 8000)  # 2,000 a turn before the compression
    reset = calls(3000, source="manual_compression", start=10)
    after = calls(3100, 3200, 3300, start=20)  # 100 a turn after it
    assert forecast([*before, *reset, *after]) == Forecast(52, 67, 3120, 4020, None)
    auto = calls(3000, source="auto_compaction", start=10)
    assert forecast([*before, *auto, *after]) == Forecast(52, 67, 3120, 4020, None)


def test_too_little_history_since_the_last_compression_says_so() -> None:
    rows = [*calls(4000, 6000, 8000), *calls(3000, source="manual_compression", start=10)]
    rows += calls(3100, 3200, start=20)  # two model calls since: one step is no mean
    assert forecast(rows) == Forecast(None, None, None, None, TOO_LITTLE_HISTORY)
    assert "too little history" in TOO_LITTLE_HISTORY
    assert forecast([]) == Forecast(None, None, None, None, TOO_LITTLE_HISTORY)


def test_no_growth_is_no_forecast() -> None:
    assert forecast(calls(5000, 5000, 4900)) == Forecast(None, None, None, None, NO_GROWTH)


def test_at_or_above_a_line_is_zero_turns() -> None:
    assert forecast(calls(9000, 10_200, 10_500)) == Forecast(0, 0, 0, 0, None)
    assert forecast(calls(10_500)) == Forecast(0, 0, 0, 0, None)  # no history needed
    # at 85% with too little history: 0 turns to 85%, no guess for 100%
    assert forecast(calls(8600)) == Forecast(0, None, 0, None, TOO_LITTLE_HISTORY)
    # 0.84996 shows as 85.0%: already there, as the 85% suggestion says
    assert forecast(calls(8000, 8200, 8499), trigger_tokens=9999).turns_to_85 == 0


def test_the_rows_current_figures_win_over_the_newest_snapshot() -> None:
    got = forecast(calls(4000, 4500, 5000), next_tokens=6000, trigger_tokens=20_000)
    assert (got.turns_to_85, got.turns_to_100) == (22, 28)  # 11,000 and 14,000 at 500 a turn


def test_no_trigger_and_no_time_are_said() -> None:
    assert forecast(calls(1, 2, 3), trigger_tokens=0).forecast_note == NO_TRIGGER
    got = forecast(calls(4000, 4500, 5000, every=0))
    assert got == Forecast(7, 10, None, None, NO_TIME)


def test_from_now_the_time_since_the_newest_call_is_taken_off_and_the_turns_stay() -> None:
    rows = calls(4000, 4500, 5000)  # the newest call 2 minutes after START
    newest = START + timedelta(minutes=2)
    assert forecast(rows, now=newest) == Forecast(7, 10, 420, 600, None)
    assert forecast(rows, now=newest + timedelta(minutes=5)) == Forecast(7, 10, 120, 300, None)
    assert forecast(rows, now=newest + timedelta(hours=1)) == Forecast(7, 10, 0, 0, None)
    assert forecast(rows, now=START) == Forecast(7, 10, 420, 600, None)  # a clock behind: as is
