"""yuxi_dash.tuning.report: the sides' sums, the JSON shape, the table and the fields to copy."""

from __future__ import annotations

from yuxi_dash.tuning.replay import CompressionSettings, ThreadReplay
from yuxi_dash.tuning.report import (
    TuningResult,
    comparison_rows,
    config_lines,
    percentile,
    side_summary,
    summary_lines,
    thread_entry,
)

NOW = CompressionSettings(8, 300, 10)
NEW = CompressionSettings(6, 200, 6)


def _replay(
    thread: str, inputs: tuple[int, ...], compressions=(), offloads=(), end=0, cited=(0, 0)
):
    return ThreadReplay(
        thread_id=thread,
        input_tokens=inputs,
        compression_turns=tuple(compressions),
        offload_turns=tuple(offloads),
        cited_total=cited[0],
        cited_in_view=cited[1],
        end_tokens=end,
        trigger_tokens=8 * 1024,
    )


def test_a_side_sums_its_threads() -> None:
    a = _replay("a", (100, 200, 300, 8000), (3,), (1, 2), end=7000, cited=(4, 3))
    b = _replay("b", (50, 60), end=100)
    side = side_summary(NOW, [a, b])
    assert (side.threads, side.turns, side.compressions, side.offload_only_passes) == (2, 6, 1, 2)
    assert side.input_tokens_total == 8710
    assert side.input_tokens_per_turn_p95 == 8000
    assert side.evidence_kept_share == 0.75
    assert side.threads_at_or_above_85 == 1  # 7,000 of 8,192
    assert side.compressions_per_1000_turns == 1000 / 6
    assert side.estimated  # a summary ran: the replay's summarizer may not be the agent's
    assert not side_summary(NOW, [b, _replay("c", (5,), offloads=(0,))]).estimated


def test_the_result_reads_as_json_a_table_and_fields() -> None:
    a_now, a_new = _replay("a", (10, 20)), _replay("a", (10, 15), (1,), (0,))
    result = TuningResult(
        agent="agent-1",
        current=side_summary(NOW, [a_now]),
        proposed=side_summary(NEW, [a_new]),
        threads=[thread_entry("a", "own", a_now, a_new)],
        threads_listed=5,
        threads_planned=1,
        sample=1,
    )
    data = result.to_dict()
    assert {"current", "proposed", "threads", "config"} <= set(data)
    proposed = data["threads"][0]["proposed"]
    assert (proposed["compression_turns"], proposed["offload_turns"]) == ([2], [1])  # from 1
    assert proposed["compressions"] == 1 and proposed["offload_only_passes"] == 1
    assert data["config"]["summary_tool_result_token_limit"] == {"value": 200, "unit": "tokens"}
    rows = {name: (now, new) for name, now, new in comparison_rows(result)}
    assert rows["compressions"] == ("0", "1") and rows["messages kept"] == ("10", "6")
    assert rows["offload-only passes"] == ("0", "1")
    assert (
        summary_lines(result)[0]
        == "agent agent-1: replayed 1 of a stratified sample of 1 of 5 threads"
    )
    assert config_lines(NEW) == [
        "summary_threshold = 6  # K tokens (x 1024 = 6,144 tokens)",
        "summary_tool_result_token_limit = 200  # tokens",
        "summary_keep_messages = 6  # messages",
    ]


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 0.95) == 0
    assert percentile(list(range(1, 101)), 0.95) == 95
    assert percentile([7], 0.95) == 7


def test_a_stopped_run_and_left_out_threads_are_said_in_words() -> None:
    a = _replay("a", (10, 20))
    result = TuningResult(
        agent="agent-1",
        current=side_summary(NOW, [a]),
        proposed=side_summary(NEW, [a]),
        threads=[thread_entry("a", "own", a, a)],
        threads_listed=3,
        threads_planned=3,
        stopped=True,
        failed={"summarizer_failed": 1},
        unreadable={"platform_unavailable": 2},
    )
    lines = summary_lines(result)
    assert "stopped after 1 thread: the figures cover those only" in lines
    assert "left out, could not be replayed (summarizer_failed): 1 thread" in lines
    assert "left out, could not be read (platform_unavailable): 2 threads" in lines
    assert result.to_dict()["failed"] == {"summarizer_failed": 1}
