"""Dashboard aggregates (yuxi_dash.store.overview) on SQLite and on real PostgreSQL.

Each test writes its own agent slug, and every aggregate is filtered by it, so
the shared session PostgreSQL database can hold other tests' rows too.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from yuxi_dash.settings import Settings
from yuxi_dash.store import overview
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Conversation, UsageSnapshotRow

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
# (summary pressure, context usage, summary active)
POPULATION = [
    (0.10, 0.05, False),
    (0.50, 0.30, False),
    (0.74, 0.52, False),
    (0.75, 0.55, True),
    (0.849, 0.60, False),
    (0.85, 0.61, False),
    (0.90, 0.66, True),
    (1.00, 0.70, False),
    (1.01, 0.99, False),
    (1.70, 1.00, True),
]


@pytest.fixture(params=["sqlite", "postgresql"])
def settings(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Settings:
    if request.param == "postgresql":
        monkeypatch.setenv("YUXI_DASH_DATABASE_URL", request.getfixturevalue("postgres_url"))
    return Settings()


def _seed(settings: Settings) -> str:
    agent = f"agent-{uuid.uuid4().hex[:8]}"
    with session_scope(settings) as session:
        for index, (pressure, usage, active) in enumerate(POPULATION):
            session.add(
                Conversation(
                    thread_id=f"{agent}-t{index:02d}",
                    user_id=f"user{index % 3}",
                    agent_slug=agent,
                    title="",
                    status="active" if index != 1 else "archived",
                    summary_pressure_ratio=pressure,
                    context_usage_ratio=usage,
                    next_llm_input_tokens=int(pressure * 102_400),
                    summary_trigger_tokens=102_400,
                    llm_input_tokens=int(usage * 128_000),
                    context_window=128_000,
                    summary_active=active,
                    last_activity_at=NOW - timedelta(days=index),
                )
            )
        session.add(
            Conversation(
                thread_id=f"{agent}-deleted",
                user_id="user0",
                agent_slug=agent,
                status="deleted",
                summary_pressure_ratio=2.0,
                context_usage_ratio=1.0,
                last_activity_at=NOW,
            )
        )
        session.flush()
        snapshots = [
            ("t09", NOW - timedelta(hours=1), "auto_compaction"),
            ("t08", NOW - timedelta(hours=23), "auto_compaction"),
            ("t07", NOW - timedelta(hours=2), "manual_compression"),
            ("t07", NOW - timedelta(days=2), "manual_compression"),  # outside the window
            ("t07", NOW - timedelta(hours=2), "model_call"),
            ("t06", NOW - timedelta(minutes=5), "model_call"),
        ]
        for suffix, at, source in snapshots:
            session.add(
                UsageSnapshotRow(
                    thread_id=f"{agent}-{suffix}",
                    measured_at=at,
                    llm_input_tokens=1,
                    next_llm_input_tokens=1,
                    context_window=128_000,
                    context_usage_ratio=0.1,
                    summary_trigger_tokens=102_400,
                    summary_pressure_ratio=0.1,
                    source=source,
                )
            )
    return agent


def test_kpis_count_the_population_and_recent_compressions(settings: Settings) -> None:
    agent = _seed(settings)
    with session_scope(settings) as session:
        kpis = overview.overview_kpis(session, where=overview.ThreadFilter(agent=agent), now=NOW)
    assert kpis.threads == 10  # the deleted thread is not part of the population
    assert kpis.at_or_over_suggestion == 5  # 0.849 is not, 0.85 is
    assert kpis.over_threshold == 2
    assert kpis.summary_active == 3
    assert kpis.summary_active_share == pytest.approx(0.3)
    assert (kpis.compressions_auto, kpis.compressions_manual) == (2, 1)


def test_filters_narrow_every_aggregate(settings: Settings) -> None:
    agent = _seed(settings)
    recent = overview.ThreadFilter(agent=agent, active_since=NOW - timedelta(days=2, hours=1))
    archived = overview.ThreadFilter(agent=agent, status="archived")
    user0 = overview.ThreadFilter(agent=agent, user_id="user0")
    with session_scope(settings) as session:
        assert overview.overview_kpis(session, where=recent, now=NOW).threads == 3
        assert overview.overview_kpis(session, where=archived, now=NOW).threads == 1
        assert [p.thread_id for p in overview.pressure_points(session, where=user0)] == [
            f"{agent}-t09",
            f"{agent}-t06",
            f"{agent}-t03",
        ]
        assert overview.compressions_since(session, NOW - timedelta(days=1), where=user0) == (
            1,
            0,
        )


def test_heatmap_bins_every_thread_once_in_sql(settings: Settings) -> None:
    agent = _seed(settings)
    with session_scope(settings) as session:
        cells = overview.pressure_heatmap(session, where=overview.ThreadFilter(agent=agent))
    assert sum(c.threads for c in cells) == 10
    by_corner = {(c.x0, c.y0): c.threads for c in cells}
    assert by_corner[(0.6, 0.85)] == 1  # usage 0.61, pressure exactly 0.85: its own row
    assert by_corner[(0.6, 0.8)] == 1  # usage 0.60, pressure 0.849
    assert by_corner[(0.975, 1.45)] == 1  # usage 1.0 and pressure 1.7 clamp to the last cell
    for cell in cells:
        assert cell.x1 - cell.x0 == pytest.approx(1 / overview.HEATMAP_X_BINS)
        assert cell.y1 - cell.y0 == pytest.approx(overview.HEATMAP_Y_STEP)


def test_population_is_the_kpis_heatmap_points_and_deleted_from_one_read(
    settings: Settings,
) -> None:
    agent = _seed(settings)
    with session_scope(settings) as session:  # a deleted thread alone in its bin
        session.add(
            Conversation(
                thread_id=f"{agent}-deleted-alone",
                user_id="user1",
                agent_slug=agent,
                status="deleted",
                summary_pressure_ratio=0.02,
                context_usage_ratio=0.9,
                last_activity_at=NOW,
            )
        )
    filters = [
        overview.ThreadFilter(agent=agent),
        overview.ThreadFilter(agent=agent, status="archived"),
        overview.ThreadFilter(agent=agent, status="deleted"),
        overview.ThreadFilter(agent=agent, active_since=NOW - timedelta(days=2, hours=1)),
        overview.ThreadFilter(agent=agent, user_id="user0"),
        overview.ThreadFilter(agent=agent, user_id="no-such-user"),
    ]
    with session_scope(settings) as session:
        for where in filters:
            population = overview.pressure_population(session, where=where, now=NOW)
            assert population.kpis == overview.overview_kpis(session, where=where, now=NOW)
            assert population.cells == overview.pressure_heatmap(session, where=where)
            assert population.at_or_above_points_floor == overview.count_at_or_above(
                session, where=where
            )
            deleted = overview.ThreadFilter(
                agent=where.agent,
                user_id=where.user_id,
                status="deleted",
                active_since=where.active_since,
            )
            assert population.deleted == (
                None
                if where.status
                else overview.overview_kpis(session, where=deleted, now=NOW).threads
            )
        population = overview.pressure_population(session, where=filters[0], now=NOW)
    kpis = population.kpis
    assert (kpis.threads, kpis.at_or_over_suggestion, kpis.over_threshold) == (10, 5, 2)
    assert (kpis.summary_active, kpis.compressions_auto, kpis.compressions_manual) == (3, 2, 1)
    assert (population.at_or_above_points_floor, population.deleted) == (7, 2)
    assert sum(c.threads for c in population.cells) == 10
    assert (0.9, 0.0) not in {(c.x0, c.y0) for c in population.cells}  # only a deleted thread


def test_points_are_the_threads_above_the_floor_highest_first(settings: Settings) -> None:
    agent = _seed(settings)
    where = overview.ThreadFilter(agent=agent)
    with session_scope(settings) as session:
        points = overview.pressure_points(session, where=where)
        capped = overview.pressure_points(session, where=where, limit=2)
        total = overview.count_at_or_above(session, where=where)
        choices = overview.filter_choices(session)
    assert [p.summary_pressure_ratio for p in points] == [1.7, 1.01, 1.0, 0.9, 0.85, 0.849, 0.75]
    assert total == 7
    assert [p.summary_pressure_ratio for p in capped] == [1.7, 1.01]
    assert agent in choices["agents"]
    assert {"active", "archived"} <= set(choices["statuses"])
    assert "deleted" not in choices["statuses"]
