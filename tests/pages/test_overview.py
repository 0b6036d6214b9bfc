"""app_pages/overview.py on the demo: KPIs agree with the store, the chart and filters render."""

from __future__ import annotations

from collections.abc import Callable

from streamlit.testing.v1 import AppTest

from yuxi_dash.settings import Settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.queries import count_threads


def _metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_overview_kpis_match_the_store(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    at = app_test("app_pages/overview.py")
    assert not at.exception
    with session_scope(demo_env) as session:
        total = count_threads(session)
        hot = count_threads(session, min_pressure=0.85)
        over = count_threads(session, min_pressure=1.0000001)
    metrics = _metrics(at)
    assert metrics["Threads"] == f"{total:,}"
    assert metrics["At or over 85%"] == f"{hot:,}"
    assert metrics["Over 100%"] == f"{over:,}"
    assert len(at.get("vega_lite_chart")) == 2  # the pressure chart and the model spend chart


def test_overview_explains_its_summary_share_and_the_75_percent_points(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    at = app_test("app_pages/overview.py")
    assert not at.exception
    [share] = [m for m in at.metric if m.label == "Summary active"]
    assert "Share of these threads" in share.proto.help  # a share here, yes/no on thread detail
    captions = " ".join(c.value for c in at.caption)
    assert "at or above 75%" in captions
    assert "they start below the 85% line so the threads approaching it show too" in captions


def test_overview_names_the_deleted_threads_it_leaves_out(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    at = app_test("app_pages/overview.py")
    assert not at.exception
    with session_scope(demo_env) as session:
        total = count_threads(session)
        deleted = count_threads(session, status="deleted")
    assert deleted > 1, "the demo deletes one thread in 40"
    captions = " ".join(c.value for c in at.caption)
    assert f"{total:,} active and archived threads; {deleted:,} deleted threads are" in captions


def test_overview_filter_by_agent_narrows_the_kpis(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    at = app_test("app_pages/overview.py")
    agent_box = at.selectbox[0]
    agent = agent_box.options[0]
    agent_box.set_value(agent).run()
    assert not at.exception
    with session_scope(demo_env) as session:
        expected = count_threads(session, agent=agent)
    assert _metrics(at)["Threads"] == f"{expected:,}"


def test_the_hottest_threads_link_to_their_detail(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    from yuxi_dash.store.overview import pressure_points

    with session_scope(demo_env) as session:
        hottest = [p.thread_id for p in pressure_points(session, limit=50)]
    at = app_test("app_pages/overview.py")
    picker = at.selectbox(key="overview_open")
    assert picker.options[0].startswith(f"{hottest[0]} · ")
    assert len(picker.options) == len(hottest)
    picker.set_value(hottest[1]).run()
    link = at.page_link[0]
    assert link.value == f"Open {hottest[1]}"
    assert link.proto.query_string == f"thread={hottest[1]}"
