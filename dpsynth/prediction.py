"""Expected utility of a release before it runs, from public inputs only (no data is read).

:func:`predict_utility` gives the expected one-column and two-column total-variation distance
(TVD) between the real table and the synthetic rows of the method that will run (the method is
chosen by :func:`dpsynth.release.choose_method`), from the schema, ε, δ, the neighbouring
relation, the rows per person k and a public size hint n (a round figure, never the exact count).

**Histogram.** Every cell of the full histogram (N cells) gets noise of standard deviation σ
(:meth:`dpsynth.mechanisms.DiscreteLaplace.noise_std` or the Gaussian's). A one-column marginal
with s cells sums N/s noisy cells, so each of its counts has noise variance σ²·N/s; sampling
n rows adds the multinomial variance, at most n/s per count. With v the sum, the expected L1
error of the s counts is s·√(2v/π) (the normal approximation) and the TVD is half of it over n.
Noisy counts clamped at zero add spurious mass ≈ N₀·E[max(Z, 0)] spread over the domain (N₀ the
empty cells, guessed as N·e^(−n/N)); it moves about half its share of the mass away from the
real marginal. Two columns: the same with s = s_a·s_b.

**Marginals.** Noise per measurement comes from the method's budget plan
(:mod:`dpsynth.marginals`: ``ONE_WAY_SHARE`` of the budget, ``ONE_WAY_SHARE_PURE`` under pure DP, over the
d one-way tables, plus the
capacity plan's second installment, ``SELECT_SHARE`` for the selections, the rest over the
plan's rounds of two-way tables).
A column's counts are estimated from its one-way table (variance v₁ per count) and from the
two-way tables holding it (each ≈ 2R/d of them, summing s_other noisy cells: variance
s_other·v_r per count); inverse-variance weighting gives v = 1/(1/v₁ + c/(s_other·v_r)). The
one-column noise error t is then as for the histogram, read through ``K·(t/K)^NOISE_POWER``
(clamping and the model fit remove proportionally more of a larger noise; sub-linear, never
capped). The model's sampler rounds its counts under control (systematic draws per clique, see
:meth:`dpsynth.marginals.MarginalModel.sample`), so a column's synthetic shares carry no sampling
error of their own. A two-column marginal carries the errors of both columns
(``PAIR_NOISE_FACTOR``·(t_a + t_b), read the same way) and, because the model keeps only some of
the pairs, a model-structure error that no ε removes (``STRUCTURE_FLOOR``); they add in
quadrature with the part of the multinomial floor ½√(2·SKEW·s_a·s_b/(π·n)) that the controlled
rounding leaves on pairs outside a clique (``PAIR_SAMPLING``).

The constants (power, knees, pair factor, structure floor) are fitted on the bundled Adult sample (48,842 rows, 15 columns; releases at
ε from 0.1 to 10 with δ = 0 and δ = 10⁻⁶, ``benchmarks/bench_prediction.py`` prints predicted
against measured): within a factor 1.45 there on the mean of two seeds. ``STRUCTURE_FLOOR`` is a property of how strongly
a table's columns depend on each other, which no public input reveals; on tables with stronger
dependence the two-column prediction at large ε is optimistic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np

from dpsynth import zcdp
from dpsynth.neighbours import Neighbours, histogram_l1_sensitivity, histogram_l2_sensitivity_squared
from dpsynth.schema import Schema

#: The size assumed when the curator gives no public size hint (as :func:`dpsynth.release.choose_method`).
DEFAULT_ROWS = 10_000
#: Multinomial sampling error of skewed marginals is below the uniform bound n/s per count.
SKEW = 0.5
#: Fitted on Adult (see the module docstring).
MARGINALS_NOISE_FACTOR = 1.0
PAIR_NOISE_FACTOR = 1.5
STRUCTURE_FLOOR = 0.007
#: Share of the multinomial sampling error left on a pair by the model's controlled rounding.
PAIR_SAMPLING = 0.5
#: Clamping at zero and fitting the model remove part of the noise, more of it the larger it is: a
#: noise error t is read as K·(t/K)^NOISE_POWER (K the knee below, fitted); it never caps, so a very
#: noisy release is still predicted very poor (22 columns, 1,000 rows, ε = 0.1: about 0.4).
NOISE_POWER = 0.8
SATURATION_ONE_WAY = 0.01
SATURATION_TWO_WAY = 0.05
#: Above this predicted mean one-column TVD a release is poor (a synthetic column far off its real shares).
POOR_ONE_WAY_TVD = 0.1
#: Above this predicted mean two-column TVD the relations between columns are mostly lost.
POOR_TWO_WAY_TVD = 0.25
#: Pairs evaluated at most (in a fixed order) for the two-column average of a wide schema.
MAX_PAIRS = 400


@dataclass(frozen=True)
class Prediction:
    """Expected error of a release, computed before it runs from public inputs only."""

    method: str
    why: str
    one_way_tvd: float
    two_way_tvd: float
    per_column: dict[str, float]
    rows: int
    rows_assumed: bool
    noise: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> str:
        """One plain sentence: the method and the expected errors as percentages of the rows."""
        rows = f"about {self.rows:,} rows" + (" (assumed: no size was given)" if self.rows_assumed else "")
        return (f"With the {self.method} method and {rows}, each synthetic column's shares are expected to be off by"
                f" about {self.one_way_tvd:.1%} of the rows, and each pair of columns by about {self.two_way_tvd:.1%}.")


def predict_utility(
    schema: Schema, epsilon: float, delta: float = 0.0, neighbours: Neighbours | str = Neighbours.ADD_REMOVE, *,
    max_contributions: int = 1, mechanism: str = "auto", method: str = "auto", expected_rows: int | None = None,
    rows: int | None = None, threshold: int = 1,
) -> Prediction:
    """Expected mean one- and two-column TVD of the release that would run (see the module docstring);
    ``rows`` and ``threshold`` as the release's (a histogram buys its own row count when no ``rows`` is given,
    and its cells then get that share less of ε)."""
    from dpsynth.plan import check_release_budget, choose_method, histogram_budget, split_budget  # the release's plan

    epsilon, delta = check_release_budget(epsilon, delta, max_contributions)
    rel = Neighbours.parse(neighbours)
    split = split_budget(epsilon, delta, schema, None, mechanism)  # the main method's share (the rest: numeric values)
    mech = split.main_mechanism(delta, rel, max_contributions, mechanism)
    chosen, why = choose_method(schema, mech, method, expected_rows)
    if chosen == "marginals":  # as the plan does: the marginals method's own split (a smaller value share when wide)
        split = split_budget(epsilon, delta, schema, None, mechanism, adaptive=True)
    else:
        split, mech, _ = histogram_budget(schema, epsilon, delta, rel, max_contributions, mechanism,
                                          threshold=threshold, rows_given=rows is not None)
    epsilon = split.epsilon_main
    n = int(expected_rows) if expected_rows else DEFAULT_ROWS
    sizes = list(schema.sizes)
    if chosen == "histogram":
        one, pair, noise = _histogram(sizes, mech.noise_std(), n)
    else:
        one, pair, noise = _marginals(sizes, epsilon, delta, rel, max_contributions, n)
    per_col = {name: float(one(j)) for j, name in enumerate(schema.names)}
    pairs = list(combinations(range(len(sizes)), 2))[:MAX_PAIRS]
    two = sum(pair(a, b) for a, b in pairs) / len(pairs) if pairs else float("nan")
    return Prediction(chosen, why, sum(per_col.values()) / len(per_col), float(two), per_col, n,
                      expected_rows is None or expected_rows == 0, noise)


def _tvd(cells: float, variance_per_cell: float, n: int) -> float:
    """½·E‖error‖₁/n for ``cells`` counts each off by a normal error of the given variance."""
    return min(1.0, 0.5 * cells * math.sqrt(2.0 * variance_per_cell / math.pi) / n)


def _saturate(t: float, knee: float) -> float:
    return knee * (t / knee) ** NOISE_POWER if t > 0 else 0.0


def _sampling_variance(cells: float, n: int) -> float:
    return SKEW * n / cells


def _histogram(sizes: list[int], std: float, n: int) -> tuple[Any, Any, dict[str, Any]]:
    total = math.prod(sizes)
    empty = total * math.exp(-n / total)
    spurious = empty * std / math.sqrt(2.0 * math.pi)  # E[max(Z, 0)] = σ/√(2π) for centred normal noise
    bias = 0.5 * spurious / (n + spurious)

    def tvd(cells: int) -> float:
        v = std * std * total / cells + _sampling_variance(cells, n)
        return min(1.0, _tvd(cells, v, n) + bias)

    return (lambda j: tvd(sizes[j])), (lambda a, b: tvd(sizes[a] * sizes[b])), {
        "cells": total, "noise_std_per_cell": std, "spurious_rows": spurious}


def _measurement_variance(pure: bool, budget: float, l1: int, l2sq: int) -> float:
    if pure:
        p = math.exp(-budget / l1)  # discrete Laplace of scale Δ₁/ε
        return 2.0 * p / (1.0 - p) ** 2
    return l2sq / (2.0 * budget)


def marginals_noise(sizes: list[int], epsilon: float, delta: float, neighbours: Neighbours | str,
                    max_contributions: int = 1, n: int = DEFAULT_ROWS) -> dict[str, Any]:
    """Noise variance per count of the marginals method's one-way tables and of each round's table,
    from its public budget plan (shares; rounds as the capacity plan sets them for ``n`` rows,
    :func:`dpsynth.marginals.budget.rounds_and_snr`; equal split over rounds)."""
    from dpsynth.marginals import budget as mb
    from dpsynth.marginals import fit as mf

    rel = Neighbours.parse(neighbours)
    d = len(sizes)
    pure = delta == 0.0
    total = epsilon if pure else zcdp.rho_from_epsilon(epsilon, delta)
    l1 = histogram_l1_sensitivity(rel, max_contributions)
    l2sq = histogram_l2_sensitivity_squared(rel, max_contributions)
    one_share = mb.first_one_way_share(pure, d)
    sel_share = mb.SELECT_SHARE if d > 1 else 0.0
    rounds = max(d - 1, round(mf.ROUNDS_PER_COLUMN * (d - 1))) if d > 2 else d - 1
    if d > 2:
        # The capacity plan as the fit makes it, with even one-ways (which only the wide path's one-way
        # fallback reads); the one-ways' installments counted as one measurement of their summed share.
        plan = mb.Plan(epsilon, delta, rel, max_contributions)
        cap = mb.capacity(plan, tuple(sizes), float(n), [np.full(s, 1.0 / s) for s in sizes],
                          mf.ROUNDS_PER_COLUMN, one_share)
        rounds, one_share, sel_share = cap.rounds + cap.inside_rounds, one_share + cap.one_way_extra, cap.select_share
    round_share = 1 - one_share - sel_share
    if d > 2 and cap.small_pairs:
        # With small pairs (below a pair signal-to-noise of 1) the rounds get cap.pairs_share; the rest of
        # the one-ways' reserve goes back to them after the rounds.
        round_share = cap.pairs_share
    v1 = _measurement_variance(pure, total * one_share / d, l1, l2sq)
    vr = _measurement_variance(pure, total * round_share / rounds, l1, l2sq) if rounds else math.inf
    return {"one_way_variance": v1, "round_variance": vr, "rounds": rounds,
            "one_way_std": math.sqrt(v1), "round_std": math.sqrt(vr) if rounds else math.inf}


def _marginals(sizes: list[int], epsilon: float, delta: float, rel: Neighbours, k: int,
               n: int) -> tuple[Any, Any, dict[str, Any]]:
    d = len(sizes)
    noise = marginals_noise(sizes, epsilon, delta, rel, k, n)
    v1, vr, rounds = noise["one_way_variance"], noise["round_variance"], noise["rounds"]
    per_col = 2.0 * rounds / d if d > 1 else 0.0

    def noise_tvd(j: int) -> float:
        others = [s for i, s in enumerate(sizes) if i != j]
        s_other = sum(others) / len(others) if others else 1.0
        precision = 1.0 / v1 + (per_col / (s_other * vr) if rounds else 0.0)
        return _saturate(MARGINALS_NOISE_FACTOR * _tvd(sizes[j], 1.0 / precision, n), SATURATION_ONE_WAY)

    def one(j: int) -> float:
        return min(1.0, noise_tvd(j))

    def pair(a: int, b: int) -> float:
        cells = sizes[a] * sizes[b]
        floor = math.hypot(STRUCTURE_FLOOR, PAIR_SAMPLING * _tvd(cells, _sampling_variance(cells, n), n))
        noisy = _saturate(PAIR_NOISE_FACTOR * (noise_tvd(a) + noise_tvd(b)), SATURATION_TWO_WAY)
        return min(1.0, math.hypot(noisy, floor))

    return one, pair, noise


def cell_count_words(n_cells: int) -> str:
    """The domain size for people: "1,200" or "about 10^17" for astronomically large ones."""
    return f"{n_cells:,}" if n_cells < 10**9 else f"about 10^{len(str(n_cells)) - 1}"


def noise_sentence(prediction: Prediction) -> str:
    """What noise the method adds, in one or two plain sentences (no formulas)."""
    p, z = prediction, prediction.noise
    if p.method == "histogram":
        return (f"Every one of the {cell_count_words(z['cells'])} cells of the full histogram gets its own random noise,"
                f" typically about ±{z['noise_std_per_cell']:,.1f} people; the synthetic rows are drawn from those"
                " noisy counts.")
    pairs = (f", and {z['rounds']} table{'s' if z['rounds'] != 1 else ''} of two columns, each count off by about"
             f" ±{z['round_std']:,.0f}"
             if z["rounds"] and math.isfinite(z["round_std"]) else
             "; the budget buys no table of two columns, so the columns come out independent")
    return (f"The marginals method releases small tables instead of the full histogram: one count table per column,"
            f" each count off by about ±{z['one_way_std']:,.0f} people{pairs}. The synthetic rows come from a model"
            " fitted to all of them, which evens out much of that noise.")


def prediction_curve(
    schema: Schema, epsilons: list[float], delta: float = 0.0, neighbours: Neighbours | str = Neighbours.ADD_REMOVE, *,
    max_contributions: int = 1, mechanism: str = "auto", method: str = "auto", expected_rows: int | None = None,
) -> list[dict[str, Any]]:
    """:func:`predict_utility` at each ε: rows of ε, method, expected one- and two-column TVD (public inputs only)."""
    out = []
    for eps in epsilons:
        p = predict_utility(schema, eps, delta, neighbours, max_contributions=max_contributions, mechanism=mechanism,
                            method=method, expected_rows=expected_rows)
        out.append({"epsilon": float(eps), "method": p.method, "one_way_tvd": p.one_way_tvd,
                    "two_way_tvd": p.two_way_tvd})
    return out
