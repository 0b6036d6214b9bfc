"""One number, one look (yuxi_dash.wording): ratios, counts, ids, moments, LaunchDarkly reasons.

The dashboard and the CLI both format through these functions, so a value that reads
one way here reads that way on every page and in every command.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta, timezone
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal

import pandas as pd
import pytest

from yuxi_dash.cli.output import render_table
from yuxi_dash.cli.threads import _percent, _threads_shown
from yuxi_dash.ui.page_text import ago, md, page_bounds, page_count, page_window
from yuxi_dash.wording import (
    PERCENT_FORMAT,
    count,
    decimal,
    ident,
    pct,
    percent_value,
    plain,
    reason_text,
    stamp,
)

# Ratios whose percentage ends in an exact half: Python's float formatting rounds them to
# even, a browser rounds them up; 1.6225 is the demo's hottest thread (162.25%).
HALVES = [1.6225, 0.8125, 0.00125, 0.1675, 2.0005, 0.5]


@pytest.mark.parametrize("ratio", HALVES)
def test_a_half_reads_the_same_wherever_it_is_rounded(ratio: float) -> None:
    value = percent_value(ratio)
    assert value is not None
    text = pct(ratio)
    assert text == f"{value:.1f}%"  # what Python prints of the value the pages hand on
    # what a browser's half-up toFixed(1) prints of that value, as PERCENT_FORMAT asks
    assert PERCENT_FORMAT == "%.1f%%"
    for rounding in (ROUND_HALF_UP, ROUND_HALF_EVEN):
        shown = Decimal(repr(value)).quantize(Decimal("0.1"), rounding=rounding)
        assert f"{shown}%" == text


def test_percentages_round_half_up_to_one_decimal() -> None:
    assert pct(1.6225) == "162.3%"  # not 162.2% (float) or 162.25% (the browser's percent)
    assert pct(0.8734) == "87.3%"
    assert pct(1.0) == "100.0%"
    assert pct(None) == "–" and pct(float("nan")) == "–"
    assert pct(None, missing="-") == "-"


def test_the_cli_and_the_pages_write_a_ratio_alike() -> None:
    for ratio in [*HALVES, 0.0, 0.999, 1.23456]:
        assert _percent(ratio) == pct(ratio)
    assert _percent(None) == "-"


def test_counts_have_separators_ids_never() -> None:
    assert count(28045) == "28,045"
    assert count(28045.0) == "28,045"
    assert count(None) == "–" and count(pd.NA) == "–"
    assert ident(1595) == "1595" and ident(1234567) == "1234567"
    assert decimal(109.6) == "109.6" and decimal(1234.56) == "1,234.6"


def test_moments_read_one_way_to_the_second_in_utc() -> None:
    """Issue 37 item 9: one format everywhere, no microseconds."""
    plus_two = timezone(timedelta(hours=2))
    assert stamp(datetime(2026, 11, 19, 17, 40, 59, tzinfo=plus_two)) == "2026-11-19 15:40:59 UTC"
    assert stamp("2026-10-23T14:48:40+00:00") == "2026-10-23 14:48:40 UTC"  # ISO with offset
    assert stamp("2026-10-23T14:48:40.123456") == "2026-10-23 14:48:40 UTC"  # naive: UTC
    assert stamp(datetime(2026, 1, 2, 3, 4, 5, 999_999, tzinfo=UTC)) == "2026-01-02 03:04:05 UTC"
    assert stamp(None) == "–" and stamp(pd.NaT) == "–"
    assert stamp(None, missing="never") == "never"
    assert stamp("not a date") == "not a date"
    assert ago(pd.NaT) == "never"  # a thread never compressed, as pandas hands it over


def test_plain_never_shows_a_python_repr() -> None:
    assert plain({"active": 141, "tentative": 52}) == "active 141, tentative 52"
    assert plain(["Organization"]) == "Organization"
    assert plain(109.6) == "109.6"
    assert plain(True) == "yes" and plain(None) == "–"
    rendered = render_table(
        [[{"active": 141}, ["Organization", "Person"], 109.6, None, "1595"]],
        ["A", "B", "C", "D", "ID"],
    )
    for repr_text in ("{", "}", "[", "]", "'", "109.6000", "None"):
        assert repr_text not in rendered
    assert "1595" in rendered.splitlines()[2] and "1,595" not in rendered


@pytest.mark.parametrize(
    ("code", "words"),
    [
        ("FALLTHROUGH", "no target or rule matched: the flag's default"),
        ("TARGET_MATCH", "the user is targeted individually"),
        ("RULE_MATCH (rule 0)", "targeting rule 1 matched"),
        ("OFF", "the flag is switched off"),
        ("PREREQUISITE_FAILED (beta-access)", "prerequisite flag beta-access is not met"),
        ("ERROR (FLAG_NOT_FOUND)", "LaunchDarkly could not evaluate the flag: no such flag"),
        ("not configured", "LaunchDarkly is not configured"),
        (None, "LaunchDarkly gave no reason"),
    ],
)
def test_launchdarkly_reasons_read_as_words(code: str | None, words: str) -> None:
    text = reason_text(code)
    assert text == words
    for raw in ("FALLTHROUGH", "TARGET_MATCH", "RULE_MATCH", "PREREQUISITE_FAILED", "ERROR"):
        assert raw not in text


def test_markdown_values_never_read_none() -> None:
    assert md("{} · {}", "Person", None) == "Person · –"
    assert md("{}", pd.NaT) == "–"
    assert md("a{}", "") == "a"  # an empty optional part stays empty


def _threads(offset: int = 0, status: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(offset=offset, status=status)


def test_threads_says_how_many_of_how_many() -> None:
    assert _threads_shown(50, 195, _threads()).startswith("50 of 195 threads")
    assert "--offset 50 for more" in _threads_shown(50, 195, _threads())
    assert _threads_shown(45, 195, _threads(150)).startswith("151–195 of 195 threads")
    assert "for more" not in _threads_shown(45, 195, _threads(150))
    assert "--status deleted" in _threads_shown(50, 195, _threads())
    assert "--status deleted" not in _threads_shown(5, 5, _threads(status="deleted"))
    assert _threads_shown(0, 195, _threads(500)).startswith("none at offset 500: 195 threads")


def test_pages_of_a_text_start_at_the_beginning_of_a_line() -> None:
    size = 100
    text = "".join(f"line {n:04d} " + "x" * (n % 37) + "\n" for n in range(200))
    total = len(text)
    starts = []
    for page in range(1, page_count(total, size) + 1):
        start, end = page_bounds(text, 0, total, page, size)
        if start >= total:
            break
        assert start == 0 or text[start - 1] == "\n"  # never mid-line
        assert end > start and (end == total or text[end - 1] == "\n")
        starts.append((start, end))
    assert [s for s, _ in starts[1:]] == [e for _, e in starts[:-1]]  # nothing lost or repeated
    assert starts[-1][1] == total
    # a window read from the file (a page past what was loaded) places the page the same way
    page = 7
    offset, limit = page_window(page, size)
    window = text[offset : offset + limit]
    assert page_bounds(window, offset, total, page, size) == page_bounds(text, 0, total, page, size)


def test_a_line_longer_than_half_a_page_is_cut_and_no_page_is_empty() -> None:
    size = 100
    text = "short\n" + "y" * 1000 + "\nend\n"
    total = len(text)
    pages = [page_bounds(text, 0, total, p, size) for p in range(1, page_count(total, size) + 1)]
    assert all(end > start for start, end in pages)
    assert "".join(text[s:e] for s, e in pages) == text


def test_detail_text_is_one_readable_line() -> None:
    from yuxi_dash.wording import detail_text

    assert detail_text({}) == "–"
    assert detail_text(None) == "–"
    text = detail_text({"code": "thread_busy", "n": 1595, "ok": True, "ids": ["a", "b"]})
    assert text == "code: thread_busy · n: 1595 · ok: yes · ids: a, b"
    assert detail_text({"filters": {"since": None}}) == "filters.since: –"
    assert detail_text({"x": "y" * 500}).endswith("y" * 500)  # never cut short
    # issue 37 item 10: numbers as recorded, never rounded; a moment in one format
    assert detail_text({"pressure": 0.7823, "fire_at": 0.85, "clear_at": 0.80}) == (
        "pressure: 0.7823 · fire_at: 0.85 · clear_at: 0.8"
    )
    assert detail_text({"ratios": [0.7823, 1.0], "n": 28045}) == "ratios: 0.7823, 1.0 · n: 28045"
    assert detail_text({"since": "2026-12-06T14:03:07.5+00:00"}) == (
        "since: 2026-12-06 14:03:07 UTC"
    )
    assert detail_text({"ticket": "2026-12 rollout"}) == "ticket: 2026-12 rollout"
