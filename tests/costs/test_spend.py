"""The cost of the recorded model calls per thread, user, agent and day, on SQLite and
PostgreSQL, against a hand sum."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import sqlalchemy as sa

from yuxi_dash.costs.prices import ModelPrices, parse_prices, unmatched_keys
from yuxi_dash.costs.spend import (
    known_agents,
    limited,
    matched_names,
    spend,
    spend_per_agent_day,
    thread_costs,
)
from yuxi_dash.errors import InvalidInput
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Conversation, UsageSnapshotRow

DAY1 = datetime(2026, 11, 30, 23, 30, tzinfo=UTC)
DAY2 = DAY1 + timedelta(hours=1)  # 2026-12-01 00:30 UTC: the next UTC day
PRICES = {
    "alpha": {"input_per_million": 3, "output_per_million": 15},
    "*": {"input_per_million": 0.5, "output_per_million": 1.5},
}
# thread, user, agent
THREADS = [("t-a1", "u1", "alpha"), ("t-a2", "u2", "alpha"), ("t-b1", "u1", "beta")]
# thread, at, source, llm_input_tokens, next_llm_input_tokens
CALLS = [
    ("t-a1", DAY1, "model_call", 10_000, 10_400),  # 400 out
    ("t-a1", DAY2, "model_call", 11_000, 11_200),  # 200 out
    ("t-a1", DAY2, "manual_compression", 2_000, 2_000),  # not a call
    ("t-a2", DAY1, "auto_compaction", 3_000, 3_100),  # the call the compaction ran in
    ("t-b1", DAY2, "model_call", 100_000, 99_000),  # the answer added nothing: 0 out
]


def _cost(price: dict[str, float], inp: int, out: int) -> Decimal:
    return (
        Decimal(inp) * Decimal(str(price["input_per_million"]))
        + Decimal(out) * Decimal(str(price["output_per_million"]))
    ) / 1_000_000


ALPHA, STAR = PRICES["alpha"], PRICES["*"]
HAND = {
    "t-a1": _cost(ALPHA, 10_000, 400) + _cost(ALPHA, 11_000, 200),
    "t-a2": _cost(ALPHA, 3_000, 100),
    "t-b1": _cost(STAR, 100_000, 0),
}


def _seed() -> None:
    with session_scope() as session:
        for thread_id, user, agent in THREADS:
            session.add(Conversation(thread_id=thread_id, user_id=user, agent_slug=agent))
        session.flush()
        for thread_id, at, source, inp, nxt in CALLS:
            session.add(
                UsageSnapshotRow(
                    thread_id=thread_id,
                    measured_at=at,
                    llm_input_tokens=inp,
                    next_llm_input_tokens=nxt,
                    context_window=200_000,
                    context_usage_ratio=0.0,
                    summary_trigger_tokens=100_000,
                    summary_pressure_ratio=0.0,
                    source=source,
                )
            )


@pytest.fixture
def prices() -> ModelPrices:
    return parse_prices(json.dumps(PRICES))


def test_cost_per_thread_is_the_hand_sum(db_url: str, prices: ModelPrices) -> None:
    _seed()
    with session_scope() as session:
        rows = {item.key: item for item in spend(session, prices, "thread")}
        costs = thread_costs(session, prices, ["t-a1", "t-a2", "t-b1", "t-none"])
    assert {key: row.cost_usd for key, row in rows.items()} == {
        key: float(value) for key, value in HAND.items()
    }
    assert costs == {**{key: float(value) for key, value in HAND.items()}, "t-none": 0.0}
    assert rows["t-a1"].model_calls == 2  # the manual compression's row is not a call
    assert (rows["t-a1"].input_tokens, rows["t-a1"].output_tokens) == (21_000, 600)
    assert rows["t-b1"].output_tokens == 0
    assert list(rows) == ["t-a1", "t-b1", "t-a2"]  # most spent first


def test_cost_per_user_agent_and_day(db_url: str, prices: ModelPrices) -> None:
    _seed()
    with session_scope() as session:
        users = {i.key: i.cost_usd for i in spend(session, prices, "user")}
        agents = {i.key: i.cost_usd for i in spend(session, prices, "agent")}
        days = spend(session, prices, "day")
        late = spend(session, prices, "day", since=DAY2)
    assert users == {"u1": float(HAND["t-a1"] + HAND["t-b1"]), "u2": float(HAND["t-a2"])}
    assert agents == {"alpha": float(HAND["t-a1"] + HAND["t-a2"]), "beta": float(HAND["t-b1"])}
    assert [(d.key, d.model_calls) for d in days] == [("2026-11-30", 2), ("2026-12-01", 2)]
    assert days[0].cost_usd == float(_cost(ALPHA, 10_000, 400) + _cost(ALPHA, 3_000, 100))
    assert [d.key for d in late] == ["2026-12-01"]


def test_per_agent_day_bounds_the_agent_label(db_url: str, prices: ModelPrices) -> None:
    _seed()
    with session_scope() as session:
        rows = spend_per_agent_day(session, prices, top=frozenset({"alpha"}))
    assert [(r.day, r.agent, r.model_calls) for r in rows] == [
        ("2026-11-30", "alpha", 2),
        ("2026-12-01", "alpha", 1),
        ("2026-12-01", "other", 1),
    ]
    assert rows[2].cost_usd == float(HAND["t-b1"])  # beta priced as itself (by *), then labelled
    assert [r.unpriced_calls for r in rows] == [0, 0, 0]


def test_per_agent_day_counts_the_unpriced_calls(db_url: str) -> None:
    _seed()
    only_alpha = parse_prices(json.dumps({"alpha": ALPHA}))
    with session_scope() as session:
        rows = spend_per_agent_day(session, only_alpha, top=frozenset({"alpha", "beta"}))
        bare = spend_per_agent_day(session, None, top=frozenset({"alpha", "beta"}))
    beta = next(r for r in rows if r.agent == "beta")
    assert (beta.cost_usd, beta.unpriced_calls) == (None, 1)  # no $0: counted as unpriced
    assert sum(r.unpriced_calls for r in rows) == 1
    assert [r.unpriced_calls for r in bare] == [0, 0, 0]  # no prices: nothing to count


def test_the_agents_a_price_key_can_match(db_url: str) -> None:
    _seed()
    with session_scope() as session:
        assert known_agents(session) == frozenset({"alpha", "beta"})


def test_without_prices_the_costs_are_null(db_url: str) -> None:
    _seed()
    with session_scope() as session:
        rows = spend(session, None, "agent")
        costs = thread_costs(session, None, ["t-a1"])
    assert [row.cost_usd for row in rows] == [None, None]
    assert sum(row.input_tokens for row in rows) == 124_000
    assert costs == {"t-a1": None}


def test_an_unpriced_agent_is_counted_not_guessed(db_url: str) -> None:
    _seed()
    only_alpha = parse_prices(json.dumps({"alpha": ALPHA}))
    with session_scope() as session:
        agents = {i.key: i for i in spend(session, only_alpha, "agent")}
        users = {i.key: i for i in spend(session, only_alpha, "user")}
    assert agents["beta"].cost_usd is None and agents["beta"].unpriced_calls == 1
    assert users["u1"].cost_usd == float(HAND["t-a1"]) and users["u1"].unpriced_calls == 1


def test_an_unknown_view_is_refused() -> None:
    with session_scope() as session, pytest.raises(InvalidInput):
        spend(session, None, "model")  # type: ignore[arg-type]


def test_one_threads_spend(db_url: str, prices: ModelPrices) -> None:
    _seed()
    with session_scope() as session:
        (row,) = spend(session, prices, "thread", thread_id="t-a2")
        assert spend(session, prices, "thread", thread_id="t-none") == []
    assert (row.key, row.model_calls, row.cost_usd) == ("t-a2", 1, float(HAND["t-a2"]))


def test_by_day_a_limit_keeps_the_newest_days(db_url: str, prices: ModelPrices) -> None:
    with session_scope() as session:
        session.add(Conversation(thread_id="t-long", user_id="u1", agent_slug="alpha"))
        session.flush()
        for n in range(7):  # one call a day for 7 days: more days than the limit
            session.add(
                UsageSnapshotRow(
                    thread_id="t-long",
                    measured_at=DAY1 + timedelta(days=n),
                    llm_input_tokens=1_000 * (n + 1),
                    next_llm_input_tokens=1_000 * (n + 1),
                    context_window=200_000,
                    context_usage_ratio=0.0,
                    summary_trigger_tokens=100_000,
                    summary_pressure_ratio=0.0,
                    source="model_call",
                )
            )
    with session_scope() as session:
        every = spend(session, prices, "day")
        newest = spend(session, prices, "day", limit=3)
        top = spend(session, prices, "thread", limit=1)
    assert len(every) == 7
    assert [d.key for d in newest] == ["2026-12-04", "2026-12-05", "2026-12-06"]  # oldest first
    assert newest == limited(every, "day", 3) and limited(every, "day", 9) == every
    assert [t.key for t in top] == ["t-long"]  # other views keep the most spent


def test_a_call_is_priced_by_its_recorded_model_before_its_agent(db_url: str) -> None:
    """Recorded model and output tokens win; rows without them keep the agent and estimate."""
    table = {
        **PRICES,
        "gpt-test": {"input_per_million": 10, "output_per_million": 30},
        "claude-x": {"input_per_million": 1, "output_per_million": 2},
    }
    prices = parse_prices(json.dumps(table))
    with session_scope() as session:
        session.add(Conversation(thread_id="t-m", user_id="u1", agent_slug="alpha"))
        session.flush()
        # model, output tokens as reported, llm_input_tokens, next_llm_input_tokens
        for minute, (model, out, inp, nxt) in enumerate(
            [
                ("gpt-test", 250, 1_000, 1_100),  # reported: 250 out, not the 100 estimated
                ("gpt-test", None, 2_000, 2_300),  # model reported, tokens not: 300 estimated
                ("claude-x", 40, 3_000, 3_500),
                (None, None, 4_000, 4_600),  # an old row: the agent's price, 600 estimated
                ("unlisted", 7, 5_000, 5_000),  # a model with no key: the agent's price
            ]
        ):
            session.add(
                UsageSnapshotRow(
                    thread_id="t-m",
                    measured_at=DAY1 + timedelta(minutes=minute),
                    llm_input_tokens=inp,
                    next_llm_input_tokens=nxt,
                    context_window=200_000,
                    context_usage_ratio=0.0,
                    summary_trigger_tokens=100_000,
                    summary_pressure_ratio=0.0,
                    source="model_call",
                    model=model,
                    output_tokens=out,
                )
            )
    hand = (
        _cost(table["gpt-test"], 1_000, 250)
        + _cost(table["gpt-test"], 2_000, 300)
        + _cost(table["claude-x"], 3_000, 40)
        + _cost(ALPHA, 4_000, 600)
        + _cost(ALPHA, 5_000, 7)
    )
    with session_scope() as session:
        (row,) = spend(session, prices, "thread")
        by_day = spend_per_agent_day(session, prices, top=frozenset({"alpha"}))
        costs = thread_costs(session, prices, ["t-m"])
    assert (row.model_calls, row.input_tokens) == (5, 15_000)
    assert row.output_tokens == 250 + 300 + 40 + 600 + 7
    assert row.cost_usd == float(hand) and row.unpriced_calls == 0
    assert costs == {"t-m": float(hand)}
    assert [(r.agent, r.cost_usd) for r in by_day] == [("alpha", float(hand))]


def test_a_model_key_some_call_records_is_matched(db_url: str) -> None:
    table = {
        "gpt-test": {"input_per_million": 1, "output_per_million": 1},
        "gpt-none": {"input_per_million": 1, "output_per_million": 1},
    }
    prices = parse_prices(json.dumps(table))
    _seed()
    with session_scope() as session:
        session.execute(
            sa.update(UsageSnapshotRow)
            .where(UsageSnapshotRow.thread_id == "t-b1")
            .values(model="gpt-test")
        )
    with session_scope() as session:
        assert matched_names(session, prices) == frozenset({"alpha", "beta", "gpt-test"})
        assert unmatched_keys(prices, matched_names(session, prices)) == ["gpt-none"]
        assert matched_names(session, None) == frozenset({"alpha", "beta"})
