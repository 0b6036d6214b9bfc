"""Fleet figures of the compression records (`store.compression_quality`) on SQLite and PostgreSQL.

The records are written as the writers write them (`store.compressions.insert_records`),
and each figure is checked against the same figure computed here from the seeded rows.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from yuxi_dash.errors import InvalidInput
from yuxi_dash.store import compression_quality as quality
from yuxi_dash.store.compressions import insert_records
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Conversation

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
MIDNIGHT = datetime(2026, 11, 28, 0, 0, tzinfo=UTC)

# (agent, trigger, origin, at, before, after, cited total, cited visible, cited lost)
SEEDED: list[tuple[str, str, str, datetime, int, int, int, int, int]] = [
    ("alpha", "automatic", "own", MIDNIGHT - timedelta(minutes=30), 9000, 1000, 4, 4, 0),
    ("alpha", "automatic", "own", MIDNIGHT + timedelta(minutes=30), 8000, 2000, 5, 2, 1),
    ("alpha", "manual", "own", MIDNIGHT + timedelta(hours=5), 7000, 1500, 3, 0, 3),
    ("beta", "automatic", "attached", NOW - timedelta(hours=1), 6000, 900, 2, 1, 0),
    ("beta", "manual", "attached", NOW - timedelta(days=40), 5000, 800, 6, 1, 2),
    ("gamma", "automatic", "own", NOW - timedelta(hours=2), 4000, 700, 0, 0, 0),
]


def _row(index: int, seeded: tuple[Any, ...]) -> dict[str, Any]:
    agent, trigger, origin, at, before, after, total, visible, lost = seeded
    return {
        "thread_id": f"t-{agent}",
        "event_key": f"{index:064d}",
        "at": at,
        "trigger": trigger,
        "actor": "ops@example.com" if trigger == "manual" else None,
        "origin": origin,
        "agent_slug": agent,
        "checkpoint_id": f"cp-{index}",
        "before_tokens": before,
        "after_tokens": after,
        "compressed_messages": 10,
        "summary": "## SESSION INTENT\n- x",
        "history_file": None,
        "history_sha256": None,
        "ledger": {"items": []},
        "evidence_visible": visible + 1,
        "evidence_recoverable": total - visible - lost + 2,
        "evidence_lost": lost,
        "cited_total": total,
        "cited_visible": visible,
        "cited_lost": lost,
    }


@pytest.fixture
def seeded(db_url: str) -> list[dict[str, Any]]:
    rows = [_row(index, seeded) for index, seeded in enumerate(SEEDED)]
    with session_scope() as session:
        for agent in sorted({row["agent_slug"] for row in rows}):
            session.add(
                Conversation(thread_id=f"t-{agent}", user_id="u1", agent_slug=agent, title="")
            )
        session.flush()
        assert insert_records(session, rows) == len(rows)
    return rows


def _oracle_totals(rows: list[dict[str, Any]]) -> dict[str, int]:
    return {
        "compressions": len(rows),
        "tokens_saved": sum(r["before_tokens"] - r["after_tokens"] for r in rows),
        "cited_total": sum(r["cited_total"] for r in rows),
        "cited_visible": sum(r["cited_visible"] for r in rows),
        "cited_lost": sum(r["cited_lost"] for r in rows),
        "evidence_recoverable": sum(r["evidence_recoverable"] for r in rows),
        "evidence_lost": sum(r["evidence_lost"] for r in rows),
        "losing": sum(r["cited_lost"] > 0 for r in rows),
    }


@pytest.mark.parametrize(
    ("where", "keep"),
    [
        (quality.QualityFilter(), lambda r: True),
        (quality.QualityFilter(agent="alpha"), lambda r: r["agent_slug"] == "alpha"),
        (quality.QualityFilter(trigger="manual"), lambda r: r["trigger"] == "manual"),
        (quality.QualityFilter(origin="attached"), lambda r: r["origin"] == "attached"),
        (
            quality.QualityFilter(since=NOW - timedelta(days=7), trigger="automatic"),
            lambda r: r["at"] >= NOW - timedelta(days=7) and r["trigger"] == "automatic",
        ),
        (quality.QualityFilter(agent="nobody"), lambda r: False),
    ],
)
def test_totals_are_the_sums_of_the_filtered_rows(
    seeded: list[dict[str, Any]], where: quality.QualityFilter, keep: Any
) -> None:
    with session_scope() as session:
        found = quality.totals(session, where)
    expected = _oracle_totals([r for r in seeded if keep(r)])
    assert found.to_dict() == expected
    share = expected["cited_visible"] / expected["cited_total"] if expected["cited_total"] else None
    assert found.cited_kept_share == share


def test_days_are_utc_days_split_by_trigger(seeded: list[dict[str, Any]]) -> None:
    with session_scope() as session:
        days = quality.per_day(session)
    expected: dict[tuple[date, str], list[int]] = defaultdict(lambda: [0, 0])
    for row in seeded:
        key = (row["at"].astimezone(UTC).date(), row["trigger"])
        expected[key][0] += 1
        expected[key][1] += row["before_tokens"] - row["after_tokens"]
    assert [(d.day, d.trigger, d.compressions, d.tokens_saved) for d in days] == [
        (day, trigger, n, saved) for (day, trigger), (n, saved) in sorted(expected.items())
    ]
    # half an hour either side of midnight UTC: two days
    assert {d.day for d in days} >= {date(2026, 11, 27), date(2026, 11, 28)}


def test_agents_with_the_most_compressions_first_and_how_many_in_all(
    seeded: list[dict[str, Any]],
) -> None:
    with session_scope() as session:
        top, total = quality.per_agent(session, limit=2)
        every, every_total = quality.per_agent(session)
    by_agent = Counter(r["agent_slug"] for r in seeded)
    assert [a.agent_slug for a in top] == ["alpha", "beta"] and total == 3
    assert every_total == 3 and {a.agent_slug: a.compressions for a in every} == by_agent
    alpha = next(a for a in every if a.agent_slug == "alpha")
    rows = [r for r in seeded if r["agent_slug"] == "alpha"]
    assert (alpha.cited_total, alpha.cited_visible, alpha.cited_lost) == (
        sum(r["cited_total"] for r in rows),
        sum(r["cited_visible"] for r in rows),
        sum(r["cited_lost"] for r in rows),
    )


def test_worst_lost_first_then_hidden_and_none_that_kept_everything(
    seeded: list[dict[str, Any]],
) -> None:
    with session_scope() as session:
        worst = quality.worst(session)
        only_beta = quality.worst(session, quality.QualityFilter(agent="beta"), limit=1)
    hidden = [r for r in seeded if r["cited_total"] > r["cited_visible"]]
    expected = sorted(
        hidden, key=lambda r: (-r["cited_lost"], -(r["cited_total"] - r["cited_visible"]))
    )
    assert [(w.cited_lost, w.cited_total - w.cited_visible) for w in worst] == [
        (r["cited_lost"], r["cited_total"] - r["cited_visible"]) for r in expected
    ]
    assert all(w.cited_hidden == w.cited_total - w.cited_visible - w.cited_lost for w in worst)
    assert [w.agent_slug for w in only_beta] == ["beta"] and only_beta[0].cited_lost == 2


def test_filters_refuse_values_no_record_holds(db_url: str) -> None:
    with session_scope() as session:
        with pytest.raises(InvalidInput):
            quality.totals(session, quality.QualityFilter(trigger="sometimes"))
        with pytest.raises(InvalidInput):
            quality.totals(session, quality.QualityFilter(origin="dashboard"))
        assert quality.totals(session).compressions == 0
        assert quality.per_day(session) == [] and quality.worst(session) == []
        assert quality.agents(session) == []


def test_agents_and_one_record_by_id(seeded: list[dict[str, Any]]) -> None:
    with session_scope() as session:
        assert quality.agents(session) == ["alpha", "beta", "gamma"]
        [first] = quality.worst(session, quality.QualityFilter(trigger="manual", agent="alpha"))
        view = quality.compression_by_id(session, first.id)
        assert quality.compression_by_id(session, 10**12) is None
    assert view is not None and view.thread_id == "t-alpha" and view.trigger == "manual"
