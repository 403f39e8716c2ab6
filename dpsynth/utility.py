"""What the noise cost: fidelity metrics, the seeds' mean comparison, accuracy previews, trade-offs.

Two kinds of functions live here, and the UI labels them so:

- *Previews* (:func:`accuracy_preview`) use only public inputs (schema, ε, δ, relation): they
  touch no data and may be shown and shared freely.
- *Comparisons with the real data* (TVD, correlations, the mean simulation, trade-off curves)
  are for the curator's eyes only. They are not releases and are not part of any artifact.

The mean comparison is the simulation "Releasing a private histogram" of the lecture notes on
differential privacy ("Statistics for Data Science", ch. 6): the mean from
the private histogram, Z̄₁ = Σ c̃_j (l_j + h/2) / n, against the Laplace-perturbed sample
mean, Z̄₂ = x̄ + Lap((U − L)/(nε)), both ε-DP under replace-one neighbours with n public.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from dpsynth import noise
from dpsynth.binning import encode
from dpsynth.errors import InputError
from dpsynth.humanize import about, count, number, percent
from dpsynth.mechanisms import DiscreteLaplace, cell_error_bound, check_epsilon, laplace_accuracy, laplace_scale
from dpsynth.neighbours import Neighbours, bounded_mean_sensitivity, histogram_l1_sensitivity
from dpsynth.schema import NumericColumn, Schema

if TYPE_CHECKING:
    from dpsynth.value_model import ValueModel

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


def with_numbers(df: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """A copy of ``df`` whose numeric schema columns are floats (blanks and text → NaN), converted once so that
    the comparisons (encoding, correlations, raw values) do not each parse the same text again."""
    out = df.copy(deep=False)
    for c in schema.columns:
        if isinstance(c, NumericColumn) and c.name in out.columns:
            out[c.name] = pd.to_numeric(out[c.name], errors="coerce").astype("float64")
    return out


def fidelity(real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema) -> dict[str, Any]:
    """1- and 2-way marginal TVDs (per column / pair and averaged) between real and synthetic tables."""
    return fidelity_of_codes(encode(real, schema).codes, encode(synthetic, schema).codes, schema)


def fidelity_of_codes(rc: np.ndarray, sc: np.ndarray, schema: Schema) -> dict[str, Any]:
    """:func:`fidelity` from the tables' cell codes (encode once, reuse for other comparisons)."""
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


#: Quantiles shown in the raw-value comparison.
QUANTILES = (0.05, 0.25, 0.75, 0.95)


def numeric_values(df: pd.DataFrame, column: str) -> np.ndarray:
    """The column's numeric values as floats, blanks and text dropped (raw: not clamped to the schema's bounds)."""
    x = pd.to_numeric(df[column], errors="coerce").to_numpy(dtype=np.float64)
    return x[~np.isnan(x)]


def ks_distance(a: np.ndarray, b: np.ndarray, *, is_sorted: bool = False) -> float:
    """Kolmogorov–Smirnov distance sup |F_a − F_b| between two samples' empirical distribution functions."""
    if not is_sorted:
        a, b = np.sort(np.asarray(a, dtype=np.float64)), np.sort(np.asarray(b, dtype=np.float64))
    if len(a) == 0 or len(b) == 0:
        return 1.0 if len(a) != len(b) else 0.0
    grid = np.concatenate([a, b])
    fa = np.searchsorted(a, grid, side="right") / len(a)
    fb = np.searchsorted(b, grid, side="right") / len(b)
    return float(np.abs(fa - fb).max())


def value_model_ks(values: np.ndarray, col: NumericColumn, model: ValueModel) -> float:
    """KS distance between a numeric column's real ``values`` and its released value model
    (:class:`dpsynth.value_model.ValueModel`) inside the real bins, each bin with its exact share of
    the rows: the error the value model alone adds inside the bins, computed exactly (no sampling) and
    piece by piece (an exact grid may have 2^30 points). For benchmarks and tests (curator's eyes only)."""
    g = model.trees[col.name].grid
    v = np.asarray(values, dtype=np.float64)
    real = np.sort(np.clip(v[~np.isnan(v)], col.lower, col.upper))
    lo, _ = g.bin_ranges(col)
    share = np.bincount(np.clip(np.searchsorted(lo, g.units(real), side="right") - 1, 0, len(lo) - 1),
                        minlength=len(lo)) / len(real)
    at = np.unique(real)
    u = g.positions(at)
    # between two real values the real CDF is flat and the model's rises: compare at each real value
    # and just before it (the grid points strictly below it)
    below = np.ceil(u) - 1
    f_at = model.cdf(col.name, col, u, share)
    f_below = model.cdf(col.name, col, below, share)
    r_at = np.searchsorted(real, at, side="right") / len(real)
    r_below = np.searchsorted(real, at, side="left") / len(real)
    return float(max(np.max(np.abs(f_at - r_at)), np.max(np.abs(f_below - r_below))))


def _sorted_quantiles(x: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """Quantiles of a sorted sample by linear interpolation (numpy's default method), without re-sorting."""
    pos = probs * (len(x) - 1)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, len(x) - 1)
    return x[lo] + (x[hi] - x[lo]) * (pos - lo)


def value_comparison(real: pd.DataFrame, synthetic: pd.DataFrame, column: str) -> dict[str, Any]:
    """Raw values of one numeric column, real vs synthetic: mean, median, quantiles, the real data's most common
    value and its share in each table, and the KS distance (curator's eyes only: the real side is not private)."""
    r, s = np.sort(numeric_values(real, column)), np.sort(numeric_values(synthetic, column))
    if len(r) == 0:
        raise InputError(f"Column {column!r} has no numeric values in your data to compare with.")
    starts = np.flatnonzero(np.concatenate([[True], r[1:] != r[:-1]]))  # r is sorted: runs of equal values
    runs = np.diff(np.append(starts, len(r)))
    mode = float(r[starts[np.argmax(runs)]])
    probs = np.array([0.5, *QUANTILES])
    out: dict[str, Any] = {"column": column, "mode": mode, "n_real": len(r), "n_synthetic": len(s),
                           "ks": ks_distance(r, s, is_sorted=True),
                           "ecdf": {"real": ecdf_points(r, is_sorted=True), "synthetic": ecdf_points(s, is_sorted=True)}}
    for side, x in (("real", r), ("synthetic", s)):
        q = _sorted_quantiles(x, probs) if len(x) else np.full(len(probs), math.nan)
        share = (np.searchsorted(x, mode, side="right") - np.searchsorted(x, mode, side="left")) / len(x) if len(x) \
            else math.nan
        out[side] = {
            "mean": float(x.mean()) if len(x) else math.nan,
            "median": float(q[0]),
            **{f"q{round(p * 100)}": float(v) for p, v in zip(QUANTILES, q[1:], strict=True)},
            "mode_share": float(share),
        }
    return out


def value_comparisons(real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema) -> dict[str, dict[str, Any]]:
    """:func:`value_comparison` of every numeric column of the schema with numeric values, by column name."""
    out = {}
    for c in schema.columns:
        if isinstance(c, NumericColumn) and c.name in real.columns:
            try:
                out[c.name] = value_comparison(real, synthetic, c.name)
            except InputError:
                continue  # no numeric value in the real column: nothing to compare
    return out


def comparison_summary(comparisons: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """One row per column: the headline numbers of :func:`value_comparisons`."""
    rows = []
    for v in comparisons.values():
        rows.append({"column": v["column"], "mean (real)": v["real"]["mean"], "mean (synthetic)": v["synthetic"]["mean"],
                     "median (real)": v["real"]["median"], "median (synthetic)": v["synthetic"]["median"],
                     "most common real value": v["mode"], "its share (real)": v["real"]["mode_share"],
                     "its share (synthetic)": v["synthetic"]["mode_share"], "KS distance": v["ks"]})
    return pd.DataFrame(rows)


def value_table(comparison: dict[str, Any], formatted: bool = False) -> pd.DataFrame:
    """The statistics of one :func:`value_comparison` as a two-column table (real, synthetic) for display;
    ``formatted``: numbers and shares as text for people."""
    labels = {"mean": "mean", "median": "median", **{f"q{round(q * 100)}": f"{round(q * 100)}% of rows are below"
                                                    for q in QUANTILES},
              "mode_share": f"rows equal to {number(comparison['mode'])} (most common)"}
    order = ["mean", "median", "q5", "q25", "q75", "q95", "mode_share"]
    out = pd.DataFrame({"statistic": [labels[k] for k in order],
                        "real (only you)": [comparison["real"][k] for k in order],
                        "synthetic": [comparison["synthetic"][k] for k in order]})
    if formatted:
        for c in ("real (only you)", "synthetic"):
            out[c] = [percent(x) if k == "mode_share" else number(x) for k, x in zip(order, out[c], strict=True)]
    return out


def formatted_comparisons(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`comparison_summary` written for people, compactly: each statistic as 'real → synthetic'."""
    def pair(a: str, b: str, fmt: Callable[[float], str]) -> list[str]:
        return [f"{fmt(x)} → {fmt(y)}" for x, y in zip(table[a], table[b], strict=True)]

    return pd.DataFrame({
        "column": table["column"],
        "mean (real → synthetic)": pair("mean (real)", "mean (synthetic)", number),
        "median": pair("median (real)", "median (synthetic)", number),
        "most common real value": [number(v) for v in table["most common real value"]],
        "rows with that value": pair("its share (real)", "its share (synthetic)", percent),
        "KS distance": [number(v, 2) for v in table["KS distance"]],
    })


def ecdf_points(x: np.ndarray, points: int = 201, *, is_sorted: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(value, share of values ≤ it) at ``points`` evenly spaced shares: a compact empirical CDF to plot."""
    probs = np.linspace(0.0, 1.0, points)
    if len(x) == 0:
        return np.zeros(0), np.zeros(0)
    x = np.asarray(x, dtype=np.float64) if is_sorted else np.sort(np.asarray(x, dtype=np.float64))
    # inverted CDF: the smallest value whose share of values at or below it reaches p
    idx = np.clip(np.ceil(probs * len(x)).astype(np.int64) - 1, 0, len(x) - 1)
    return x[idx], probs


# ---------------------------------------------------------------- the released counts, explained (release side)
def noise_explanation(card: dict[str, Any], counts: Sequence[np.ndarray],
                      noise: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
    """What the released noisy counts are: the noise's typical size, and how many counts are negative or zero.

    Reads only the release (its card, released counts and the model's per-table noise entries ``noise``):
    post-processing, safe to publish. ``counts`` are the released count tables (the histogram, or each
    noisy marginal).
    """
    stds = _noise_stds(card, noise)
    flat = np.concatenate([np.asarray(c, dtype=np.float64).ravel() for c in counts]) if counts else np.zeros(0)
    n = len(flat)
    return {
        "n_counts": n,
        "n_tables": len(counts),
        "noise_std_min": min(stds) if stds else math.nan,
        "noise_std_max": max(stds) if stds else math.nan,
        "negative": int((flat < 0).sum()),
        "zero": int((flat == 0).sum()),
        "share_negative": float((flat < 0).mean()) if n else 0.0,
        "share_zero": float((flat == 0).mean()) if n else 0.0,
    }


def _noise_stds(card: dict[str, Any], noise: Sequence[dict[str, Any]] | None) -> list[float]:
    """Standard deviation of the noise on each released count, from the card or the model's noise entries."""
    mech = card.get("mechanism", {})
    if "noise_std" in mech:
        return [float(mech["noise_std"])]
    out = [_std_of(entry) for entry in noise or []]
    return [s for s in out if s is not None]


def _std_of(entry: dict[str, Any]) -> float | None:
    from fractions import Fraction

    if "scale" in entry:
        b = float(Fraction(str(entry["scale"])))
        p = math.exp(-1.0 / b) if b > 0 else 0.0
        return math.sqrt(2.0 * p) / (1.0 - p) if b > 0 else 0.0
    if "sigma2" in entry:
        return math.sqrt(float(Fraction(str(entry["sigma2"]))))
    return None


def noise_sentences(info: dict[str, Any]) -> list[str]:
    """Plain sentences explaining :func:`noise_explanation` to a curator or a reader of the release."""
    lo, hi = info["noise_std_min"], info["noise_std_max"]
    if math.isnan(lo):
        size = "Each released count had random noise added."
    elif round(lo, 1) == round(hi, 1):
        size = (f"Each released count had random noise added, typically about ±{number(lo, 2)} (standard deviation)"
                f"; about 95% of counts are within ±{number(2 * hi, 2)} of the true count.")
    else:
        size = (f"Each released count had random noise added, typically between ±{number(lo, 2)} and"
                f" ±{number(hi, 2)} depending on the table (standard deviation); the tables with more noise were"
                " given a smaller share of ε.")
    return [
        f"The release holds {count(info['n_counts'], 'noisy count')}"
        + (f" in {count(info['n_tables'], 'table')}." if info["n_tables"] > 1 else "."),
        size,
        f"{count(info['negative'], 'count')} ({percent(info['share_negative'])}) came out negative. A negative"
        " count is not an error: it is noise on a cell with few or no people in it. The true count is never below"
        " 0; read it as 'about 0'. Negative counts are set to 0 before the synthetic rows are drawn.",
        f"{count(info['zero'], 'count')} ({percent(info['share_zero'])}) are exactly 0. A zero does not mean"
        " nobody is in that cell: the true count can be anywhere within the noise's range. Empty cells got noise"
        " too, so a non-zero count can also be noise alone.",
        "Counts much larger than the noise can be trusted more: an error of ±30 matters on a count of 50, hardly"
        " on a count of 5,000.",
    ]


# ---------------------------------------------------------------- the lecture notes' mean comparison (ch. 6)
def histogram_mean(counts: np.ndarray, column: NumericColumn, n: float) -> float:
    """Σ_j c_j (l_j + h/2) / n over the column's bins (lecture notes, ch. 6); a missing cell is ignored."""
    c = np.asarray(counts, dtype=np.float64)[: column.bins]
    return float(c @ column.midpoints() / n)


def perturbed_mean(values: np.ndarray, column: NumericColumn, epsilon: float, *, rng: np.random.Generator) -> float:
    """x̄ + Laplace((U − L)/(nε)) under replace-one neighbours with n public (lecture notes, ch. 6), done safely.

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
    rows: int | None = None, threshold: int = 1,
) -> dict[str, Any]:
    """Expected error of the noisy histogram before release, from public inputs only (no data).

    The cells' mechanism is the release's (:func:`dpsynth.plan.histogram_budget`: the value model's and
    the row count's shares taken from ε; ``rows`` and ``threshold`` as the release's).
    ``cell_bound``: with probability ≥ 1 − β no cell is off by more than this (exact tails, union
    bound); ``theorem_3_8``: the Algorithmic Foundations of DP slides' ln(k/β)·Δ/ε for Laplace noise.
    """
    from dpsynth.plan import check_release_budget, histogram_budget

    epsilon, delta = check_release_budget(epsilon, delta, max_contributions)
    _, mech, _ = histogram_budget(schema, epsilon, delta, neighbours, max_contributions, mechanism,
                                  threshold=threshold, rows_given=rows is not None)
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
                f"{about(per_cell, 'row').capitalize()} per cell against noise of ±{number(std)} per cell: most cells will be"
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
