"""Tests for yuxi_dash.sim.story: what a user says about themselves, and when."""

from __future__ import annotations

from yuxi_dash.sim.model import user_message
from yuxi_dash.sim.story import remark_for
from yuxi_dash.sim.topics import TOPICS, stable_rng


def test_a_remark_draws_nothing_from_the_generator() -> None:
    """Adding a statement to a user message leaves the rest of the thread unchanged."""
    for turn in range(6):
        plain, told = stable_rng("remark", turn), stable_rng("remark", turn)
        remark = remark_for("alice_chen", 0, turn) or "I prefer answers in German."
        without = user_message(plain, TOPICS[1], turn)
        with_remark = user_message(told, TOPICS[1], turn, remark)
        assert remark in with_remark and remark not in without
        assert with_remark.startswith(without.split("\n\n")[0])
        assert plain.random() == told.random()
    assert remark_for("alice_chen", 0, 1) is None
