"""DP helpers that estimate public-looking inputs privately, charged to the budget.

- :func:`private_quantile` / :func:`private_bounds`: bounds for a numeric column from a DP
  quantile (exponential mechanism over the gaps between sorted values, Smith 2011; the Algorithmic Foundations of DP slides'
  exponential mechanism). Needs only a generous public outer range (e.g. age in [0, 150]).
- :func:`private_categories`: which categories occur, from noisy counts of the observed values
  kept only above a threshold (stability-based histogram; Korolova et al. 2009, Wilson et al.
  2020). The threshold makes it (ε, δ)-DP: a category held by one person appears with
  probability at most δ.

Floating-point caveat: the quantile's selection probabilities and the uniform draw inside the
chosen gap are computed in floating point; they are stated as such on the release card.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pandas as pd

from dpsynth import noise
from dpsynth.errors import InputError
from dpsynth.io import BLANKS
from dpsynth.mechanisms import check_delta, check_epsilon, exponential_mechanism, laplace_scale
from dpsynth.neighbours import Neighbours, count_query_sensitivity, histogram_l1_sensitivity, rank_sensitivity


def private_quantile(
    values: np.ndarray, q: float, lower: float, upper: float, epsilon: float, *, rng: np.random.Generator,
    neighbours: Neighbours | str = "add-remove", max_contributions: int = 1,
) -> float:
    """ε-DP estimate of the q-quantile of values clamped to the public range [lower, upper].

    Utility of a point in gap i (between the i-th and (i+1)-th sorted value) is −|i − qn|, which
    changes by at most k between neighbours differing in one person with at most k rows
    (:func:`dpsynth.neighbours.rank_sensitivity`; the rows must already be bounded to k per
    person); the gap is chosen with probability ∝ length · exp(ε·u/(2k)), then a point uniformly
    inside it (Smith 2011).
    """
    eps = check_epsilon(epsilon)
    if not 0 <= q <= 1:
        raise InputError(f"The quantile must be between 0 and 1, got {q!r}.")
    if not lower < upper:
        raise InputError(f"The outer range must have lower < upper, got [{lower}, {upper}].")
    x = np.asarray(values, dtype=np.float64)
    x = np.sort(np.clip(x[~np.isnan(x)], lower, upper))
    pts = np.concatenate([[lower], x, [upper]])
    gaps = np.diff(pts)
    n = len(x)
    utility = -np.abs(np.arange(n + 1) - q * n)
    with np.errstate(divide="ignore"):
        log_len = np.log(gaps)
    sens = rank_sensitivity(neighbours, max_contributions)
    i = exponential_mechanism(utility, float(sens), eps, rng=rng, log_base_measure=log_len)
    return float(pts[i] + rng.random() * gaps[i])


def private_bounds(
    values: np.ndarray, lower: float, upper: float, epsilon: float, *, rng: np.random.Generator,
    quantiles: tuple[float, float] = (0.01, 0.99), integer: bool = False,
    neighbours: Neighbours | str = "add-remove", max_contributions: int = 1,
) -> tuple[float, float]:
    """ε-DP (lower, upper) bounds: two private quantiles, each with ε/2 (sequential composition)."""
    eps = check_epsilon(epsilon)
    kw = {"neighbours": neighbours, "max_contributions": max_contributions}
    lo = private_quantile(values, quantiles[0], lower, upper, eps / 2, rng=rng, **kw)
    hi = private_quantile(values, quantiles[1], lower, upper, eps / 2, rng=rng, **kw)
    lo, hi = min(lo, hi), max(lo, hi)
    if integer:
        lo, hi = math.floor(lo), math.ceil(hi)
    if hi <= lo:
        hi = lo + (1 if integer else max(1e-9, (upper - lower) * 1e-6))
    return lo, hi


@dataclass(frozen=True)
class DiscoveredCategories:
    """Categories released by :func:`private_categories`, with their noisy counts and the threshold."""

    categories: list[str]
    noisy_counts: list[int]
    threshold: int
    epsilon: float
    delta: float


def category_threshold(epsilon: float, delta: float, neighbours: Neighbours | str = "add-remove",
                       max_contributions: int = 1) -> tuple[Fraction, int]:
    """Noise scale and the smallest threshold τ such that a count of k (one person's rows) is
    released with probability ≤ δ/k per category: P(k + Z ≥ τ) = p^(τ−k)/(1+p) with p = e^(−1/scale)."""
    eps, dlt = check_epsilon(epsilon), check_delta(delta)
    if dlt <= 0:
        raise InputError("Category discovery needs δ > 0 (a category held by one person must rarely appear).")
    k = max_contributions
    scale = laplace_scale(histogram_l1_sensitivity(neighbours, k), eps)
    p = math.exp(-1.0 / float(scale))
    per_cat = dlt / k
    t = math.ceil(math.log(per_cat * (1 + p)) / math.log(p)) if per_cat * (1 + p) < 1 else 1
    return scale, k + max(1, t)


def private_categories(
    values: pd.Series, epsilon: float, delta: float, *, rng: np.random.Generator,
    neighbours: Neighbours | str = "add-remove", max_contributions: int = 1, max_categories: int = 1000,
) -> DiscoveredCategories:
    """(ε, δ)-DP list of categories: discrete Laplace noise on each observed value's count, kept if ≥ τ.

    Unobserved values are never output, which is why δ > 0 is needed (bounded by the threshold).
    """
    scale, tau = category_threshold(epsilon, delta, neighbours, max_contributions)
    text = values.astype("string")
    text = text[text.notna() & (text.str.strip(BLANKS) != "")]
    counts = text.value_counts(sort=False)
    noisy = counts.to_numpy(dtype=np.int64) + noise.discrete_laplace(scale, len(counts), rng=rng)
    keep = noisy >= tau
    cats = counts.index[keep].astype(str).tolist()
    kept = noisy[keep]
    order = np.argsort(-kept, kind="stable")[:max_categories]
    return DiscoveredCategories([cats[i] for i in order], [int(kept[i]) for i in order], tau, float(epsilon), float(delta))


@dataclass(frozen=True)
class NoisyCount:
    """A count released with discrete Laplace noise, and the margin noise alone exceeds with probability ≤ 5%."""

    value: int
    scale: float
    margin: int

    @property
    def clearly_positive(self) -> bool:
        """Whether the noisy count is above what noise alone gives 95% of the time (judged from the output only)."""
        return self.value > self.margin


def noisy_count(true_count: int, epsilon: float, *, rng: np.random.Generator,
                neighbours: Neighbours | str = "add-remove", max_contributions: int = 1) -> NoisyCount:
    """ε-DP count of rows meeting a condition: discrete Laplace with sensitivity k
    (:func:`dpsynth.neighbours.count_query_sensitivity`; Ghosh, Roughgarden & Sundararajan 2009).

    ``margin`` is the smallest m with P(Z > m) ≤ 5% for the noise Z: P(Z ≥ m) = p^m/(1+p), p = e^(−1/scale).
    """
    eps = check_epsilon(epsilon)
    scale = laplace_scale(count_query_sensitivity(neighbours, max_contributions), eps)
    z = int(np.asarray(noise.discrete_laplace(scale, 1, rng=rng)).ravel()[0])
    p = math.exp(-1.0 / float(scale))
    margin = max(0, math.ceil(math.log(0.05 * (1 + p)) / math.log(p)) - 1)
    return NoisyCount(int(true_count) + z, float(scale), margin)
