"""Private estimates of a column's schema, charged to the ledger before the data is read.

A drafted schema reads bounds and categories off the data, which is not private (lecture notes on DP, ch. 6:
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
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpsynth import noise
from dpsynth.accounting import Ledger, PrivacyBudget
from dpsynth.discovery import noisy_count, private_bounds, private_categories
from dpsynth.drafting import DEFAULT_BINS
from dpsynth.errors import InputError
from dpsynth.io import BLANKS
from dpsynth.mechanisms import check_delta, check_epsilon
from dpsynth.neighbours import Neighbours, bound_contributions
from dpsynth.schema import CategoricalColumn, Column, NumericColumn, Schema, field_sources

#: Share of a column's ε spent on the noisy check count (values at the outer range, or rows in
#: categories left out); the rest goes to the estimate itself.
CHECK_SHARE = 0.1
#: An estimated bound within this fraction (0.1%) of the outer range's width from its edge "touched" it.
EDGE_FRACTION = 0.001


@dataclass(frozen=True)
class Estimate:
    """A column with privately estimated values, and what its noisy outputs say about the estimate."""

    column: Column
    notes: tuple[str, ...]
    epsilon: float
    delta: float


@dataclass(frozen=True)
class BatchEstimate:
    """The schema after :func:`estimate_flagged`: each estimated column replaced, failures kept as they were."""

    schema: Schema
    estimates: dict[str, Estimate]
    failed: dict[str, str]


def estimate_column(
    df: pd.DataFrame, column: Column, *, epsilon: float, ledger: Ledger, dataset_id: str, budget: PrivacyBudget,
    delta: float = 0.0, outer: tuple[float, float] | None = None, neighbours: Neighbours | str = Neighbours.ADD_REMOVE,
    dataset_label: str = "", rng: np.random.Generator | None = None, id_column: str | None = None,
    max_contributions: int = 1,
) -> Column:
    """A copy of ``column`` with bounds (numeric) or categories (categorical) estimated privately
    (:func:`estimate`, whose notes this drops)."""
    return estimate(df, column, epsilon=epsilon, ledger=ledger, dataset_id=dataset_id, budget=budget, delta=delta,
                    outer=outer, neighbours=neighbours, dataset_label=dataset_label, rng=rng, id_column=id_column,
                    max_contributions=max_contributions).column


def estimate(
    df: pd.DataFrame, column: Column, *, epsilon: float, ledger: Ledger, dataset_id: str, budget: PrivacyBudget,
    delta: float = 0.0, outer: tuple[float, float] | None = None, neighbours: Neighbours | str = Neighbours.ADD_REMOVE,
    dataset_label: str = "", rng: np.random.Generator | None = None, id_column: str | None = None,
    max_contributions: int = 1,
) -> Estimate:
    """Estimate one column privately, at the release's unit of protection, and say how it went.

    Guarantee: (ε, δ)-DP with respect to ``neighbours`` and the unit of protection (a row, or a
    person with at most ``max_contributions`` rows sharing ``id_column``: the rows are bounded to
    k per person exactly as the release does, :func:`dpsynth.neighbours.bound_contributions`, and
    every sensitivity and threshold scales with k). Numeric: ε-DP bounds from two private
    quantiles (Smith 2011) with (1 − CHECK_SHARE)·ε, and a noisy count of values at or beyond the
    outer range with the rest. Categorical: (ε, δ)-DP thresholded noisy counts (Korolova et al.
    2009) with (1 − CHECK_SHARE)·ε, and a noisy count of rows whose category was left out with
    the rest. Composition is sequential; the whole is charged to ``ledger`` under ``dataset_id``
    before any noise is drawn. The notes are read from the noisy outputs only.
    """
    rng = rng if rng is not None else noise.secure_rng()
    amount, mech = _plan(df, column, epsilon, delta, outer, id_column)
    ledger.register(dataset_id, budget, label=dataset_label)
    ledger.charge(dataset_id, amount, mechanism=mech, purpose=f"schema estimate for column {column.name!r}")
    data, _ = bound_contributions(df[_needed(column, id_column)], id_column, max_contributions, rng=rng)
    return _draw(data, column, amount, outer, neighbours, max_contributions, rng)


def estimate_flagged(
    df: pd.DataFrame, schema: Schema, *, epsilon: float, ledger: Ledger, dataset_id: str, budget: PrivacyBudget,
    delta: float = 0.0, outers: dict[str, tuple[float, float]] | None = None,
    neighbours: Neighbours | str = Neighbours.ADD_REMOVE, dataset_label: str = "",
    rng: np.random.Generator | None = None, id_column: str | None = None, max_contributions: int = 1,
) -> BatchEstimate:
    """Estimate every column with a data-derived field privately, one ε (and δ) split evenly across them.

    ε is split evenly over the flagged columns and δ evenly over the categorical ones (numeric
    estimates need none); by sequential composition the whole costs at most (ε, δ). Everything
    refusable (a missing outer range, δ = 0 with a categorical column, a budget too small for the
    whole batch) is refused before the first charge; then each column is charged as its own
    ledger entry just before its noise is drawn. Guarantee per column: as :func:`estimate`.
    """
    eps, dlt = check_epsilon(epsilon), check_delta(delta)
    flagged = schema.data_derived()
    if not flagged:
        raise InputError("No column of the schema holds values read off the data; nothing to estimate.")
    outers = outers or {}
    n_cat = sum(isinstance(schema.column(c), CategoricalColumn) for c in flagged)
    eps_each = eps / len(flagged)
    dlt_each = dlt / n_cat if n_cat else 0.0
    plans = {c: _plan(df, schema.column(c), eps_each, dlt_each, outers.get(c), id_column) for c in flagged}
    ledger.register(dataset_id, budget, label=dataset_label)
    need = PrivacyBudget(sum(a.epsilon for a, _ in plans.values()), sum(a.delta for a, _ in plans.values()))
    left = ledger.remaining(dataset_id)
    if left is not None and not left.covers(need):
        raise InputError(
            f"Estimating {len(flagged)} columns needs ε = {need.epsilon:g}" + (f", δ = {need.delta:g}" if need.delta else "")
            + f"; only ε = {left.epsilon:g}" + (f", δ = {left.delta:g}" if left.delta else "") + " is left. Nothing was spent."
        )
    rng = rng if rng is not None else noise.secure_rng()
    data, _ = bound_contributions(df[[*flagged, *([id_column] if id_column else [])]], id_column, max_contributions,
                                  rng=rng)
    out, failed = schema, {}
    estimates: dict[str, Estimate] = {}
    for name in flagged:
        amount, mech = plans[name]
        ledger.charge(dataset_id, amount, mechanism=mech, purpose=f"schema estimate for column {name!r} (batch)")
        try:
            est = _draw(data, schema.column(name), amount, outers.get(name), neighbours, max_contributions, rng)
        except InputError as exc:
            failed[name] = str(exc)
            continue
        estimates[name] = est
        out = out.replace(est.column)
    return BatchEstimate(out, estimates, failed)


def _needed(column: Column, id_column: str | None) -> list[str]:
    return [column.name, *([id_column] if id_column else [])]


def _plan(df: pd.DataFrame, column: Column, epsilon: float, delta: float, outer: tuple[float, float] | None,
          id_column: str | None) -> tuple[PrivacyBudget, str]:
    """The spend and mechanism text of one column's estimate; refuses bad requests (nothing charged)."""
    eps, dlt = check_epsilon(epsilon), check_delta(delta)
    name = column.name
    if name not in df.columns:
        raise InputError(f"The data has no column {name!r}.")
    if id_column is not None and id_column not in df.columns:
        raise InputError(f"The ID column {id_column!r} is not in the table.")
    if isinstance(column, NumericColumn):
        if outer is None:
            raise InputError(f"Column {name!r}: give a public outer range that surely holds every value.")
        lo, hi = float(outer[0]), float(outer[1])
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise InputError(f"Column {name!r}: the outer range must have lower < upper, got [{lo:g}, {hi:g}].")
        return PrivacyBudget(eps, 0.0), ("private bounds: exponential-mechanism quantiles (1%, 99%) and a noisy count"
                                         " of values at the outer range")
    if dlt <= 0:
        raise InputError(f"Column {name!r}: finding categories privately needs δ > 0 (e.g. 1e-6).")
    return PrivacyBudget(eps, dlt), ("private categories: thresholded discrete Laplace counts and a noisy count of"
                                     " rows left out")


def _draw(data: pd.DataFrame, column: Column, amount: PrivacyBudget, outer: tuple[float, float] | None,
          neighbours: Neighbours | str, k: int, rng: np.random.Generator) -> Estimate:
    """Draw the estimate (after the charge) on rows already bounded to k per person."""
    name = column.name
    eps_main, eps_check = amount.epsilon * (1 - CHECK_SHARE), amount.epsilon * CHECK_SHARE
    kw = {"neighbours": neighbours, "max_contributions": k}
    notes: list[str] = []
    if isinstance(column, NumericColumn):
        assert outer is not None  # checked by _plan
        lo, hi = float(outer[0]), float(outer[1])
        values = pd.to_numeric(data[name], errors="coerce").to_numpy(dtype=np.float64)
        lower, upper = private_bounds(values, lo, hi, eps_main, rng=rng, integer=column.integer, **kw)
        at_edge = int(np.count_nonzero((values <= lo) | (values >= hi)))
        check = noisy_count(at_edge, eps_check, rng=rng, **kw)
        width = hi - lo
        touched = [w for w, v, e in (("lower", lower, lo), ("upper", upper, hi)) if abs(v - e) <= EDGE_FRACTION * width]
        if check.clearly_positive:
            notes.append(
                f"Column {name!r}: about {check.value:,} values lie at or beyond the outer range [{lo:g}, {hi:g}];"
                " the range is too narrow and the estimate is cut off. Widen the outer range and estimate again,"
                " or enter the bounds by hand."
            )
        if touched:
            notes.append(
                f"Column {name!r}: the estimated {' and '.join(touched)} bound{'s' if len(touched) > 1 else ''}"
                f" touched the outer range [{lo:g}, {hi:g}]; the real values may go further. Consider a wider"
                " outer range."
            )
        return Estimate(_numeric(column, lower, upper), tuple(notes), amount.epsilon, 0.0)
    found = private_categories(data[name], eps_main, amount.delta, rng=rng, **kw)
    if not found.categories:
        raise InputError(
            f"Column {name!r}: no category was frequent enough to be released at this ε (threshold"
            f" {found.threshold}); the spend is recorded. Enter the categories by hand or use a larger ε."
        )
    text = data[name].astype("string")
    present = text.notna() & (text.str.strip(BLANKS) != "")
    left_out = int(np.count_nonzero(present & ~text.isin(found.categories)))
    check = noisy_count(left_out, eps_check, rng=rng, **kw)
    if check.clearly_positive:
        shown = sum(found.noisy_counts)
        share = check.value / max(1, check.value + shown)
        notes.append(
            f"Column {name!r}: about {check.value:,} rows (roughly {share:.0%}) hold categories that were left out,"
            f" each rarer than about {found.threshold:,} rows; they will be counted as missing. Add the categories"
            " you know by hand, or estimate with a larger ε."
        )
    # Values outside the released list go to the missing cell: rare categories stay hidden.
    col = CategoricalColumn(name=name, categories=tuple(found.categories), missing=True, on_unknown="missing",
                            provenance="private")
    return Estimate(col, tuple(notes), amount.epsilon, amount.delta)


def _numeric(column: NumericColumn, lower: float, upper: float) -> NumericColumn:
    """The column on new bounds (its whole-number or decimals grid kept), with as many of its bins as
    still hold a grid value each. A bin count read off the data is replaced by the public default
    DEFAULT_BINS."""
    src = field_sources(column)
    bins = column.bins if src["bins"] != "data" else DEFAULT_BINS
    d = column.grid_decimals
    if d is not None:
        scale = 10**d
        bins = max(1, min(bins, math.floor(upper * scale) - math.ceil(lower * scale) + 1))
    while True:
        try:
            bins_src = src["bins"] if bins == column.bins and src["bins"] != "data" else "private"
            return NumericColumn(name=column.name, lower=lower, upper=upper, bins=bins, integer=column.integer,
                                 decimals=column.decimals, missing=column.missing, provenance="private",
                                 sources={"bins": bins_src})
        except InputError:
            if bins == 1:
                raise
            bins -= 1  # equal widths can miss a grid value at the edge: one bin fewer
