"""The next-input breakdown: "Compressed away" counts what compression really took out.

The messages a summary replaced are counted as the model was sent them, with long
file-write arguments already shortened, so the figure never exceeds what was compressed;
the chart draws it as its own bar, with every legend label whole.
"""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from yuxi_dash.compression import context_view, count_tokens, truncate_tool_args
from yuxi_dash.compression.thread_state import SummaryEvent, ThreadContextState
from yuxi_dash.ui.charts import AWAY_ROW, SENT_ROW, breakdown_frame, context_breakdown_chart


def _state() -> ThreadContextState:
    big = "print('x')\n" * 3000  # a 33,000-character file the agent wrote
    messages = [
        HumanMessage(content="Write the migration script."),
        AIMessage(
            content="",
            tool_calls=[
                {"name": "write_file", "args": {"path": "m.py", "content": big}, "id": "w1"}
            ],
        ),
        ToolMessage(content="Wrote 33000 characters to m.py", tool_call_id="w1", name="write_file"),
        AIMessage(content="Done: the script is in m.py."),
        HumanMessage(content="Now check it for locking problems."),
        AIMessage(content="It takes a short lock only."),
    ]
    summary = SummaryEvent(
        cutoff_index=4,
        summary_message=HumanMessage(content="[Conversation summary] A script was written."),
        file_path="outputs/conversation_history/session_t.md",
        created_at_index=6,
    )
    return ThreadContextState(thread_id="t", messages=messages, summary=summary)


def test_compressed_away_counts_the_replaced_messages_as_they_were_sent() -> None:
    state = _state()
    replaced = state.messages[:4]
    as_sent = count_tokens(truncate_tool_args(replaced))
    in_full = count_tokens(replaced)
    assert in_full > 5 * as_sent  # the long argument the model never saw in full
    view = context_view(state)
    assert view.breakdown["compressed_away"] == as_sent  # not in_full


def test_the_chart_draws_what_was_compressed_away_as_its_own_bar() -> None:
    breakdown = {"messages": 1200, "tool_results": 800, "summary": 90, "compressed_away": 30_000}
    frame = breakdown_frame(breakdown)
    rows = dict(zip(frame["part"], frame["row"], strict=True))
    assert rows["Compressed away (not sent)"] == AWAY_ROW
    assert {rows[p] for p in ("Messages", "Tool results", "Summary")} == {SENT_ROW}
    assert dict(zip(frame["part"], frame["tokens_text"], strict=True))[
        "Compressed away (not sent)"
    ] == ("30,000")
    spec = context_breakdown_chart(breakdown).to_dict()
    encoding = spec["encoding"]
    assert encoding["y"]["field"] == "row"  # two bars: the input, and what was taken out
    assert encoding["color"]["legend"]["labelLimit"] == 0  # no legend label is cut
    assert encoding["y"]["axis"]["labelLimit"] == 0
    data = next(iter(spec["datasets"].values()))
    assert [(d["row"], d["tokens"]) for d in data if d["row"] == AWAY_ROW] == [(AWAY_ROW, 30_000)]
