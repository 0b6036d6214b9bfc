"""Moments and the correction time line (no graph): parsing, and a fact's state then."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from yuxi_dash.errors import InvalidInput
from yuxi_dash.memory.history.timeline import (
    Correction,
    Timeline,
    fact_state,
    moment_text,
    parse_moment,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_moments() -> None:
    assert parse_moment("2026-01-05", now=NOW) == datetime(2026, 1, 5, tzinfo=UTC)
    assert parse_moment("2026-01-05T09:30", now=NOW) == datetime(2026, 1, 5, 9, 30, tzinfo=UTC)
    assert parse_moment("2026-01-05T10:30+01:00", now=NOW) == datetime(
        2026, 1, 5, 9, 30, tzinfo=UTC
    )
    assert parse_moment("2026-01-05T09:30:00Z", now=NOW).tzinfo == UTC
    assert moment_text(datetime(2026, 1, 5, 9, 30, tzinfo=UTC)) == "2026-01-05T09:30:00+00:00"
    for bad in ("", "Tuesday", "2026-13-01", "2026-03-02", 5, None, "9" * 80):
        with pytest.raises(InvalidInput):
            parse_moment(bad, now=NOW)


def _snap(expired: str | None, status: str) -> dict:
    return {
        "uuid": "f1",
        "source_node_uuid": "n1",
        "target_node_uuid": "n2",
        "name": "LIVES_IN",
        "fact": "A lives in Berlin",
        "created_at": "2026-01-01T00:00:00+00:00",
        "valid_at": "2026-01-01T00:00:00+00:00",
        "invalid_at": expired,
        "expired_at": expired,
        "episodes": ["ep1"],
        "attributes": {"status": status},
    }


def _correction(n: int, at: datetime, before: dict | None, after: dict | None) -> Correction:
    return Correction(
        id=f"c{n}",
        audit_id=n,
        at=at,
        actor="ops",
        action="retract" if after and after["expired_at"] else "restore",
        reason="",
        ticket=None,
        fact_uuid="f1",
        before={"f1": before},
        after={"f1": after},
    )


def test_a_fact_retracted_then_restored_is_read_from_the_rows() -> None:
    t1, t2 = datetime(2026, 2, 1, tzinfo=UTC), datetime(2026, 2, 10, tzinfo=UTC)
    live, retracted = _snap(None, "active"), _snap(t1.isoformat(), "retracted")
    restored = _snap(None, "active")
    timeline = Timeline(
        (_correction(1, t1, live, retracted), _correction(2, t2, retracted, restored))
    )
    now_row = {**{k: v for k, v in restored.items() if k != "attributes"}, "status": "active"}

    def held_at(moment: datetime) -> bool:
        state = fact_state(now_row, moment, timeline.overrides(moment), timeline, "f1")
        return state is not None and state.held

    assert held_at(t1 - timedelta(days=1))
    assert not held_at(t1 + timedelta(days=1))  # between the retract and the restore
    assert held_at(t2 + timedelta(days=1))
    assert timeline.sources() == {"f1": "n1"}
    state = fact_state(
        now_row, t1 - timedelta(days=1), timeline.overrides(t1 - timedelta(days=1)), timeline, "f1"
    )
    assert state is not None and [c["audit_id"] for c in state.later] == [1, 2]


def test_the_store_gives_the_corrections_after_the_moment_oldest_first(memory_settings) -> None:
    from tests.memory.support_graphs import add_correction
    from yuxi_dash.memory.history.timeline import load_timeline

    ids = [add_correction(memory_settings, "tl_user", f"fact-{n}") for n in range(3)]
    whole = load_timeline(memory_settings, "tl_user")
    assert [c.id for c in whole.corrections] == ids and whole.complete
    assert whole.corrections[0].before == {"fact-0": {"uuid": "fact-0", "status": "active"}}
    exact = load_timeline(memory_settings, "tl_user", limit=3)  # exactly the limit: whole
    assert len(exact.corrections) == 3 and exact.complete
    cut = load_timeline(memory_settings, "tl_user", limit=2)  # the oldest kept: they decide
    assert [c.id for c in cut.corrections] == ids[:2] and not cut.complete
    first = whole.corrections[0].at
    later = load_timeline(memory_settings, "tl_user", since=first)
    assert [c.id for c in later.corrections] == ids[1:] and later.earlier == 1
    assert later.made_by(first) == 1 and later.made_by(whole.corrections[-1].at) == 3
    assert load_timeline(memory_settings, "someone_else").corrections == ()
