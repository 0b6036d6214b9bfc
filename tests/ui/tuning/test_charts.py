"""yuxi_dash.ui.tuning.charts: one thread's input tokens per turn, both sides, with its events.

Turns are model calls numbered from 1, as in the report's thread entry: an event is drawn
at the turn the entry names.
"""

from __future__ import annotations

from yuxi_dash.tuning.replay import CompressionSettings, ThreadReplay
from yuxi_dash.tuning.report import thread_entry
from yuxi_dash.ui.tuning.charts import turn_frame, turns_chart


def _replay(inputs: tuple[int, ...], summaries: tuple[int, ...], offloads: tuple[int, ...]):
    return ThreadReplay("t", inputs, compression_turns=summaries, offload_turns=offloads)


def test_events_sit_on_the_turns_the_entry_names() -> None:
    now = _replay((100, 900, 300, 400), (2,), ())
    new = _replay((100, 500, 200, 300), (2,), (1,))
    entry = thread_entry("t", "ours", now, new)
    frame = turn_frame(entry)
    assert list(frame[frame["side"] == "In force"]["turn"]) == [1, 2, 3, 4]
    events = frame[frame["event"] != ""]
    found = sorted(zip(events["side"], events["turn"], events["event"], strict=True))
    assert found == [
        ("In force", 3, "summary"),
        ("Proposed", 2, "offload"),
        ("Proposed", 3, "summary"),
    ]
    assert entry["proposed"]["compression_turns"] == [3]  # the same numbers as the chart


def test_the_chart_has_both_sides_and_their_triggers() -> None:
    entry = thread_entry("t", "ours", _replay((1, 2), (), ()), _replay((1, 2), (), ()))
    triggers = {"current": CompressionSettings(8, 300, 10).trigger_tokens, "proposed": 5120}
    spec = turns_chart(entry, triggers).to_dict()
    assert len(spec["layer"]) == 3
    rules = [
        row["tokens"]
        for name, rows in spec["datasets"].items()
        for row in rows
        if "turn" not in row
    ]
    assert sorted(rules) == [5120, 8192]
