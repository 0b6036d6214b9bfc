"""A stratified sample of an agent's threads and the fleet figures it estimates, with spread.

Strata: the pressure band at the last model call (under 50%, 50-85%, 85-100%, 100% and
over) by the thread's length in recorded model calls (under 20, 20-59, 60-199, 200 and
over). `draw` allocates the sample to the strata in proportion to their size (at least
two per stratum that has two, so each has a spread), then draws each at random with a
given seed; `interleave` orders the draw a stratum at a time, so a run stopped early
has touched every stratum it could. `estimate` is the stratified estimator of a fleet
total, ``sum(N_h * mean_h)``, with an approximate 95% interval ``t * sqrt(sum(N_h^2
(1 - n_h/N_h) s_h^2 / n_h))``: ``t`` is Student's quantile at the Satterthwaite degrees
of freedom (two threads a stratum make a wide interval, not a falsely narrow one); a
stratum sampled once borrows the pooled variance of the others. A stratum with threads
but no value sampled makes the estimate partial: it names the missing strata, and its
value covers the others only. Pure.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

PRESSURE_EDGES = (0.5, 0.85, 1.0)  # pressure bands: [0, .5), [.5, .85), [.85, 1), [1, ...)
LENGTH_EDGES = (20, 60, 200)  # model calls: [0, 20), [20, 60), [60, 200), [200, ...)
CONFIDENCE = 0.95
# Student's t, two-sided 95%, for 1..30 degrees of freedom; above 30 the expansion below
T_95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
        2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
        2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)  # fmt: skip
Z_95 = 1.959964  # the normal quantile of a two-sided 95% interval

Stratum = tuple[int, int]
Row = TypeVar("Row")


def band(value: float, edges: Sequence[float]) -> int:
    """The index of the band ``value`` falls in (0 below the first edge)."""
    return sum(value >= edge for edge in edges)


def stratum(pressure_ratio: float, model_calls: int) -> Stratum:
    return band(pressure_ratio, PRESSURE_EDGES), band(model_calls, LENGTH_EDGES)


def stratify(rows: Sequence[Row], key: Mapping[int, Stratum]) -> dict[Stratum, list[Row]]:
    """``rows`` grouped by stratum (``key``: the stratum of each row's position)."""
    groups: dict[Stratum, list[Row]] = defaultdict(list)
    for position, row in enumerate(rows):
        groups[key[position]].append(row)
    return dict(groups)


def allocate(sizes: Mapping[Stratum, int], total: int) -> dict[Stratum, int]:
    """How many to draw from each stratum: proportional, at least min(2, N_h), at most N_h."""
    population = sum(sizes.values())
    if total >= population:
        return dict(sizes)
    shares = {h: max(min(2, n), round(total * n / population)) for h, n in sizes.items()}
    return {h: min(sizes[h], share) for h, share in shares.items()}


def draw(
    groups: Mapping[Stratum, Sequence[Row]], total: int, seed: int
) -> dict[Stratum, list[Row]]:
    """A stratified random sample of about ``total`` rows (every row when total is larger)."""
    rng = random.Random(seed)
    counts = allocate({h: len(rows) for h, rows in groups.items()}, total)
    return {h: rng.sample(list(groups[h]), counts[h]) for h in sorted(groups) if counts[h]}


def interleave(drawn: Mapping[Stratum, Sequence[Row]]) -> list[Row]:
    """The drawn rows a stratum at a time (round robin), so a stop leaves no stratum empty
    that an even share of the run would have reached."""
    queues = [list(rows) for _h, rows in sorted(drawn.items())]
    order: list[Row] = []
    for position in range(max((len(rows) for rows in queues), default=0)):
        order.extend(rows[position] for rows in queues if position < len(rows))
    return order


def t_quantile(freedom: float) -> float:
    """Student's two-sided 95% quantile at ``freedom`` degrees of freedom (at least 1)."""
    nu = max(1.0, freedom)
    if nu <= len(T_95):
        return T_95[math.ceil(nu) - 1]  # rounding the freedom down: the wider interval
    z = Z_95
    return (
        z
        + (z**3 + z) / (4 * nu)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * nu**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * nu**3)
    )


@dataclass(frozen=True)
class Estimate:
    """A fleet total estimated from a stratified sample, and its 95% interval (half width)."""

    value: float
    plus_minus: float
    confidence: float = CONFIDENCE
    missing: tuple[Stratum, ...] = ()  # strata with threads but no value: a partial estimate

    @property
    def partial(self) -> bool:
        return bool(self.missing)

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": round(self.value, 2),
            "plus_minus": round(self.plus_minus, 2),
            "confidence": self.confidence,
            "approximate": True,
            "partial": self.partial,
            "missing_strata": [list(h) for h in self.missing],
        }

    def holds(self, actual: float) -> bool:
        """Whether ``actual`` lies within the interval."""
        return abs(actual - self.value) <= self.plus_minus


def _variance(values: Sequence[float]) -> float | None:
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values) / (len(values) - 1)


def estimate(sizes: Mapping[Stratum, int], sampled: Mapping[Stratum, Sequence[float]]) -> Estimate:
    """The stratified estimate of the fleet total of a per-thread figure."""
    variances = {h: _variance(values) for h, values in sampled.items() if values}
    known = [v for v in variances.values() if v is not None]
    pooled = sum(known) / len(known) if known else 0.0
    value = 0.0
    terms: list[tuple[float, int]] = []  # each stratum's variance term and its freedom
    for h, values in sampled.items():
        if not values:
            continue
        n, big_n = len(values), sizes[h]
        value += big_n * sum(values) / n
        variance = variances[h]
        s2 = pooled if variance is None else variance
        terms.append((big_n**2 * (1 - n / big_n) * s2 / n, max(1, n - 1)))
    spread = sum(term for term, _df in terms)
    denominator = sum(term**2 / df for term, df in terms)
    freedom = spread**2 / denominator if denominator else math.inf
    quantile = Z_95 if math.isinf(freedom) else t_quantile(freedom)
    missing = tuple(sorted(h for h, size in sizes.items() if size and not sampled.get(h)))
    return Estimate(value=value, plus_minus=quantile * math.sqrt(spread), missing=missing)
