"""What each compression saved: input tokens kept out of the calls until the next one."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from tests.store.compression_builders import put_record
from yuxi_dash.costs.prices import parse_prices
from yuxi_dash.costs.savings import compression_savings
from yuxi_dash.store.compressions import CompressionRecord
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import UsageSnapshotRow

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
FIRST, SECOND = T0 + timedelta(minutes=10), T0 + timedelta(minutes=40)
PRICES = parse_prices(json.dumps({"agent-s": {"input_per_million": 2, "output_per_million": 8}}))


def _call(thread_id: str, at: datetime, source: str = "model_call") -> UsageSnapshotRow:
    return UsageSnapshotRow(
        thread_id=thread_id,
        measured_at=at,
        llm_input_tokens=5_000,
        next_llm_input_tokens=5_100,
        context_window=200_000,
        context_usage_ratio=0.0,
        summary_trigger_tokens=100_000,
        summary_pressure_ratio=0.0,
        source=source,
    )


def _seed(thread_id: str) -> None:
    put_record("other-thread", T0, [], agent="agent-s")  # its calls are not this thread's
    put_record(thread_id, FIRST, [], agent="agent-s")  # 12,000 -> 1,500 tokens
    put_record(thread_id, SECOND, [], agent="agent-s")
    with session_scope() as session:
        session.execute(
            sa.update(CompressionRecord)
            .where(CompressionRecord.at == SECOND)
            .values(before_tokens=20_000, after_tokens=4_000)
        )
        minutes = [5, 10, 12, 20, 39, 40, 41, 60, 61]  # 5 is before the first compression
        sources = {10: "auto_compaction", 40: "manual_compression"}
        for minute in minutes:
            at = T0 + timedelta(minutes=minute)
            session.add(_call(thread_id, at, sources.get(minute, "model_call")))
        session.add(_call("other-thread", FIRST + timedelta(minutes=1)))


def test_two_compressions_save_until_the_next(db_url: str) -> None:
    _seed("t-saved")
    with session_scope() as session:
        first, second = compression_savings(session, PRICES, "t-saved")
        assert compression_savings(session, None, "t-saved")[0].saved_usd is None
        assert compression_savings(session, PRICES, "t-none") == []
    # the first: calls at 10 (its own compaction's call), 12, 20 and 39; 40 is not a call
    assert (first.tokens_saved_per_call, first.model_calls_after) == (10_500, 4)
    assert first.tokens_avoided == 42_000
    assert first.saved_usd == 0.084  # 42,000 input tokens at $2/M
    # the second: calls at 41, 60 and 61, up to now
    assert (second.tokens_saved_per_call, second.model_calls_after) == (16_000, 3)
    assert second.tokens_avoided == 48_000
    assert second.saved_usd == 0.096
    assert first.at == FIRST and second.at == SECOND


def test_an_unpriced_agent_saves_tokens_without_dollars(db_url: str) -> None:
    _seed("t-saved")
    star_free = parse_prices(
        json.dumps({"someone-else": {"input_per_million": 1, "output_per_million": 1}})
    )
    with session_scope() as session:
        savings = compression_savings(session, star_free, "t-saved")
    assert [s.tokens_avoided for s in savings] == [42_000, 48_000]
    assert [s.saved_usd for s in savings] == [None, None]


def test_calls_after_a_compression_are_priced_by_their_recorded_model(db_url: str) -> None:
    _seed("t-saved")
    prices = parse_prices(
        json.dumps(
            {
                "agent-s": {"input_per_million": 2, "output_per_million": 8},
                "gpt-test": {"input_per_million": 5, "output_per_million": 20},
            }
        )
    )
    with session_scope() as session:
        session.execute(  # the calls at 12 and 20 name their model; 10 and 39 do not
            sa.update(UsageSnapshotRow)
            .where(
                UsageSnapshotRow.thread_id == "t-saved",
                UsageSnapshotRow.measured_at.in_(
                    [T0 + timedelta(minutes=12), T0 + timedelta(minutes=20)]
                ),
            )
            .values(model="gpt-test")
        )
    with session_scope() as session:
        first, second = compression_savings(session, prices, "t-saved")
    assert (first.model_calls_after, first.tokens_avoided) == (4, 42_000)
    # 2 calls x 10,500 at $5/M and 2 calls x 10,500 at the agent's $2/M
    assert first.saved_usd == 0.147
    assert second.saved_usd == 0.096  # its calls name no model: the agent's price
