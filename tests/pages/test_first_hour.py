"""A new operator's first hour at 1440 px, in AppTest on the seeded demo.

- One number, one look: a thread's pressure reads the same in the threads table, the picker,
  the thread detail and the CLI; token counts have separators; moments are in one format.
- Tables fit: each column of the threads, tool-results and memory-vs-chat tables has a pixel
  width, and together they fit the main column at 1440 px with the sidebar open (979 px,
  measured in Chromium; see the report's screenshots).
- The overview's thread count and the demo's can be reconciled (deleted threads).
- A page of a tool result starts at the beginning of a line; the entities pager stops at
  the last page.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from yuxi_dash.cli import main
from yuxi_dash.settings import Settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.queries import count_threads, list_threads
from yuxi_dash.wording import PERCENT_FORMAT, pct

MAIN_COLUMN_PX = 979  # the dataframe width at a 1440 px viewport, sidebar open
STAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")  # one format, to the second


def _columns(frame: Any) -> dict[str, dict[str, Any]]:
    """The column configuration Streamlit sends to the browser for one st.dataframe."""
    return json.loads(frame.proto.columns)


def _widths_fit(frame: Any, shown: list[str]) -> int:
    config = _columns(frame)
    widths = {c: config.get(c, {}).get("width") for c in shown}
    assert all(isinstance(w, int) for w in widths.values()), widths  # none left to chance
    total = sum(widths.values())
    assert total <= MAIN_COLUMN_PX, widths
    return total


def test_one_threads_pressure_reads_the_same_everywhere(
    app_test: Callable[..., AppTest], demo_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    with session_scope(demo_env) as session:
        hot = list_threads(session, limit=1)[0]
    expected = pct(hot.summary_pressure_ratio)  # 162.3% for the demo's hottest thread
    at = app_test("app_pages/threads.py")
    at = at.toggle(key="threads_actionable_only").set_value(False).run()  # every hot thread
    assert not at.exception
    table = at.dataframe[0]
    config = _columns(table)
    # the browser formats the number it gets with this printf format, so hand it the rounding
    assert config["pressure"]["type_config"]["format"] == PERCENT_FORMAT
    shown = table.value.set_index("thread").at[hot.thread_id, "pressure"]
    assert PERCENT_FORMAT % shown == expected
    picker = at.selectbox(key="compress_thread")
    assert f"{hot.thread_id} · {expected}" in picker.options
    at.query_params["thread"] = hot.thread_id
    at.switch_page("app_pages/thread_detail.py").run()
    assert {m.label: m.value for m in at.metric}["Summary pressure"] == expected
    assert main(["threads", "--limit", "1"]) == 0
    assert expected in capsys.readouterr().out.splitlines()[2]


def test_token_counts_have_separators_and_moments_one_format(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    with session_scope(demo_env) as session:
        hot = list_threads(session, limit=1)[0]
    at = app_test()
    at.query_params["thread"] = hot.thread_id
    at.switch_page("app_pages/thread_detail.py").run()
    assert not at.exception
    parts = next(d for d in at.dataframe if "part" in d.value.columns)
    counts = [t for t in parts.value["tokens"] if t != "–"]  # an unmeasured part: no "None"
    assert all(re.fullmatch(r"\d{1,3}(,\d{3})*", t) for t in counts)  # 28,045
    assert max(int(t.replace(",", "")) for t in counts) >= 1000
    shares = parts.value.set_index("part")["share"]
    assert shares["Compressed away (not sent)"] == "not sent"
    unknown = ["System prompt", "Tool schemas"]  # not known to the dashboard: not measured
    assert all(shares[part] == "not measured" for part in unknown)
    measured = shares.drop(["Compressed away (not sent)", *unknown])
    assert all(s.endswith("%") for s in measured)
    chat = next(d for d in at.dataframe if "sequence" in d.value.columns)
    assert all(STAMP.fullmatch(v) for v in chat.value["at"])
    at.switch_page("app_pages/tool_results.py").run()
    listing = at.dataframe[0]
    assert all(STAMP.fullmatch(v) for v in listing.value["saved_at"])
    assert _columns(listing)["chars"]["type_config"]["format"] == "localized"
    at.switch_page("app_pages/audit.py").run()  # the audit log: the same look, to the second
    moments = at.dataframe[0].value["at"]
    assert len(moments) and all(STAMP.fullmatch(v) for v in moments)


def test_threads_and_tool_results_tables_fit_at_1440(app_test: Callable[..., AppTest]) -> None:
    at = app_test("app_pages/threads.py")
    _widths_fit(at.dataframe[0], list(at.dataframe[0].value.columns))
    at.switch_page("app_pages/tool_results.py").run()
    assert not at.exception
    listing = at.dataframe[0]
    _widths_fit(listing, list(listing.value.columns))
    assert "Every file listed is under" in " ".join(c.value for c in at.caption)


def test_memory_vs_chat_table_fits_at_1440(memory_pages: Any) -> None:
    at = memory_pages("memory_chat.py", "alice_chen")
    assert not at.exception
    facts = at.dataframe[0]
    shown = ["suspect", "supported_by_chat", "fact", "key_terms", "source_kind", "status"]
    assert json.loads(json.dumps(list(facts.proto.column_order))) == shown
    _widths_fit(facts, shown)


def test_the_overview_count_reconciles_with_every_thread(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    with session_scope(demo_env) as session:
        every = count_threads(session, include_deleted=True)  # what the demo says it made
        deleted = count_threads(session, status="deleted")
    assert deleted, "the demo deletes a few threads"
    at = app_test("app_pages/overview.py")
    shown = int({m.label: m.value for m in at.metric}["Threads"].replace(",", ""))
    note = next(c.value for c in at.caption if "deleted" in c.value)
    assert note.startswith(f"{shown:,} active and archived threads; {deleted:,} deleted")
    assert shown + deleted == every
    status = at.selectbox[2]
    assert "deleted" in status.options
    status.set_value("deleted").run()
    assert {m.label: m.value for m in at.metric}["Threads"] == f"{deleted:,}"


def test_a_page_of_a_tool_result_starts_at_the_beginning_of_a_line(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    import sqlalchemy as sa

    from yuxi_dash.files.workdir import Workdir
    from yuxi_dash.service import index_saved_files
    from yuxi_dash.store.models import ToolResult

    content = "".join(f"{n:05d} " + "log text " * (1 + n % 9) + "\n" for n in range(2500))
    assert len(content) > 3 * 20_000  # several pages
    with session_scope(demo_env) as session:
        thread_id = list_threads(session, limit=1)[0].thread_id
        saved = Workdir(demo_env.workdir).save_tool_result("run_command", content)
        index_saved_files(session, thread_id, [("call-long-log", "run_command", saved)])
        result_id = session.scalar(sa.select(ToolResult.id).where(ToolResult.path == saved.path))
    at = app_test("app_pages/tool_results.py")
    at.selectbox(key="tool_result_id").set_value(result_id).run()
    assert not at.exception
    pager = at.number_input(key="tool_result_page")
    seen = []
    for page in range(1, int(pager.max) + 1):
        at.number_input(key="tool_result_page").set_value(page).run()
        window = at.code[-1].value
        start = content.find(window)
        assert start >= 0 and (start == 0 or content[start - 1] == "\n"), page
        seen.append(window)
    # every line once, none cut (st.code drops the newline that ends each page)
    assert "\n".join(seen) + "\n" == content


def test_the_entities_pager_stops_at_the_last_page(memory_pages: Any, graph_client: Any) -> None:
    total = graph_client.ro_value("user_alice_chen", "MATCH (n:Entity) RETURN count(n)")
    last = -(-total // 50)
    at = memory_pages("memory_entities.py", "alice_chen", entity_page=last + 5)
    assert not at.exception
    pager = at.number_input(key="entity_page")
    assert (pager.value, pager.max) == (last, last)
    caption = next(c.value for c in at.caption if "entities match" in c.value)
    first = (last - 1) * 50 + 1
    assert caption == f"{total:,} entities match; showing {first:,}–{total:,}."
    assert "showing 0" not in caption and len(at.dataframe[0].value) == total - first + 1
