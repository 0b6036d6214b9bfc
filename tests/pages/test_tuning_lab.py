"""app_pages/tuning_lab.py: a replay run in slices with progress, stopped mid-run, and finished.

The fleet is made by really running our engine (`tests.tuning.fleet_builders`). The page replays
a slice per script run; Stop is answered after the slice in flight (the run's stop flag), and
what was replayed is drawn with its one audit row, written "pending" when Run is pressed.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from streamlit.testing.v1 import AppTest

from tests.fixtures.app import APP
from tests.tuning.fleet_builders import AGENT, simulated_fleet
from yuxi_dash.access.audit import wait_for_pending_audit
from yuxi_dash.service import upsert_agent
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AuditEntry
from yuxi_dash.tuning.fleet import ACTION
from yuxi_dash.ui.tuning import run as tuning_run
from yuxi_dash.ui.tuning.run import RUN_KEY, tuning_agents

PAGE = "app_pages/tuning_lab.py"


@pytest.fixture(autouse=True)
def fresh_caches() -> Iterator[None]:
    tuning_agents.clear()
    yield
    tuning_agents.clear()


def _audit() -> list[tuple[str, dict[str, object]]]:
    wait_for_pending_audit()
    with session_scope() as session:
        rows = session.execute(
            sa.select(AuditEntry.outcome, AuditEntry.detail).where(AuditEntry.action == ACTION)
        ).all()
    return [(outcome, dict(detail or {})) for outcome, detail in rows]


def _open() -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    at.switch_page(PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _submit(at: AppTest, k: int) -> AppTest:
    at.selectbox(key="tuning_agent").set_value(AGENT).run()
    at.number_input(key=f"tuning_summary_threshold_{AGENT}").set_value(k)
    [run] = [b for b in at.button if b.label == "Run"]
    run.click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_an_empty_store_says_there_is_no_agent() -> None:
    at = _open()
    assert [i.value for i in at.main.info] == [
        "No agent yet: the lab replays an agent's recorded threads."
    ]


def test_a_stop_mid_run_keeps_the_threads_replayed(monkeypatch: pytest.MonkeyPatch) -> None:
    simulated_fleet(threads=4, turns=4)
    monkeypatch.setattr(tuning_run, "STEP_THREADS", 1)  # one thread per slice
    at = _submit(_open(), 5)
    run = at.session_state[RUN_KEY]
    assert (run.done, run.total, run.complete) == (1, 4, False)
    [progress] = at.get("progress")
    assert "Replayed 1 of 4 threads" in str(progress.proto)
    assert [outcome for outcome, _d in _audit()] == ["pending"]  # completed when it ends
    at.button(key="tuning_stop").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert run.stopped and run.done == 1
    captions = [c.value for c in at.caption]
    assert any("stopped after 1 thread:" in c for c in captions), captions
    [(outcome, detail)] = _audit()
    assert outcome == "stopped" and detail["threads_replayed"] == 1
    at.run()  # drawing the result again writes no second row
    assert len(_audit()) == 1


def test_a_finished_run_draws_both_sides_a_chart_and_the_fields_to_copy() -> None:
    simulated_fleet(threads=2, turns=6)
    at = _submit(_open(), 5)
    run = at.session_state[RUN_KEY]
    assert run.complete and not run.stopped and run.done == 2
    table, threads = (frame.value for frame in at.dataframe)
    figures = dict(
        zip(table["Figure"], zip(table["In force"], table["Proposed"], strict=True), strict=True)
    )
    assert figures["summary threshold"] == ("8 K", "5 K")
    assert list(threads["thread"]) == ["sim-11-01", "sim-11-02"]
    assert len(at.get("vega_lite_chart")) == 1
    [fields] = at.code
    assert "summary_threshold = 5  # K tokens (x 1024 = 5,120 tokens)" in fields.value
    [(outcome, _detail)] = _audit()
    assert outcome == "completed"


def test_run_pressed_again_mid_run_ends_the_first_run_as_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    simulated_fleet(threads=3, turns=3)
    monkeypatch.setattr(tuning_run, "STEP_THREADS", 1)
    at = _submit(_open(), 5)
    first = at.session_state[RUN_KEY]
    assert not first.complete
    [run] = [b for b in at.button if b.label == "Run"]
    run.click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert first.stopped and at.session_state[RUN_KEY] is not first
    assert [outcome for outcome, _d in _audit()] == ["stopped", "pending"]


def test_an_agent_with_no_threads_says_so() -> None:
    simulated_fleet(threads=1, turns=2)
    with session_scope() as session:
        upsert_agent(session, "quiet", capabilities=["context_compression"])
    at = _open()
    at.selectbox(key="tuning_agent").set_value("quiet").run()
    [b for b in at.button if b.label == "Run"][0].click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert "Agent quiet has no recorded threads: nothing to replay." in [i.value for i in at.info]
    assert not at.dataframe


def test_a_viewer_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    simulated_fleet(threads=1, turns=2)
    monkeypatch.setenv("YUXI_DASH_VIEWERS", "operator@localhost")  # the local user: a viewer
    get_settings.cache_clear()
    app = AppTest.from_file(str(APP), default_timeout=60).run()
    with pytest.raises(ValueError, match="Could not find a navigation page"):
        app.switch_page(PAGE)  # not in a viewer's navigation
    at = AppTest.from_file(str(APP.parent / PAGE), default_timeout=60).run()  # the page refuses
    assert not at.exception, [e.value for e in at.exception]
    assert [e.value for e in at.error] == [
        "You need the operator role to run the tuning lab; you are viewer."
    ]
    assert not at.button and not _audit()
