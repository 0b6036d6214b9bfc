"""app_pages/thread_detail.py on the demo: the thread from ?thread=, its figures, tabs and context."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from streamlit.testing.v1 import AppTest

from yuxi_dash.settings import Settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.queries import get_thread, list_threads
from yuxi_dash.store.thread_list import thread_forecasts
from yuxi_dash.ui.page_text import crossing_text, pct

PAGE = "app_pages/thread_detail.py"


def test_detail_shows_the_requested_thread(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    with session_scope(demo_env) as session:
        hottest = list_threads(session, limit=1)[0]
        detail = get_thread(session, hottest.thread_id)
    at = app_test()
    at.query_params["thread"] = hottest.thread_id
    at.switch_page(PAGE).run()
    assert not at.exception
    assert at.selectbox(key="detail_thread").value == hottest.thread_id
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Summary pressure"] == pct(hottest.summary_pressure_ratio)
    assert [t.label for t in at.tabs] == [
        "Pressure timeline",
        "Next model input",
        "Full chat record",
        "Compressions",
    ]
    chat_frames = [d.value for d in at.dataframe if "sequence" in d.value.columns]
    assert chat_frames and len(chat_frames[0]) > 0
    visible = detail.state.model_visible_messages()
    captions = " ".join(c.value for c in at.caption)
    assert f"{len(visible):,} messages" in captions
    # the record is never compressed; the thread may well have been
    assert (
        f"{len(chat_frames[0]):,} messages as the user and agent wrote them: this record is "
        "never compressed."
    ) in captions
    # when it crosses the threshold, as `threads --json` forecasts it (issue 40)
    with session_scope(demo_env) as session:
        forecast = thread_forecasts(session, [hottest])[hottest.thread_id]
    crossing = crossing_text(forecast["turns_to_100"], forecast["seconds_to_100"])
    said = crossing if crossing != "–" else forecast["forecast_note"]
    assert f"Crosses the summary threshold{' in' if crossing != '–' else ''}: {said}." in captions


def test_detail_of_an_unknown_thread_is_one_line(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    at = app_test()
    at.query_params["thread"] = "no-such-thread"
    at.switch_page(PAGE).run()
    assert not at.exception
    assert len(at.error) == 1 and "[thread_not_found]" in at.error[0].value


def _thread_with_long_write_file(settings: Settings) -> str:
    with session_scope(settings) as session:
        for row in list_threads(session, limit=200):
            state = get_thread(session, row.thread_id).state
            for message in state.model_visible_messages()[-40:]:
                for call in getattr(message, "tool_calls", None) or []:
                    content = (call.get("args") or {}).get("content")
                    if call.get("name") == "write_file" and len(str(content)) > 2000:
                        return row.thread_id
    raise AssertionError("the demo should have a write_file call with a long argument")


def test_context_is_shown_as_the_next_call_gets_it(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    thread_id = _thread_with_long_write_file(demo_env)
    at = app_test()
    at.query_params["thread"] = thread_id
    at.switch_page(PAGE).run()
    assert not at.exception
    code = "\n".join(c.value for c in at.code)
    assert "...(argument truncated for context view)" in code


def test_a_message_linked_from_a_facts_provenance_is_shown(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    """`?message=N` (the link from a fact's provenance on the Facts page) shows that message."""
    import sqlalchemy as sa

    from yuxi_dash.store.models import ChatMessage

    with session_scope(demo_env) as session:
        hottest = list_threads(session, limit=1)[0]
        sequence = session.scalar(
            sa.select(sa.func.max(ChatMessage.sequence)).where(
                ChatMessage.thread_id == hottest.thread_id
            )
        )
    at = app_test()
    at.query_params["thread"] = hottest.thread_id
    at.query_params["message"] = str(sequence)
    at.switch_page(PAGE).run()
    assert not at.exception
    assert any(f"Linked message #{sequence}" in str(i.value) for i in at.info)
    captions = [c.value for c in at.caption]
    assert f"From message #{sequence - 2}; the linked message is highlighted." in captions
    [chat] = [d.value for d in at.dataframe if "sequence" in d.value.columns]
    assert chat["sequence"].tolist() == [sequence - 2, sequence - 1, sequence]
    at = at.toggle(key="chat_from_start").set_value(True).run()
    [chat] = [d.value for d in at.dataframe if "sequence" in d.value.columns]
    assert chat["sequence"].iloc[0] == 1


def test_figures_the_dashboard_cannot_know_read_not_measured(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    with session_scope(demo_env) as session:
        hottest = list_threads(session, limit=1)[0]
    at = app_test()
    at.query_params["thread"] = hottest.thread_id
    at.switch_page(PAGE).run()
    assert not at.exception
    [parts] = [d.value for d in at.dataframe if "part" in d.value.columns]
    shares = dict(zip(parts["part"], parts["share"], strict=True))
    assert shares["System prompt"] == shares["Tool schemas"] == "not measured"
    assert shares["Messages"].endswith("%")
    assert any("not known to the dashboard" in c.value for c in at.caption)


def test_next_input_tokens_reconcile_with_the_pressure_and_every_page(
    app_test: Callable[..., AppTest], demo_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 37 item 4: one count everywhere (the projected next_llm_input_tokens, the one
    pressure divides), and the page says in words what it holds beyond what it can see."""
    from yuxi_dash.cli import main
    from yuxi_dash.sources import preview_compression
    from yuxi_dash.ui.charts import pressure_overview_chart
    from yuxi_dash.ui.loaders import pressure_overview
    from yuxi_dash.ui.page_text import threshold_room_text, tokens

    with session_scope(demo_env) as session:
        hottest = list_threads(session, limit=1)[0]
        hot = list_threads(session, min_pressure=0.85, limit=1000)
    assert hottest.next_llm_input_tokens > 0
    at = app_test()
    at.query_params["thread"] = hottest.thread_id
    at.switch_page(PAGE).run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    shown = metrics["Next input tokens"]
    assert shown == tokens(hottest.next_llm_input_tokens)
    ratio = hottest.next_llm_input_tokens / hottest.summary_trigger_tokens
    assert metrics["Summary pressure"] == pct(ratio)  # 18,745 ÷ 8,192: the figures reconcile
    # the overview tooltip, the 85% list's "over by" and the CLI read the same figure
    points = pressure_overview()["points"]
    spec = json.dumps(pressure_overview_chart(pressure_overview()["heatmap"], points).to_dict())
    assert f'"next_text": "{shown}"' in spec
    room = hottest.summary_trigger_tokens - hottest.next_llm_input_tokens
    assert threshold_room_text(hottest.next_llm_input_tokens, hottest.summary_trigger_tokens) in (
        f"over by {-room:,}",
        f"{room:,} left",
    )
    assert main(["threads", "--limit", "1"]) == 0
    assert shown in capsys.readouterr().out.splitlines()[2]
    # what the pressure holds beyond the visible messages is said on the page, not in a tooltip
    caption = next(
        c.value for c in at.caption if "next input tokens ÷ summary threshold" in c.value
    )
    assert "system prompt and tool schemas" in caption
    # the parts add up to the figure shown; the dashboard's own count is the preview's "before"
    [parts] = [d.value for d in at.dataframe if "part" in d.value.columns]
    sent = parts[parts["part"] != "Compressed away (not sent)"]
    counted = [int(t.replace(",", "")) for t in sent["tokens"] if t != "–"]
    assert sum(counted) == hottest.next_llm_input_tokens
    thread = next(t for t in hot if t.capable and not t.busy_reason)
    preview = preview_compression(thread.thread_id)
    at.selectbox(key="detail_thread").set_value(thread.thread_id).run()
    assert {m.label: m.value for m in at.metric}["Next input tokens"] == tokens(
        thread.next_llm_input_tokens
    )
    caption = next(
        c.value for c in at.caption if "next input tokens ÷ summary threshold" in c.value
    )
    before = tokens(preview.estimated_before_tokens)
    assert f"The dashboard counts {before} of them" in caption or (
        preview.estimated_before_tokens == thread.next_llm_input_tokens
    )


def test_no_cell_reads_none_and_the_chat_record_reads_as_words(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    """Issue 37 item 9: the parts table has no None cell; a tool call in the chat record reads
    "calls NAME — key: value" and a JSON tool result as its records, never as raw JSON."""
    with session_scope(demo_env) as session:
        hottest = list_threads(session, limit=1)[0]
    at = app_test()
    at.query_params["thread"] = hottest.thread_id
    at.switch_page(PAGE).run()
    assert not at.exception
    [parts] = [d.value for d in at.dataframe if "part" in d.value.columns]
    cells = [v for column in parts.columns for v in parts[column]]
    assert all(isinstance(v, str) and v and v not in ("None", "nan") for v in cells)
    assert parts.set_index("part").at["System prompt", "tokens"] == "–"
    [chat] = [d.value for d in at.dataframe if "sequence" in d.value.columns]
    shown = list(chat["shown"])
    calls = [line for text in shown for line in text.split("\n") if line.startswith("calls ")]
    assert calls and all(" — " in line and " {" not in line for line in calls)
    tools = list(chat[chat["role"] == "tool"]["shown"])
    assert tools and not any(text.lstrip().startswith(("{", "[")) for text in tools)
    assert any(" results for “" in text for text in tools)  # a query_kb / web_search result
