"""The overview's hottest-thread picker: it starts on a thread that can be compressed, marks
the others and says why (`store.origin`), on the demo."""

from __future__ import annotations

from collections.abc import Callable

from streamlit.testing.v1 import AppTest

from yuxi_dash.settings import Settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.overview import pressure_points
from yuxi_dash.store.queries import list_threads


def test_the_picker_starts_on_a_compressible_thread_and_marks_the_others(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    with session_scope(demo_env) as session:
        hottest = [p.thread_id for p in pressure_points(session, limit=50)]
        capable = {t.thread_id: t.capable for t in list_threads(session, limit=100_000)}
    stuck = [t for t in hottest if not capable[t]]
    assert stuck, "the demo has hot threads whose agent cannot compress"
    at = app_test("app_pages/overview.py")
    assert not at.exception
    picker = at.selectbox(key="overview_open")
    assert picker.value == next(t for t in hottest if capable[t])
    marked = [o.split(" · ")[0] for o in picker.options if o.endswith(" · cannot be compressed")]
    assert marked == stuck
    assert len(picker.options) == len(hottest)  # still every one, to open

    picker.set_value(stuck[0]).run()
    (said,) = [c.value for c in at.caption if "cannot be compressed:" in c.value]
    assert said.startswith(stuck[0]) and "does not support context compression" in said
    assert at.page_link[0].proto.query_string == f"thread={stuck[0]}"
