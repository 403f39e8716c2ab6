"""Honest statistics from a release: intervals and tests that account for the DP noise, no new ε.

Everything here is post-processing of released files (the noisy histogram or the marginal
model's noisy measurements, the card, the synthetic rows); the real data is never read, so an
analyst who holds only the release zip gets the same answers as the curator.

Why (Kifer, "Basic DP algorithms and statistics", sections "Chi-Squared Testing" and
"Takeaway Messages"): an analyst who treats noisy measurements or synthetic rows as real data
gets wrong answers — the noise inflates a chi-squared statistic, p-values come out too small
and false discoveries follow. The cure is what the notes call the release's public facts:
"noisy measurements are often just counts + noise; noise is often unbiased; variance and
distribution are known". We use them as follows.

**The noisy table of a column (or pair).** Histogram method: the released full histogram
summed over the other columns; each summed cell's noise is the sum of K independent draws of
the card's mechanism (discrete Laplace of the card's scale, or discrete Gaussian of its σ²), K
the number of full cells summed, so its variance is K·Var(Z) and its exact law is the K-fold
convolution (computed by FFT, :class:`NoiseLaw`). Marginals method: every released measurement
whose columns contain the wanted ones (the one-way marginal of stage 1, and the two-way tables
measured in the rounds), each summed down the same way with its own recorded law, combined with
inverse-variance weights — the weights the method itself uses for its noisy total. Cells of one
table have independent noise (disjoint sums of independent draws).

**Sampling.** The table is treated as a sample from a population: cell counts c ~
Multinomial(n, π) (Poisson for totals). The released counts are ĉ = c + e, e from the known law.

**Means and proportions** are ratios R = w·ĉ / m·ĉ (w: the values of the cells, m: the cells of
the denominator). Their interval is a parametric bootstrap of the pivot R − θ: in a simulated
world with π̂ = clamp(ĉ, 0)/Σ (negative noisy counts clamped to 0 only here) we draw counts from
Multinomial(n̂, π̂), add noise from the exact released law, and take the α/2 and 1 − α/2
quantiles of R* − θ* (each at its Monte-Carlo confidence bound: few simulations widen the
interval); a draw whose noisy denominator is ≤ 0 counts as unbounded on both sides.
This accounts for (a) the noise, by its exact law, heavy tails included (a normal approximation
of pure discrete-Laplace noise covers only ~93.7% at 95%), (b) the sampling variability, and the
noisy total in the denominator (the ratio is simulated, not linearised).

**Binning.** A mean from bins only knows each value's bin: a value in bin j lies in [a_j, b_j]
(the bin's edges, or its smallest and largest grid value for whole-number or fixed-decimal
columns). The population mean μ = Σ π_j μ_j therefore lies in [θ_a, θ_b] with θ_a = Σ π_j a_j,
θ_b = Σ π_j b_j. The interval is [L_a, U_b], L_a a lower confidence bound for θ_a and U_b an
upper bound for θ_b, each at level 1 − α/2: P(μ < L_a) ≤ P(θ_a < L_a) ≤ α/2, and likewise above,
so it covers μ with probability ≥ 1 − α whatever the values inside the bins (up to the
bootstrap's approximation). A total T ∈ [Σ c_j a_j, Σ c_j b_j] is handled the same way.

**What is estimated.** Numeric values outside the schema's bounds were clamped to them by the
release, so the mean is that of the clamped values; the mean and total ignore the missing
cell; a proportion's denominator is every row (the missing cell included).

**Independence** of A and B (Kifer's "Attempt 2": keep the statistic, simulate its sampling
distribution): the statistic is Pearson's, with each cell's noise variance added to its
expected count, T = Σ (ŷ − Ê)²/(Ê + v); the p-value is a parametric bootstrap under H0 —
counts from Multinomial(n̂, π̂_A ⊗ π̂_B), plus noise from the released law, the statistic
recomputed — with a fixed number of simulations.

**Regression** (post-processing): weighted least squares on the cells' value midpoints with
the noisy counts as weights (noisy sufficient statistics Σĉ·x·xᵀ, Σĉ·x·y, unbiased), intervals
from the same parametric bootstrap of the noisy counts. They cover the *binned* regression's
coefficients; the binning bias (values replaced by their cells' midpoints) is stated, not bounded.

**Naive answers** computed from the synthetic rows as if they were real (t-interval, Wald
interval, chi-squared test, OLS) are reported beside each, so the difference is visible.

Caveat: in the marginals method, which two-way tables are measured is chosen adaptively from
earlier noisy measurements; the intervals treat that choice as fixed (the measurement noise
itself is drawn after, and independently of, its selection).

All reading of a release (zip or in-memory) lives in :func:`load_release` and
:func:`from_release`; the statistics work on :class:`LoadedRelease` only.
"""

from __future__ import annotations

import functools
import io
import json
import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, BinaryIO, Literal

import numpy as np
import pandas as pd

from dpsynth import humanize
from dpsynth.errors import InputError
from dpsynth.schema import MISSING_LABEL, CategoricalColumn, NumericColumn, Schema

#: Largest member of a release zip we expand (bytes), and the largest expansion ratio.
MAX_MEMBER_BYTES = 2_000_000_000
MAX_RATIO = 200
#: Default number of simulated releases behind an interval and a test.
N_SIM_INTERVAL = 4000
N_SIM_TEST = 999
N_SIM_REGRESSION = 1000
#: Most table cells × simulated releases held in memory at once (float64: 8 bytes each).
MAX_SIMULATED_CELLS = 50_000_000
#: Above this half-width the K-fold noise law is taken as normal (K is then huge; CLT).
_MAX_PMF_HALF_WIDTH = 4_000_000

Kind = Literal["laplace", "gaussian"]


# ---------------------------------------------------------------------------------------------
# Noise laws
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NoiseLaw:
    """The law of the noise on one released cell: the sum of ``k`` independent draws of a discrete
    Laplace (P(z) ∝ exp(−|z|/scale)) or discrete Gaussian (P(z) ∝ exp(−z²/(2σ²))) variable.

    ``param`` is the scale (Laplace) or σ² (Gaussian), exactly as the release recorded it.
    """

    kind: Kind
    param: Fraction
    k: int = 1

    def summed(self, k: int) -> NoiseLaw:
        """The law of the sum of ``k`` independent cells of this law."""
        return NoiseLaw(self.kind, self.param, self.k * int(k))

    @property
    def base_variance(self) -> float:
        """Variance of one draw (Laplace: 2p/(1−p)², p = e^(−1/scale); Gaussian: from the pmf, ≤ σ²)."""
        return _base_variance(self.kind, self.param)

    @property
    def variance(self) -> float:
        """Variance of the cell's noise: k times that of one draw."""
        return self.k * self.base_variance

    def describe(self) -> str:
        """E.g. ``sum of 12 discrete Laplace (scale 10) draws``."""
        what = f"discrete Laplace (scale {float(self.param):.4g})" if self.kind == "laplace" else \
            f"discrete Gaussian (σ = {math.sqrt(float(self.param)):.4g})"
        return what if self.k == 1 else f"sum of {self.k:,} {what} draws"

    def sample(self, shape: tuple[int, ...], *, rng: np.random.Generator) -> np.ndarray:
        """Draws of this law (float64), by inverse CDF on the exact pmf (a normal for astronomically large k)."""
        table = _pmf_table(self.kind, self.param, self.k)
        if table is None:
            return rng.normal(0.0, math.sqrt(self.variance), size=shape)
        start, cdf = table
        u = rng.random(shape)
        return (start + np.searchsorted(cdf, u, side="right")).astype(np.float64)


@functools.lru_cache(maxsize=256)
def _base_variance(kind: str, param: Fraction) -> float:
    if kind == "laplace":
        p = math.exp(-1.0 / float(param))
        return 2.0 * p / (1.0 - p) ** 2
    s2 = float(param)
    half = math.ceil(14 * math.sqrt(s2) + 14)
    z = np.arange(-half, half + 1, dtype=np.float64)
    w = np.exp(-(z * z) / (2.0 * s2))
    return float((w * z * z).sum() / w.sum())


@functools.lru_cache(maxsize=256)
def _pmf_table(kind: str, param: Fraction, k: int) -> tuple[int, np.ndarray] | None:
    """(first support point, CDF) of the k-fold sum, or None when it is too wide (use a normal)."""
    sd1 = math.sqrt(_base_variance(kind, param))
    half = math.ceil(40.0 * sd1 + 12.0 * math.sqrt(k) * sd1) + 10
    if half > _MAX_PMF_HALF_WIDTH:
        return None
    z = np.arange(-half, half + 1, dtype=np.float64)
    if kind == "laplace":
        b = float(param)
        pmf = np.exp(-np.abs(z) / b)
    else:
        pmf = np.exp(-(z * z) / (2.0 * float(param)))
    pmf /= pmf.sum()
    if k > 1:
        # circular convolution power on a grid wide enough that the wrapped tail mass is negligible
        size = 1 << int(math.ceil(math.log2(2 * half + 1)))
        base = np.zeros(size)
        base[: half + 1] = pmf[half:]
        base[size - half:] = pmf[:half]
        out = np.fft.irfft(np.fft.rfft(base) ** k, n=size)
        pmf = np.concatenate([out[size - half:], out[: half + 1]])
        pmf = np.clip(pmf, 0.0, None)
        pmf /= pmf.sum()
    cdf = np.cumsum(pmf)
    cdf[-1] = 1.0
    return -half, cdf


def _law_from_entry(entry: dict[str, Any], where: str) -> NoiseLaw:
    """A mechanism entry of the card (``scale``/``sigma2``) or of a model measurement."""
    if isinstance(entry, dict):
        name = str(entry.get("mechanism", entry.get("noise", ""))).lower()
        try:
            kind, key = ("laplace", "scale") if "laplace" in name else ("gaussian", "sigma2") if "gaussian" in name else ("", "")
            if kind:
                param = Fraction(str(entry[key]))
                if param > 0:  # a noise law of scale 0 or below is no law (a damaged card)
                    return NoiseLaw(kind, param)
        except (KeyError, ValueError, ZeroDivisionError):
            pass
    raise InputError(f"The release does not record the noise law of {where} (mechanism and its positive scale or σ²).")


# ---------------------------------------------------------------------------------------------
# Noisy tables
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class NoisyTable:
    """Released noisy counts on ``columns`` (one axis per column) and the law of each cell's noise.

    A cell's noise is Σ_i weight_i · Z_i over ``parts`` = ((weight_i, law_i), …), independent
    across cells and parts; every cell has the same law.
    """

    columns: tuple[str, ...]
    counts: np.ndarray
    parts: tuple[tuple[float, NoiseLaw], ...]

    @property
    def variance(self) -> float:
        """Variance of one cell's noise."""
        return float(sum(w * w * law.variance for w, law in self.parts))

    def check_simulable(self, n: int) -> None:
        """Refuse ``n`` simulated releases of this table when they would not fit in memory (before any is drawn)."""
        if self.counts.size * int(n) > MAX_SIMULATED_CELLS:
            raise InputError(
                f"The table of {' × '.join(self.columns)} has {self.counts.size:,} cells, too many to simulate"
                f" {int(n):,} releases of; ask about fewer or coarser columns, or fewer simulations."
            )

    def noise(self, n: int, *, rng: np.random.Generator) -> np.ndarray:
        """``n`` independent draws of the whole table's noise, shape (n, *counts.shape)."""
        self.check_simulable(n)
        shape = (int(n), *self.counts.shape)
        out = np.zeros(shape)
        for w, law in self.parts:
            out += w * law.sample(shape, rng=rng)
        return out

    def sum_to(self, columns: Sequence[str]) -> NoisyTable:
        """The table summed over its other columns, axes in the order of ``columns``."""
        idx = [self.columns.index(c) for c in columns]
        other = tuple(i for i in range(len(self.columns)) if i not in idx)
        k = int(np.prod([self.counts.shape[i] for i in other])) if other else 1
        summed = self.counts.sum(axis=other) if other else self.counts
        kept = [i for i in range(len(self.columns)) if i in idx]
        summed = np.transpose(summed, [kept.index(i) for i in idx])
        return NoisyTable(tuple(columns), np.asarray(summed, dtype=np.float64),
                          tuple((w, law.summed(k)) for w, law in self.parts))

    def describe(self) -> str:
        """The noise law in words."""
        terms = [law.describe() if len(self.parts) == 1 else f"{w:.3g} × ({law.describe()})" for w, law in self.parts]
        return " + ".join(terms) + f"; standard deviation {math.sqrt(self.variance):.4g} per cell"


def combine(tables: Sequence[NoisyTable]) -> NoisyTable:
    """Inverse-variance weighted mean of independent noisy tables of the same true counts (unbiased,
    least variance among weighted means)."""
    if len(tables) == 1:
        return tables[0]
    inv = np.array([1.0 / t.variance for t in tables])
    weights = inv / inv.sum()
    counts = sum(w * t.counts for w, t in zip(weights, tables, strict=True))
    parts = tuple((float(w) * pw, law) for w, t in zip(weights, tables, strict=True) for pw, law in t.parts)
    return NoisyTable(tables[0].columns, np.asarray(counts, dtype=np.float64), parts)


# ---------------------------------------------------------------------------------------------
# A release, as an analyst holds it
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class LoadedRelease:
    """What an analyst holds: the public schema, the card, the noisy tables with their noise laws,
    and the synthetic rows (numeric columns as float, categories as text, missing as NA)."""

    schema: Schema
    card: dict[str, Any]
    method: str
    synthetic: pd.DataFrame
    histogram: NoisyTable | None = None
    measurements: tuple[NoisyTable, ...] = ()

    def column(self, name: str) -> NumericColumn | CategoricalColumn:
        """The schema of ``name``; an :class:`InputError` naming the release's columns otherwise."""
        if name not in self.schema.names:
            raise InputError(f"The release has no column {name!r}; its columns are {', '.join(self.schema.names)}.")
        return self.schema.column(name)

    def table(self, columns: Sequence[str]) -> NoisyTable:
        """The released noisy table on ``columns`` (see the module docstring for its noise law)."""
        cols = tuple(columns)
        for c in cols:
            self.column(c)
        if len(set(cols)) != len(cols):
            raise InputError(f"A column is named twice: {', '.join(cols)}.")
        if self.histogram is not None:
            return self.histogram.sum_to(cols)
        found = [m.sum_to(cols) for m in self.measurements if set(cols) <= set(m.columns)]
        if not found:
            measured = sorted({" × ".join(m.columns) for m in self.measurements if len(m.columns) > 1})
            raise InputError(
                f"The release holds no noisy measurement of {' and '.join(map(repr, cols))} together (the marginals"
                f" method measured only: {_listing(measured) or 'one-way tables'}); no honest answer is possible"
                " without a new release."
            )
        return combine(found)


def load_release(source: str | Path | bytes | BinaryIO) -> LoadedRelease:
    """Read a release zip (path, bytes or file object) or folder, as every entry point writes it.

    The one place that reads a release's files (:meth:`dpsynth.release.Release.from_files`, the
    pipeline's own loader); any problem is one :class:`InputError` line.
    """
    from dpsynth.release import Release, read_release_files

    if isinstance(source, str | Path) and not Path(source).exists():
        raise InputError(f"Release file {str(source)!r} does not exist.")
    data: Any = source.read() if hasattr(source, "read") else source
    if isinstance(data, memoryview | bytearray):
        data = bytes(data)
    files = read_release_files(data)
    for name, blob in files.items():
        if len(blob) > MAX_MEMBER_BYTES:
            raise InputError(f"The release's {name} expands to {len(blob):,} bytes, more than it can hold.")
    if "card.json" not in files:
        raise InputError("The release zip has no card.json; is it a dpsynth release?")
    try:
        card = json.loads(files["card.json"].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"The release's card.json is not valid JSON ({exc}).") from None
    if not isinstance(card, dict):
        raise InputError("The release's card.json is not a release card.")
    _card_schema(card)
    tables = card.get("released_tables", {})
    if (isinstance(tables, dict) and tables.get("listed_cells") is not None) or "sparse" in card:
        raise _sparse_refusal()
    try:
        rel = Release.from_files(files)
        if rel.model is None and rel.noisy_counts is None:  # a card of a full histogram over a partial listing
            raise InputError("The release's histogram.csv does not list every cell of its card's schema; the files do"
                             " not belong together.")
        loaded = from_release(rel)
    except (KeyError, ValueError, TypeError, AttributeError, IndexError, zlib.error) as exc:
        raise InputError(f"The release is corrupt ({type(exc).__name__}: {str(exc)[:120]}).") from None
    if "synthetic.csv" in files:  # the rows as published (the same values the loaded release re-creates)
        loaded = LoadedRelease(loaded.schema, loaded.card, loaded.method, _read_synthetic(files["synthetic.csv"], loaded.schema),
                               histogram=loaded.histogram, measurements=loaded.measurements)
    return loaded


def from_release(rel: Any) -> LoadedRelease:
    """The same view of an in-memory :class:`dpsynth.release.Release` (e.g. the dashboard's)."""
    card, schema = rel.card, rel.schema
    method = card.get("method", {}).get("name", "histogram")
    synthetic = _normalise_synthetic(rel.synthetic, schema)
    if rel.model is not None:
        return LoadedRelease(schema, card, "marginals", synthetic, measurements=_measurements(rel.model, schema))
    if rel.noisy_counts is None:
        raise _sparse_refusal()
    law = _law_from_entry(card.get("mechanism", {}), "the histogram")
    counts = np.asarray(rel.noisy_counts, dtype=np.float64).reshape(schema.sizes)
    return LoadedRelease(schema, card, method, synthetic, histogram=NoisyTable(tuple(schema.names), counts, ((1.0, law),)))


def _listing(items: list[str], most: int = 8) -> str:
    return "; ".join(items[:most]) + (f"; … ({len(items)} in all)" if len(items) > most else "")


def _sparse_refusal() -> InputError:
    return InputError("This release lists only cells whose noisy count reached a threshold (sparse); its noise is"
                      " truncated, so honest intervals need a release of the full noisy histogram.")


def _card_schema(card: Any) -> tuple[Schema, str]:
    if not isinstance(card, dict) or "schema" not in card:
        raise InputError("The release card has no schema; is it a dpsynth release?")
    schema = Schema.from_dict(card["schema"])
    method = card.get("method", {}).get("name") if isinstance(card.get("method"), dict) else None
    if method not in ("histogram", "marginals"):
        raise InputError(f"The release card names an unknown method {method!r}.")
    return schema, method


def _measurements(model: Any, schema: Schema) -> tuple[NoisyTable, ...]:
    if tuple(model.sizes) != schema.sizes:
        raise InputError("The release's model does not match its schema (different columns or cells).")
    out = []
    for (cols, y), nz in zip(model.measurements, model.noise, strict=True):
        names = tuple(schema.names[c] for c in cols)
        law = _law_from_entry(nz, f"the measurement of {', '.join(names)}")
        out.append(NoisyTable(names, np.asarray(y, dtype=np.float64), ((1.0, law),)))
    return tuple(out)


def _read_csv(data: bytes, name: str) -> pd.DataFrame:
    try:
        frame = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False, compression=None)
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InputError(f"The release's {name} cannot be read ({' '.join(str(exc).split())}).") from None
    # undo the writer's formula escaping (a leading apostrophe before = + - @ …)
    from dpsynth.io import _FORMULA_START

    for c in frame.columns:
        s = frame[c]
        esc = s.str.startswith("'") & s.str[1:].str.startswith(_FORMULA_START)
        if esc.any():
            frame[c] = s.where(~esc, s.str[1:])
    frame.columns = [c[1:] if c.startswith("'") and c[1:].startswith(_FORMULA_START) else c for c in frame.columns]
    return frame


def _read_synthetic(data: bytes, schema: Schema) -> pd.DataFrame:
    frame = _read_csv(data, "synthetic.csv") if data.strip() else pd.DataFrame(columns=schema.names)
    missing = [c for c in schema.names if c not in frame.columns]
    if missing:
        raise InputError(f"The release's synthetic.csv lacks column(s) {', '.join(map(repr, missing))}.")
    return _normalise_synthetic(frame.replace("", pd.NA), schema)


def _normalise_synthetic(df: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    out: dict[str, Any] = {}
    for col in schema.columns:
        s = df[col.name]
        if isinstance(col, NumericColumn):
            out[col.name] = pd.to_numeric(s, errors="coerce").astype("float64")
        else:
            out[col.name] = s.astype("string")
    return pd.DataFrame(out)


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IntervalResult:
    """An estimate with its honest interval, and the naive one from the synthetic rows."""

    statistic: str
    column: str
    value: str | None
    level: float
    estimate: float
    low: float
    high: float
    naive_estimate: float
    naive_low: float
    naive_high: float
    noise: str
    binning: str
    n_sim: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (NaN → None)."""
        return {k: _json(v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class IndependenceResult:
    """A test of independence of two columns from their released noisy two-way table."""

    columns: tuple[str, str]
    statistic: float
    p_value: float
    naive_statistic: float
    naive_p_value: float
    n_sim: int
    noise: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (NaN → None)."""
        return {k: _json(list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class RegressionResult:
    """Least squares of ``response`` on ``predictors`` from the release, beside the naive fit."""

    response: str
    predictors: tuple[str, ...]
    level: float
    terms: tuple[str, ...]
    estimate: tuple[float, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]
    naive_estimate: tuple[float, ...]
    naive_low: tuple[float, ...]
    naive_high: tuple[float, ...]
    n_sim: int
    binning: str = field(default=(
        "values are replaced by the midpoints of their cells; the intervals cover the binned regression's"
        " coefficients, not the bias of binning"))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (NaN → None)."""
        return {k: _json(list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}

    def frame(self) -> pd.DataFrame:
        """One row per coefficient."""
        return pd.DataFrame({"term": self.terms, "estimate": self.estimate, "low": self.low, "high": self.high,
                             "naive_estimate": self.naive_estimate, "naive_low": self.naive_low,
                             "naive_high": self.naive_high})


def _json(v: Any) -> Any:
    if isinstance(v, list):
        return [_json(x) for x in v]
    if isinstance(v, float | np.floating):
        return float(v) if math.isfinite(v) else None
    if isinstance(v, np.integer):
        return int(v)
    return v


# ---------------------------------------------------------------------------------------------
# Means, totals, proportions
# ---------------------------------------------------------------------------------------------


def check_level(level: float) -> float:
    """A confidence level of an interval: at least 0.5 (below it a bootstrap interval need not hold its own
    estimate) and below 1."""
    try:
        lv = float(level)
    except (TypeError, ValueError):
        raise InputError(f"The interval level (its confidence) must be a number between 0 and 1, got {level!r}.") from None
    if not 0.5 <= lv < 1.0:
        raise InputError(f"The interval level (its confidence) must be at least 0.5 and below 1, got {level!r}.")
    return lv


#: The most simulated releases behind one answer (25 × the interval's default; about 2 s on a small release): the
#: simulations are held in memory, and 10⁸ of them ran past a minute on the command line without an answer.
MAX_SIMULATIONS = 100_000


def _check_sims(n_sim: int, least: int) -> int:
    if int(n_sim) != n_sim or not least <= n_sim <= MAX_SIMULATIONS:
        raise InputError(f"The number of simulations must be a whole number from {least} to {MAX_SIMULATIONS:,},"
                         f" got {n_sim!r}.")
    return int(n_sim)


def _numeric(rel: LoadedRelease, column: str, what: str) -> NumericColumn:
    col = rel.column(column)
    if not isinstance(col, NumericColumn):
        raise InputError(f"Column {column!r} is categorical; a {what} needs a numeric column (try a proportion).")
    return col


def value_ranges(col: NumericColumn) -> tuple[np.ndarray, np.ndarray]:
    """Per bin, the smallest and largest value it can hold: its grid values for whole-number or
    fixed-decimal columns, else its edges (values outside the bounds were clamped to them)."""
    if col.grid_decimals is not None:
        lo, hi = col.grid_ranges()
        scale = 10.0 ** col.grid_decimals
        return lo / scale, hi / scale
    e = col.edges()
    return e[:-1].copy(), e[1:].copy()


def _simulated_world(table: NoisyTable, n_sim: int, rng: np.random.Generator,
                     sampling: Literal["multinomial", "poisson"]) -> tuple[np.ndarray, np.ndarray]:
    """(noisy counts of ``n_sim`` simulated releases, expected true counts of the simulated world), flat cells."""
    table.check_simulable(n_sim)  # the sampled counts are as large as the noise
    lam = np.clip(table.counts.ravel(), 0.0, None)
    if sampling == "multinomial":
        n = int(round(max(float(table.counts.sum()), 0.0)))
        p = lam / lam.sum() if lam.sum() > 0 else np.full(lam.size, 1.0 / lam.size)
        counts = rng.multinomial(n, p, size=n_sim).astype(np.float64)
        truth = n * p
    else:
        counts = rng.poisson(lam, size=(n_sim, lam.size)).astype(np.float64)
        truth = lam
    return counts + table.noise(n_sim, rng=rng).reshape(n_sim, -1), truth


def _pivot_quantiles(diff: np.ndarray, bad: np.ndarray, alpha: float) -> tuple[float, float]:
    """(α/2, 1 − α/2) quantiles of the pivot; draws with no usable denominator count as ±∞.

    Each quantile is the order statistic at its one-sided 95% Monte-Carlo confidence bound (rank
    B·q ± 1.645·√(B·q·(1 − q))), so the finite number B of simulations widens the interval, never
    narrows it."""
    b = len(diff)
    q = alpha / 2
    slack = 1.645 * math.sqrt(b * q * (1 - q))
    lo_rank = max(0, math.floor(b * q - slack) - 1)
    hi_rank = min(b - 1, math.ceil(b * (1 - q) + slack) - 1)
    lo = float(np.partition(np.where(bad, -np.inf, diff), lo_rank)[lo_rank])
    hi = float(np.partition(np.where(bad, np.inf, diff), hi_rank)[hi_rank])
    return lo, hi


def _ratio_bounds(table: NoisyTable, w_low: np.ndarray, w_high: np.ndarray, den: np.ndarray, alpha: float,
                  n_sim: int, rng: np.random.Generator) -> tuple[float, float]:
    """Lower bound for θ(w_low) and upper bound for θ(w_high), θ(w) = Σπw/Σπ·den, each at 1 − α/2."""
    y = table.counts.ravel()
    d = float(y @ den)
    sims, truth = _simulated_world(table, n_sim, rng, "multinomial")
    td = float(truth @ den)
    if d <= 0 or td <= 0:
        return -math.inf, math.inf
    sd = sims @ den
    bad = sd <= 0
    safe = np.where(bad, 1.0, sd)
    _, hi = _pivot_quantiles((sims @ w_low) / safe - float(truth @ w_low) / td, bad, alpha)
    lo, _ = _pivot_quantiles((sims @ w_high) / safe - float(truth @ w_high) / td, bad, alpha)
    return float(y @ w_low) / d - hi, float(y @ w_high) / d - lo


def _inside(estimate: float, low: float, high: float) -> float:
    """The estimate moved into its own interval (post-processing of released counts): a ratio of noisy counts can
    fall where no population value lies (a share of −0.02, a mean below every value the column holds), and the
    interval, clamped to what the column can hold, already says so."""
    if not math.isfinite(estimate) or not low <= high:
        return estimate
    return min(max(estimate, low), high)


def _t_interval(x: np.ndarray, level: float, scale: float = 1.0) -> tuple[float, float, float]:
    from scipy import stats

    x = x[np.isfinite(x)]
    m = len(x)
    if m == 0:
        return math.nan, math.nan, math.nan
    est = float(x.mean())
    if m < 2:
        return est * scale, math.nan, math.nan
    half = float(stats.t.ppf(0.5 + level / 2, m - 1)) * float(x.std(ddof=1)) / math.sqrt(m)
    return est * scale, (est - half) * scale, (est + half) * scale


def mean(rel: LoadedRelease, column: str, *, level: float = 0.95, rng: np.random.Generator,
         n_sim: int = N_SIM_INTERVAL) -> IntervalResult:
    """Mean of a numeric column (missing values left out) with an interval covering the population
    mean with probability ≥ ``level`` under noise, sampling and the worst case inside the bins."""
    col = _numeric(rel, column, "mean")
    lv, n_sim = check_level(level), _check_sims(n_sim, 100)
    table = rel.table((column,))
    a, b = value_ranges(col)
    pad = np.zeros(col.n_cells - col.bins)
    den = np.concatenate([np.ones(col.bins), pad])
    wa, wb = np.concatenate([a, pad]), np.concatenate([b, pad])
    y = table.counts.ravel()
    d = float(y @ den)
    est = float(y @ ((wa + wb) / 2)) / d if d > 0 else math.nan
    low, high = _ratio_bounds(table, wa, wb, den, 1 - lv, n_sim, rng)
    low, high = max(low, float(a.min())), min(high, float(b.max()))
    est = _inside(est, low, high)
    naive = _t_interval(rel.synthetic[column].to_numpy(dtype=np.float64), lv)
    return IntervalResult("mean", column, None, lv, est, low, high, *naive, noise=table.describe(),
                          binning=_binning_text(a, b), n_sim=n_sim)


def total(rel: LoadedRelease, column: str, *, level: float = 0.95, rng: np.random.Generator,
          n_sim: int = N_SIM_INTERVAL) -> IntervalResult:
    """Total of a numeric column (missing values left out); the interval covers the expected total of the
    process that generated the table (rows arriving as a Poisson process), hence the table's own total too."""
    col = _numeric(rel, column, "total")
    lv, n_sim = check_level(level), _check_sims(n_sim, 100)
    table = rel.table((column,))
    a, b = value_ranges(col)
    pad = np.zeros(col.n_cells - col.bins)
    wa, wb = np.concatenate([a, pad]), np.concatenate([b, pad])
    y = table.counts.ravel()
    alpha = 1 - lv
    sims, truth = _simulated_world(table, n_sim, rng, "poisson")
    none = np.zeros(n_sim, dtype=bool)
    _, hi = _pivot_quantiles(sims @ wa - truth @ wa, none, alpha)
    lo, _ = _pivot_quantiles(sims @ wb - truth @ wb, none, alpha)
    low, high = float(y @ wa) - hi, float(y @ wb) - lo
    # a total of values in [A, B] is at least min(0, A)·rows and at most max(0, B)·rows: no tighter bound is
    # known without the row count, so only the sign constraints are applied (to the estimate too: a negative
    # total of non-negative values outside its own interval is noise, not information)
    estimate = float(y @ ((wa + wb) / 2))
    if a.min() >= 0:
        low, estimate = max(low, 0.0), max(estimate, 0.0)
    if b.max() <= 0:
        high, estimate = min(high, 0.0), min(estimate, 0.0)
    estimate = _inside(estimate, low, high)
    x = rel.synthetic[column].to_numpy(dtype=np.float64)
    x = x[np.isfinite(x)]
    naive = _t_interval(x, lv, scale=len(x)) if len(x) else (0.0, math.nan, math.nan)
    return IntervalResult("total", column, None, lv, estimate, low, high, *naive,
                          noise=table.describe(), binning=_binning_text(a, b), n_sim=n_sim)


def proportion(rel: LoadedRelease, column: str, value: str, *, level: float = 0.95, rng: np.random.Generator,
               n_sim: int = N_SIM_INTERVAL) -> IntervalResult:
    """Share of rows whose ``column`` is ``value`` (a category, a bin label of a numeric column, or
    ``(missing)``), every row in the denominator, with an interval for the population share."""
    from scipy import stats

    col = rel.column(column)
    lv, n_sim = check_level(level), _check_sims(n_sim, 100)
    labels = col.labels()
    value = str(value)
    if value not in labels:
        shown = ", ".join(labels[:12]) + (f", … ({len(labels)} in all)" if len(labels) > 12 else "")
        raise InputError(f"{value!r} is not a category of column {column!r} in the release's schema; its values are {shown}.")
    table = rel.table((column,))
    j = labels.index(value)
    w = np.zeros(len(labels))
    w[j] = 1.0
    den = np.ones(len(labels))
    y = table.counts.ravel()
    d = float(y.sum())
    est = float(y[j]) / d if d > 0 else math.nan
    low, high = _ratio_bounds(table, w, w, den, 1 - lv, n_sim, rng)
    low, high = max(low, 0.0), min(high, 1.0)
    est = _inside(est, low, high)
    s = rel.synthetic[column]
    m = len(s)
    if m:
        if isinstance(col, NumericColumn):
            hit = _bin_of(s.to_numpy(dtype=np.float64), col) == j
        else:
            hit = (s.isna() if value == MISSING_LABEL else s == value).fillna(False).to_numpy(dtype=bool)
        p = float(hit.mean())
        half = float(stats.norm.ppf(0.5 + lv / 2)) * math.sqrt(p * (1 - p) / m)
        naive = (p, p - half, p + half)
    else:
        naive = (math.nan, math.nan, math.nan)
    return IntervalResult("proportion", column, value, lv, est, low, high, *naive, noise=table.describe(),
                          binning="none (a share of one cell)", n_sim=n_sim)


def _bin_of(x: np.ndarray, col: NumericColumn) -> np.ndarray:
    """Cell index of numeric values (the missing cell for NaN), as the release encodes them."""
    e = col.edges()
    idx = np.clip(np.searchsorted(e, np.clip(x, col.lower, col.upper), side="right") - 1, 0, col.bins - 1)
    return np.where(np.isnan(x), col.bins, idx)


def _binning_text(a: np.ndarray, b: np.ndarray) -> str:
    width = float((b - a).max())
    if width == 0:
        return "none: each bin holds a single value"
    return (f"values are known only to their bins (up to {width:g} wide); the interval is widened to cover any"
            " values inside them")


# ---------------------------------------------------------------------------------------------
# Independence
# ---------------------------------------------------------------------------------------------


def _chi_stat(y: np.ndarray, v: float) -> np.ndarray:
    """Pearson's statistic with the cell noise variance added to each expected count; y (..., r, c).

    The expected counts come from the unclamped noisy margins, so the residuals are the exact
    projection of the table off independence (the noise's share of them has a law that depends
    on nothing unknown); only the denominators clamp the expected counts at 0."""
    rows = y.sum(axis=-1, keepdims=True)
    cols = y.sum(axis=-2, keepdims=True)
    n = rows.sum(axis=-2, keepdims=True)
    expected = rows * cols / np.where(n > 0, n, 1.0)
    expected = np.where(n > 0, expected, 0.0)
    return ((y - expected) ** 2 / (np.clip(expected, 0.0, None) + v)).sum(axis=(-2, -1))


def independence(rel: LoadedRelease, a: str, b: str, *, rng: np.random.Generator,
                 n_sim: int = N_SIM_TEST) -> IndependenceResult:
    """Test that columns ``a`` and ``b`` are independent, from their released noisy two-way table.

    The p-value is (1 + #{T* ≥ T})/(1 + n_sim) over releases simulated under independence with the
    released noise law (module docstring); the naive p-value is the chi-squared test on the
    synthetic rows (cells with no synthetic row left out)."""
    if a == b:
        raise InputError(f"Test independence of two different columns, got {a!r} twice.")
    n_sim = _check_sims(n_sim, 19)
    table = rel.table((a, b))
    table.check_simulable(n_sim)
    y = table.counts
    v = max(table.variance, 1e-12)
    stat = float(_chi_stat(y, v))
    pos = np.clip(y, 0.0, None)
    n = int(round(max(float(y.sum()), 0.0)))
    r, c = y.shape
    if pos.sum() > 0:
        p = np.outer(pos.sum(axis=1), pos.sum(axis=0)).ravel() / pos.sum() ** 2
    else:
        p = np.full(r * c, 1.0 / (r * c))
    sims = rng.multinomial(n, p, size=n_sim).reshape(n_sim, r, c) + table.noise(n_sim, rng=rng)
    null = _chi_stat(sims, v)
    p_value = (1.0 + float((null >= stat).sum())) / (1.0 + n_sim)
    naive_stat, naive_p = _naive_chi2(rel, a, b)
    return IndependenceResult((a, b), stat, p_value, naive_stat, naive_p, n_sim, table.describe())


def _naive_chi2(rel: LoadedRelease, a: str, b: str) -> tuple[float, float]:
    from scipy import stats

    ca, cb = _codes_of(rel, a), _codes_of(rel, b)
    na, nb = rel.column(a).n_cells + 1, rel.column(b).n_cells + 1
    ct = np.bincount(ca * nb + cb, minlength=na * nb).reshape(na, nb).astype(np.float64)
    ct = ct[ct.sum(axis=1) > 0][:, ct.sum(axis=0) > 0]
    if min(ct.shape) < 2:
        return 0.0, 1.0
    res = stats.chi2_contingency(ct, correction=False)
    return float(res.statistic), float(res.pvalue)


def _codes_of(rel: LoadedRelease, name: str) -> np.ndarray:
    """The synthetic column as cell codes (bins for numeric columns; NA and unknown text → the last code)."""
    col = rel.column(name)
    s = rel.synthetic[name]
    if isinstance(col, NumericColumn):
        return _bin_of(s.to_numpy(dtype=np.float64), col)
    codes = pd.Categorical(s.astype(object), categories=list(col.categories)).codes.astype(np.int64)
    return np.where(codes < 0, len(col.categories), codes)


# ---------------------------------------------------------------------------------------------
# Regression
# ---------------------------------------------------------------------------------------------


def _wls(design: np.ndarray, target: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted least squares for each row of ``weights`` (…, cells) → (…, terms); NaN unless Σw·x·xᵀ is
    positive definite (noisy weights can make it indefinite: no least-squares fit exists then)."""
    xtwx = np.einsum("...c,ci,cj->...ij", weights, design, design)
    xtwy = np.einsum("...c,ci,c->...i", weights, design, target)
    out = np.full(weights.shape[:-1] + (design.shape[1],), np.nan)
    ev = np.linalg.eigvalsh(xtwx)
    ok = ev[..., 0] > 1e-9 * np.maximum(np.abs(ev[..., -1]), 1e-300)
    if np.any(ok):
        out[ok] = np.linalg.solve(xtwx[ok], xtwy[ok][..., None])[..., 0]
    return out


def regression(rel: LoadedRelease, response: str, predictors: Sequence[str], *, level: float = 0.95,
               rng: np.random.Generator, n_sim: int = N_SIM_REGRESSION) -> RegressionResult:
    """Least squares of ``response`` on numeric ``predictors`` from the released noisy table (post-processing).

    Cells carry their values' midpoints (grid-aware, :func:`value_ranges`) and weights ĉ (noisy sufficient statistics);
    intervals from the parametric bootstrap of the noisy counts (module docstring). Missing cells
    are left out. The naive fit is OLS on the synthetic rows with classical standard errors."""
    from scipy import stats

    preds = tuple(predictors)
    if not preds:
        raise InputError("Name at least one predictor column.")
    lv, n_sim = check_level(level), _check_sims(n_sim, 100)
    cols = (*preds, response)
    specs = [_numeric(rel, c, "regression") for c in cols]
    table = rel.table(cols)
    sl = tuple(slice(0, s.bins) for s in specs)
    y = table.counts[sl]
    grids = np.meshgrid(*[(lambda r: (r[0] + r[1]) / 2)(value_ranges(s)) for s in specs], indexing="ij")
    design = np.column_stack([np.ones(y.size)] + [g.ravel() for g in grids[:-1]])
    target = grids[-1].ravel()
    # the noisy counts themselves, negative ones included, as weights: the sums Σĉ·x·xᵀ and Σĉ·x·y are then
    # unbiased noisy sufficient statistics (Kifer's notes, "Linear Regression"); clamping would bias them
    beta = _wls(design, target, y.ravel())
    # the bootstrap world: counts drawn from the clamped noisy table, plus noise of the released law
    sub = NoisyTable(cols, y, table.parts)
    sims, truth = _simulated_world(sub, n_sim, rng, "multinomial")
    beta_world = _wls(design, target, truth)
    draws = _wls(design, target, sims) - beta_world
    alpha = 1 - lv
    bad = ~np.isfinite(draws)
    low, high = [], []
    for k in range(design.shape[1]):
        lo, hi = _pivot_quantiles(draws[:, k], bad[:, k], alpha)
        low.append(float(beta[k] - hi))
        high.append(float(beta[k] - lo))
    # naive OLS on the synthetic rows
    s = rel.synthetic[list(cols)].dropna()
    nx = np.column_stack([np.ones(len(s))] + [s[c].to_numpy(dtype=np.float64) for c in preds])
    ny = s[response].to_numpy(dtype=np.float64)
    p = nx.shape[1]
    if len(s) > p and np.linalg.matrix_rank(nx) == p:
        nb, *_ = np.linalg.lstsq(nx, ny, rcond=None)
        resid = ny - nx @ nb
        s2 = float(resid @ resid) / (len(s) - p)
        se = np.sqrt(np.diag(np.linalg.inv(nx.T @ nx)) * s2)
        t = float(stats.t.ppf(0.5 + lv / 2, len(s) - p))
        naive = (tuple(map(float, nb)), tuple(map(float, nb - t * se)), tuple(map(float, nb + t * se)))
    else:
        naive = ((math.nan,) * p,) * 3
    return RegressionResult(response, preds, lv, ("intercept", *preds), tuple(map(float, beta)), tuple(low),
                            tuple(high), *naive, n_sim=n_sim)


def analyse(rel: LoadedRelease, statistic: str, args: Sequence[str], *, level: float = 0.95,
            rng: np.random.Generator | None = None, n_sim: int | None = None,
            ) -> IntervalResult | IndependenceResult | RegressionResult:
    """One entry point for the CLI and the dashboard: ``statistic`` with its column arguments. ``rng`` drives the
    simulations of the published noise laws (post-processing; a fresh generator when None)."""
    rng = rng if rng is not None else np.random.default_rng()
    want = {"mean": 1, "total": 1, "proportion": 2, "independence": 2}
    if statistic in want and len(args) != want[statistic]:
        names = {"mean": "COLUMN", "total": "COLUMN", "proportion": "COLUMN VALUE", "independence": "COLUMN_A COLUMN_B"}
        raise InputError(f"{statistic} takes {names[statistic]}, got {len(args)} argument(s).")
    extra = {} if n_sim is None else {"n_sim": n_sim}
    if statistic == "mean":
        return mean(rel, args[0], level=level, rng=rng, **extra)
    if statistic == "total":
        return total(rel, args[0], level=level, rng=rng, **extra)
    if statistic == "proportion":
        return proportion(rel, args[0], args[1], level=level, rng=rng, **extra)
    if statistic == "independence":
        return independence(rel, args[0], args[1], rng=rng, **extra)
    if statistic == "regression":
        if len(args) < 2:
            raise InputError("regression takes RESPONSE PREDICTOR [PREDICTOR …].")
        return regression(rel, args[0], args[1:], level=level, rng=rng, **extra)
    raise InputError(f"Unknown statistic {statistic!r}; use mean, total, proportion, independence or regression.")


def summary_lines(result: IntervalResult | IndependenceResult | RegressionResult) -> list[str]:
    """A few readable lines for the command line."""
    if isinstance(result, IntervalResult):
        what = f"{result.statistic} of {result.column}" + (f" = {result.value!r}" if result.value is not None else "")
        pct = f"{humanize.level(result.level)}"
        return [
            f"{what}: {_num(result.estimate)}  ({pct} interval {_num(result.low)} to {_num(result.high)}; accounts for"
            " the DP noise, sampling and binning)",
            f"  naive, from the synthetic rows as if real: {_num(result.naive_estimate)}  ({_num(result.naive_low)} to"
            f" {_num(result.naive_high)}) — does not account for the noise",
            f"  noise: {result.noise}",
            f"  binning: {result.binning}",
        ]
    if isinstance(result, IndependenceResult):
        a, b = result.columns
        return [
            f"independence of {a} and {b}: statistic {result.statistic:.4g}, p-value {result.p_value:.4g}"
            f" ({result.n_sim} simulated releases under independence with the released noise)",
            f"  naive chi-squared on the synthetic rows: statistic {result.naive_statistic:.4g}, p-value"
            f" {result.naive_p_value:.4g} — too small when noise is large (false discoveries)",
            f"  noise: {result.noise}",
        ]
    lines = [f"regression of {result.response} on {', '.join(result.predictors)} ({humanize.level(result.level)} intervals):"]
    for k, term in enumerate(result.terms):
        lines.append(f"  {term}: {_num(result.estimate[k])} ({_num(result.low[k])} to {_num(result.high[k])});"
                     f" naive {_num(result.naive_estimate[k])} ({_num(result.naive_low[k])} to {_num(result.naive_high[k])})")
    lines.append(f"  binning: {result.binning}")
    return lines


def _num(x: float) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:.6g}"
