"""Private estimates of a column's schema, charged to the ledger before the data is read.

A drafted schema reads bounds and categories off the data, which is not private (seed 000:
"M = max|x_i| is not allowed!!!"). :func:`estimate_column` replaces one column's values by a DP
estimate from :mod:`dpsynth.discovery`:

- numeric: bounds from two private quantiles (exponential mechanism), ε-DP, given a generous
  *public* outer range (e.g. age in [0, 150]);
- categorical: the categories whose noisy count clears a threshold, (ε, δ)-DP (δ > 0 needed).

The spend is recorded in the ledger first (one durable transaction that also enforces the
dataset's total budget), then the estimate is drawn. The result is marked
``provenance="private"``; it is public from then on (post-processing).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dpsynth import noise
from dpsynth.accounting import Ledger, PrivacyBudget
from dpsynth.discovery import private_bounds, private_categories
from dpsynth.errors import InputError
from dpsynth.mechanisms import check_delta, check_epsilon
from dpsynth.neighbours import Neighbours
from dpsynth.schema import CategoricalColumn, Column, NumericColumn


def estimate_column(
    df: pd.DataFrame, column: Column, *, epsilon: float, ledger: Ledger, dataset_id: str, budget: PrivacyBudget,
    delta: float = 0.0, outer: tuple[float, float] | None = None, neighbours: Neighbours | str = Neighbours.ADD_REMOVE,
    dataset_label: str = "", rng: np.random.Generator | None = None,
) -> Column:
    """A copy of ``column`` with bounds (numeric) or categories (categorical) estimated privately.

    Guarantee: ε-DP (numeric, private quantiles; Smith 2011) or (ε, δ)-DP (categorical,
    thresholded noisy counts; Korolova et al. 2009), charged to ``ledger`` under ``dataset_id``
    before any noise is drawn. ``rng`` defaults to the secure generator.
    """
    eps, dlt = check_epsilon(epsilon), check_delta(delta)
    name = column.name
    if name not in df.columns:
        raise InputError(f"The data has no column {name!r}.")
    if isinstance(column, NumericColumn):
        if outer is None:
            raise InputError(f"Column {name!r}: give a public outer range that surely holds every value.")
        lo, hi = float(outer[0]), float(outer[1])
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise InputError(f"Column {name!r}: the outer range must have lower < upper, got [{lo:g}, {hi:g}].")
        amount, mech = PrivacyBudget(eps, 0.0), "private bounds: exponential-mechanism quantiles (1%, 99%)"
    else:
        if dlt <= 0:
            raise InputError(f"Column {name!r}: finding categories privately needs δ > 0 (e.g. 1e-6).")
        amount, mech = PrivacyBudget(eps, dlt), "private categories: thresholded discrete Laplace counts"
    rng = rng if rng is not None else noise.secure_rng()

    ledger.register(dataset_id, budget, label=dataset_label)
    ledger.charge(dataset_id, amount, mechanism=mech, purpose=f"schema estimate for column {name!r}")

    if isinstance(column, NumericColumn):
        values = pd.to_numeric(df[name], errors="coerce").to_numpy(dtype=np.float64)
        lower, upper = private_bounds(values, lo, hi, eps, rng=rng, integer=column.integer)
        return _numeric(column, lower, upper)
    found = private_categories(df[name], eps, dlt, rng=rng, neighbours=neighbours)
    if not found.categories:
        raise InputError(
            f"Column {name!r}: no category was frequent enough to be released at this ε (threshold"
            f" {found.threshold}); the spend is recorded. Enter the categories by hand or use a larger ε."
        )
    # Values outside the released list go to the missing cell: rare categories stay hidden.
    return CategoricalColumn(name=name, categories=tuple(found.categories), missing=True, on_unknown="missing",
                             provenance="private")


def _numeric(column: NumericColumn, lower: float, upper: float) -> NumericColumn:
    """The column on new bounds (its whole-number or decimals grid kept), with as many of its bins as
    still hold a grid value each."""
    bins = column.bins
    d = column.grid_decimals
    if d is not None:
        scale = 10**d
        bins = max(1, min(bins, math.floor(upper * scale) - math.ceil(lower * scale) + 1))
    while True:
        try:
            return NumericColumn(name=column.name, lower=lower, upper=upper, bins=bins, integer=column.integer,
                                 decimals=column.decimals, missing=column.missing, provenance="private")
        except InputError:
            if bins == 1:
                raise
            bins -= 1  # equal widths can miss a grid value at the edge: one bin fewer
