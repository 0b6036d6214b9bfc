"""yuxi_dash.tuning.sample: stratified draws and the estimate of a fleet total with its spread."""

from __future__ import annotations

import random

from tests.service.builders import OPERATOR
from tests.tuning.fleet_builders import AGENT, simulated_fleet
from yuxi_dash.tuning.plan import run_tuning
from yuxi_dash.tuning.sample import (
    allocate,
    draw,
    estimate,
    interleave,
    stratify,
    stratum,
    t_quantile,
)


def test_allocation_is_proportional_with_two_from_every_stratum_that_has_two() -> None:
    sizes = {(0, 0): 900, (1, 0): 90, (3, 2): 10, (2, 1): 1}
    counts = allocate(sizes, 100)
    assert counts == {(0, 0): 90, (1, 0): 9, (3, 2): 2, (2, 1): 1}
    assert allocate(sizes, 5_000) == sizes  # a sample larger than the fleet is the fleet


def test_a_draw_depends_on_its_seed_only() -> None:
    groups = {(0, 0): list(range(50)), (1, 1): list(range(50, 60))}
    assert draw(groups, 12, seed=4) == draw(groups, 12, seed=4)
    assert draw(groups, 12, seed=4) != draw(groups, 12, seed=5)
    assert {h: len(rows) for h, rows in draw(groups, 12, seed=4).items()} == {(0, 0): 10, (1, 1): 2}


def test_a_census_estimates_the_total_exactly() -> None:
    sizes = {(0, 0): 3, (1, 2): 2}
    sampled = {(0, 0): [1.0, 4.0, 2.0], (1, 2): [10.0, 0.0]}
    result = estimate(sizes, sampled)
    assert result.value == 17.0 and result.plus_minus == 0.0
    half = estimate({(0, 0): 6, (1, 2): 2}, {(0, 0): [1.0, 4.0, 2.0], (1, 2): [10.0, 0.0]})
    assert half.value == 24.0 and half.plus_minus > 0


def test_strata_are_pressure_bands_by_length() -> None:
    assert stratum(0.2, 5) == (0, 0)
    assert stratum(0.85, 20) == (2, 1)
    assert stratum(1.3, 250) == (3, 3)


def test_the_samples_estimate_holds_the_full_replay_within_its_spread() -> None:
    simulated_fleet(threads=16, turns=6, seed=21)
    proposal = {"summary_threshold_k": 5, "keep_messages": 6}
    full = run_tuning(AGENT, actor=OPERATOR, **proposal)
    part = run_tuning(AGENT, actor=OPERATOR, sample=8, seed=3, **proposal)
    assert part.threads_planned < full.threads_planned == 16
    assert part.current.threads == part.threads_planned
    for side in ("current", "proposed"):
        whole, sampled = getattr(full, side), getattr(part, side)
        assert not whole.fleet_estimate  # a full replay estimates nothing
        for figure in ("compressions", "offload_only_passes", "input_tokens_total"):
            spread = sampled.fleet_estimate[figure]
            assert not spread.partial
            assert spread.holds(getattr(whole, figure)), (side, figure, spread, whole)


def test_a_plan_is_ordered_a_stratum_at_a_time() -> None:
    drawn = {(0, 0): ["a1", "a2", "a3"], (1, 0): ["b1"], (3, 3): ["c1", "c2"]}
    assert interleave(drawn) == ["a1", "b1", "c1", "a2", "c2", "a3"]


def test_a_stratum_with_threads_but_no_value_makes_the_estimate_partial() -> None:
    sizes = {(0, 0): 10, (1, 0): 5, (2, 2): 4}
    whole = estimate(sizes, {(0, 0): [1.0, 2.0], (1, 0): [3.0, 3.0], (2, 2): [7.0, 9.0]})
    assert not whole.partial and whole.to_dict()["missing_strata"] == []
    part = estimate(sizes, {(0, 0): [1.0, 2.0], (1, 0): [3.0, 3.0]})
    assert part.partial and part.missing == ((2, 2),)
    assert part.to_dict()["partial"] is True and part.to_dict()["missing_strata"] == [[2, 2]]


def test_t_quantiles_are_students() -> None:
    assert t_quantile(1) == 12.706 and t_quantile(0.3) == 12.706
    assert t_quantile(2.5) == 3.182  # the freedom rounded down: the wider interval
    assert abs(t_quantile(60) - 2.000) < 0.002 and abs(t_quantile(120) - 1.980) < 0.002
    assert t_quantile(1e9) > 1.959


def test_the_interval_covers_the_true_total_about_95_times_in_100() -> None:
    """A made-up skewed fleet (exponential values) of 600 threads in 5 strata of very different
    spreads, sampled 400 times with 2 to 14 a stratum: the approximate 95% interval must hold
    the true total in at least 90% of the draws (the normal 1.96 holds it in 88.5%)."""
    rng = random.Random(7)
    population = [(h, rng.expovariate(1 / (1 + 10 * h))) for h in range(5) for _ in range(120)]
    rows = [(index, h, value) for index, (h, value) in enumerate(population)]
    keys = {n: (h, 0) for n, (_index, h, _value) in enumerate(rows)}
    groups = stratify(rows, keys)
    truth = sum(value for _index, _h, value in rows)
    sizes = {h: len(members) for h, members in groups.items()}
    covered = 0
    for seed in range(400):
        drawn = draw(groups, 10 + seed % 60, seed)
        sampled = {h: [value for _i, _h, value in picked] for h, picked in drawn.items()}
        covered += estimate(sizes, sampled).holds(truth)
    assert covered / 400 >= 0.90, covered
