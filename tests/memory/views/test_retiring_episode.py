"""The one retiring-episode matcher: its rule at the edges of the window, and its windows.

The graph reads are exercised on a real FalkorDB graph by tests/memory/quality/
test_retirements.py; here the rule itself, on rows shaped as those reads return them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from yuxi_dash.memory.views import retiring_episode

T = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)


def episode(uuid: str, at: datetime) -> dict:
    return {"uuid": uuid, "name": f"episode {uuid}", "created_at": at.isoformat(), "_at": at}


def fact(uuid: str, created: datetime, valid: datetime) -> dict:
    return {"uuid": uuid, "_created_at": created, "_valid_at": valid}


def test_the_latest_episode_at_or_before_the_expiry_within_the_window() -> None:
    near = [
        episode("too_old", T - retiring_episode.WINDOW - timedelta(seconds=1)),
        episode("early", T - retiring_episode.WINDOW),
        episode("at", T),
        episode("after", T + timedelta(microseconds=1)),
    ]
    facts = {"at": [fact("f1", T, T)], "early": [fact("f0", T - retiring_episode.WINDOW, T)]}
    found = retiring_episode._pick(retiring_episode.Retired("r", T), near, facts)  # noqa: SLF001
    assert found is not None and found.uuid == "at" and found.basis == retiring_episode.LATEST_BASIS
    assert [f["uuid"] for f in found.facts] == ["f1"]
    # only the episode exactly WINDOW before: still a candidate
    assert retiring_episode._pick(retiring_episode.Retired("r", T), near[:2], facts).uuid == "early"  # noqa: SLF001
    # nothing written in the window: no match
    assert retiring_episode._pick(retiring_episode.Retired("r", T), near[:1], facts) is None  # noqa: SLF001


def test_the_mark_wins_over_the_latest_and_the_retired_fact_is_left_out() -> None:
    ended = T - timedelta(minutes=10)
    near = [
        episode("marked", T - timedelta(minutes=10)),
        episode("latest", T - timedelta(seconds=5)),
    ]
    facts = {
        "marked": [fact("r", T - timedelta(minutes=9), ended), fact("new", T, ended)],
        "latest": [fact("other", T, T)],
    }
    found = retiring_episode._pick(retiring_episode.Retired("r", T, invalid_at=ended), near, facts)  # noqa: SLF001
    assert (
        found is not None and found.uuid == "marked" and found.basis == retiring_episode.MARK_BASIS
    )
    assert [f["uuid"] for f in found.facts] == ["new"]
    # no mark anywhere: the latest, with all its facts
    found = retiring_episode._pick(
        retiring_episode.Retired("r", T, invalid_at=T - timedelta(days=1)), near, facts
    )  # noqa: SLF001
    assert (
        found is not None
        and found.uuid == "latest"
        and [f["uuid"] for f in found.facts] == ["other"]
    )


def test_windows_are_widened_by_the_slack_and_merged() -> None:
    later = T + retiring_episode.WINDOW  # its window starts a slack before T: overlaps T's, merged
    far = T + timedelta(hours=2)
    spans = retiring_episode.windows([far, T, later])
    assert spans == [
        [
            (T - retiring_episode.WINDOW - retiring_episode.SLACK).isoformat(),
            (later + retiring_episode.SLACK).isoformat(),
        ],
        [
            (far - retiring_episode.WINDOW - retiring_episode.SLACK).isoformat(),
            (far + retiring_episode.SLACK).isoformat(),
        ],
    ]


def test_times_are_read_as_utc() -> None:
    assert retiring_episode.time_of("2026-03-02T10:30:00+01:00") == T
    assert retiring_episode.time_of("2026-03-02T09:30:00Z") == T
    assert retiring_episode.time_of("2026-03-02T09:30:00") == T
    assert retiring_episode.time_of("") is None and retiring_episode.time_of("not a time") is None
