"""What the noise cost: fidelity metrics, the seeds' mean comparison, accuracy previews, trade-offs.

Two kinds of functions live here, and the UI labels them so:

- *Previews* (:func:`accuracy_preview`) use only public inputs (schema, ε, δ, relation): they
  touch no data and may be shown and shared freely.
- *Comparisons with the real data* (TVD, correlations, the mean simulation, trade-off curves)
  are for the curator's eyes only. They are not releases and are not part of any artifact.

The mean comparison is seed 000's "RELEASING A PRIVATE HISTOGRAM: SIMULATION": the mean from
the private histogram, Z̄₁ = Σ c̃_j (l_j + h/2) / n, against the Laplace-perturbed sample
mean, Z̄₂ = x̄ + Lap((U − L)/(nε)), both ε-DP under replace-one neighbours with n public.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dpsynth import noise
from dpsynth.binning import encode
from dpsynth.errors import InputError
from dpsynth.mechanisms import DiscreteLaplace, calibrate, cell_error_bound, check_epsilon, laplace_accuracy, laplace_scale
from dpsynth.neighbours import Neighbours, bounded_mean_sensitivity, histogram_l1_sensitivity
from dpsynth.schema import NumericColumn, Schema

#: Resolution of the grid the perturbed mean is computed on: (U − L)/GRID per step.
GRID = 10_000


# ---------------------------------------------------------------- fidelity (curator only)
def marginal_counts(codes: np.ndarray, sizes: Sequence[int], cols: Sequence[int]) -> np.ndarray:
    """Counts of the marginal on the given columns (flattened, row-major)."""
    sub = tuple(sizes[j] for j in cols)
    flat = np.ravel_multi_index(tuple(codes[:, j] for j in cols), sub) if len(codes) else np.zeros(0, dtype=np.int64)
    return np.bincount(flat, minlength=math.prod(sub))


def tvd(p_counts: np.ndarray, q_counts: np.ndarray) -> float:
    """Total-variation distance ½ Σ |p − q| between two count vectors normalised to distributions."""
    p = np.asarray(p_counts, dtype=np.float64)
    q = np.asarray(q_counts, dtype=np.float64)
    sp, sq = p.sum(), q.sum()
    if sp <= 0 or sq <= 0:
        return 1.0 if sp != sq else 0.0
    return 0.5 * float(np.abs(p / sp - q / sq).sum())


def marginal_tvds(
    real_codes: np.ndarray, synth_codes: np.ndarray, sizes: Sequence[int], k: int,
    names: Sequence[str] | None = None, max_sets: int | None = None, seed: int = 0,
) -> pd.DataFrame:
    """TVD between real and synthetic k-way marginals, one row per column set (all, or a seeded sample)."""
    d = len(sizes)
    sets = list(itertools.combinations(range(d), k))
    if max_sets is not None and len(sets) > max_sets:
        pick = np.random.default_rng(seed).choice(len(sets), size=max_sets, replace=False)
        sets = [sets[i] for i in sorted(pick)]
    names = list(names) if names is not None else [str(j) for j in range(d)]
    rows = []
    for cols in sets:
        rows.append({
            "columns": " × ".join(names[j] for j in cols),
            "tvd": tvd(marginal_counts(real_codes, sizes, cols), marginal_counts(synth_codes, sizes, cols)),
        })
    return pd.DataFrame(rows, columns=["columns", "tvd"])


def fidelity(real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema) -> dict[str, Any]:
    """1- and 2-way marginal TVDs (per column / pair and averaged) between real and synthetic tables."""
    rc, sc = encode(real, schema).codes, encode(synthetic, schema).codes
    one = marginal_tvds(rc, sc, schema.sizes, 1, schema.names)
    two = marginal_tvds(rc, sc, schema.sizes, 2, schema.names) if len(schema.columns) > 1 else one.iloc[0:0]
    return {"one_way": one, "two_way": two,
            "mean_one_way": float(one["tvd"].mean()),
            "mean_two_way": float(two["tvd"].mean()) if len(two) else float("nan")}


def correlations(real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema) -> dict[str, pd.DataFrame]:
    """Pearson correlation of the numeric columns (clamped to bounds) in both tables, and their difference."""
    num = [c for c in schema.columns if isinstance(c, NumericColumn)]
    if len(num) < 2:
        return {}

    def corr(df: pd.DataFrame) -> pd.DataFrame:
        cols = {c.name: pd.to_numeric(df[c.name], errors="coerce").clip(c.lower, c.upper) for c in num}
        return pd.DataFrame(cols).corr()

    r, s = corr(real), corr(synthetic)
    return {"real": r, "synthetic": s, "difference": s - r}


# ---------------------------------------------------------------- seed 000's mean comparison
def histogram_mean(counts: np.ndarray, column: NumericColumn, n: float) -> float:
    """Σ_j c_j (l_j + h/2) / n over the column's bins (seed 000); a missing cell is ignored."""
    c = np.asarray(counts, dtype=np.float64)[: column.bins]
    return float(c @ column.midpoints() / n)


def perturbed_mean(values: np.ndarray, column: NumericColumn, epsilon: float, *, rng: np.random.Generator) -> float:
    """x̄ + Laplace((U − L)/(nε)) under replace-one neighbours with n public (seed 000), done safely.

    Floating-point-safe version (Mironov 2012): values are clamped and rounded to a grid of step
    γ = (U − L)/GRID (a per-record map), their sum in grid units has sensitivity GRID, and exact
    discrete Laplace noise of scale GRID/ε is added before scaling back. ε-DP, same error as the
    continuous mechanism up to the grid step.
    """
    eps = check_epsilon(epsilon)
    x = np.clip(np.asarray(values, dtype=np.float64), column.lower, column.upper)
    n = len(x)
    bounded_mean_sensitivity(column.lower, column.upper, n)
    units = np.rint((x - column.lower) / (column.upper - column.lower) * GRID).astype(np.int64)
    z = noise.discrete_laplace(laplace_scale(GRID, eps), 1, rng=rng)[0]
    return column.lower + (int(units.sum()) + int(z)) / GRID * (column.upper - column.lower) / n


@dataclass(frozen=True)
class MeanSimulation:
    """R simulated releases of both estimators (curator's eyes only)."""

    true_mean: float
    histogram_mean_noiseless: float
    draws: pd.DataFrame  # columns: rep, estimator, estimate, error
    summary: pd.DataFrame  # per estimator: bias, sd, rmse, mae


HIST_LABEL = "mean from private histogram"
PERT_LABEL = "Laplace-perturbed sample mean"


def simulate_means(
    values: np.ndarray, column: NumericColumn, epsilon: float, reps: int = 1000, *, rng: np.random.Generator,
) -> MeanSimulation:
    """Monte-Carlo comparison of Z̄₁ (histogram mean) and Z̄₂ (perturbed mean) over ``reps`` runs.

    Both are ε-DP under replace-one neighbours with n public (the seed's bounded setting): the
    histogram gets discrete Laplace noise of scale 2/ε per bin (Δ₁ = 2).
    """
    eps = check_epsilon(epsilon)
    if reps < 1:
        raise InputError("The number of repetitions must be at least 1.")
    x = np.asarray(values, dtype=np.float64)
    x = x[~np.isnan(x)]
    n = len(x)
    if n == 0:
        raise InputError(f"Column {column.name!r} has no values to simulate with.")
    xc = np.clip(x, column.lower, column.upper)
    true = float(xc.mean())
    inner = column.edges()[1:-1]
    counts = np.bincount(np.searchsorted(inner, xc, side="right"), minlength=column.bins)
    mech = DiscreteLaplace.calibrate(eps, Neighbours.REPLACE_ONE)
    noisy = counts[None, :] + noise.discrete_laplace(mech.scale, (reps, column.bins), rng=rng)
    z1 = noisy @ column.midpoints() / n
    units = np.rint((xc - column.lower) / (column.upper - column.lower) * GRID).astype(np.int64)
    zs = noise.discrete_laplace(laplace_scale(GRID, eps), reps, rng=rng)
    z2 = column.lower + (int(units.sum()) + zs) / GRID * (column.upper - column.lower) / n
    draws = pd.DataFrame({
        "rep": np.concatenate([np.arange(reps), np.arange(reps)]),
        "estimator": [HIST_LABEL] * reps + [PERT_LABEL] * reps,
        "estimate": np.concatenate([z1, z2]),
    })
    draws["error"] = draws["estimate"] - true
    g = draws.groupby("estimator", sort=False)["error"]
    summary = pd.DataFrame({
        "bias": g.mean(), "sd": g.std(ddof=1).fillna(0.0),
        "rmse": g.apply(lambda e: float(np.sqrt(np.mean(e**2)))), "mae": g.apply(lambda e: float(np.mean(np.abs(e)))),
    }).reset_index()
    return MeanSimulation(true, histogram_mean(counts, column, n), draws, summary)


# ---------------------------------------------------------------- previews (public inputs only)
def accuracy_preview(
    schema: Schema, epsilon: float, delta: float = 0.0, neighbours: Neighbours | str = "add-remove",
    mechanism: str = "auto", beta: float = 0.05, expected_rows: int | None = None, max_contributions: int = 1,
) -> dict[str, Any]:
    """Expected error of the noisy histogram before release, from public inputs only (no data).

    ``cell_bound``: with probability ≥ 1 − β no cell is off by more than this (exact tails, union
    bound); ``theorem_3_8``: seed 002's ln(k/β)·Δ/ε for Laplace noise.
    """
    mech = calibrate(epsilon, delta, neighbours, max_contributions, kind=mechanism)
    k = schema.n_cells
    std = mech.noise_std()
    out: dict[str, Any] = {
        "n_cells": k,
        "mechanism": mech.describe()["mechanism"],
        "noise_std": std,
        "interval_95": cell_error_bound(mech, 1, 0.05),
        "cell_bound": cell_error_bound(mech, min(k, 10**9), beta),
        "beta": beta,
        "theorem_3_8": laplace_accuracy(k, mech.epsilon, histogram_l1_sensitivity(neighbours, max_contributions), beta),
        "expected_total_abs_noise": k * std * (math.sqrt(2) / 2 if isinstance(mech, DiscreteLaplace) else math.sqrt(2 / math.pi)),
    }
    warnings = []
    if expected_rows:
        per_cell = expected_rows / k
        out["rows_per_cell"] = per_cell
        if per_cell < 2 * std:
            warnings.append(
                f"About {per_cell:,.2g} rows per cell against noise of ±{std:,.1f} per cell: most cells will be"
                " noise. Use fewer bins or columns, a larger ε, or the marginals method."
            )
    out["warnings"] = warnings
    return out


# ---------------------------------------------------------------- trade-off curves (curator only)
def tradeoff_curves(
    df: pd.DataFrame, schema: Schema, column: str, epsilons: Sequence[float], reps: int = 200, *,
    rng: np.random.Generator, progress: Callable[[float, str], None] | None = None,
) -> pd.DataFrame:
    """Error versus ε from repeated simulated releases: RMSE of both means for ``column`` and the
    mean 1-way TVD of the noisy histogram's marginals over all schema columns (replace-one, Laplace)."""
    col = schema.column(column)
    if not isinstance(col, NumericColumn):
        raise InputError(f"Column {column!r} is not numeric; pick a numeric column for the mean.")
    values = pd.to_numeric(df[column], errors="coerce").to_numpy(dtype=np.float64)
    codes = encode(df, schema).codes
    rows = []
    for i, eps in enumerate(epsilons):
        sim = simulate_means(values, col, eps, reps, rng=rng)
        s = sim.summary.set_index("estimator")
        tv = _noisy_marginal_tvd(codes, schema, eps, min(reps, 50), rng=rng)
        rows.append({"epsilon": eps, "rmse_histogram_mean": s.loc[HIST_LABEL, "rmse"],
                     "rmse_perturbed_mean": s.loc[PERT_LABEL, "rmse"], "mean_tvd_1way": tv})
        if progress:
            progress((i + 1) / len(epsilons), f"ε = {eps:g}")
    return pd.DataFrame(rows)


def bins_curve(
    df: pd.DataFrame, column: NumericColumn, bins: Sequence[int], epsilon: float, reps: int = 200, *,
    rng: np.random.Generator, progress: Callable[[float, str], None] | None = None,
) -> pd.DataFrame:
    """RMSE of the histogram mean versus the number of bins at a fixed ε (bias–variance trade-off)."""
    values = pd.to_numeric(df[column.name], errors="coerce").to_numpy(dtype=np.float64)
    rows = []
    for i, b in enumerate(bins):
        col = NumericColumn(name=column.name, lower=column.lower, upper=column.upper, bins=int(b))
        s = simulate_means(values, col, epsilon, reps, rng=rng).summary.set_index("estimator")
        rows.append({"bins": int(b), "rmse_histogram_mean": s.loc[HIST_LABEL, "rmse"],
                     "rmse_perturbed_mean": s.loc[PERT_LABEL, "rmse"]})
        if progress:
            progress((i + 1) / len(bins), f"{b} bins")
    return pd.DataFrame(rows)


def _noisy_marginal_tvd(codes: np.ndarray, schema: Schema, eps: float, reps: int, *, rng: np.random.Generator) -> float:
    mech = DiscreteLaplace.calibrate(eps, Neighbours.REPLACE_ONE)
    out = []
    for j, size in enumerate(schema.sizes):
        real = np.bincount(codes[:, j], minlength=size)
        noisy = np.clip(real[None, :] + noise.discrete_laplace(mech.scale, (reps, size), rng=rng), 0, None)
        p = real / max(1, real.sum())
        q = noisy / np.maximum(1, noisy.sum(axis=1, keepdims=True))
        out.append(0.5 * np.abs(q - p).sum(axis=1).mean())
    return float(np.mean(out))
