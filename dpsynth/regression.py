"""Differentially private linear regression by noisy sufficient statistics (its own ε, its own card).

Kifer's notes on differential privacy ("Example 2: Linear Regression"): with every ``x`` and ``y``
bounded, the sufficient statistics XᵀX and Xᵀy have bounded sensitivity; add noise to them once,
release them, and solve the normal equations as post-processing. Here:

1. Each chosen column is clamped to its public schema bounds [L, U], centred and scaled to
   u = (v − (L+U)/2) / ((U−L)/2) ∈ [−1, 1], and put on a fixed-point grid a = round(G·u), |a| ≤ G
   (G = :data:`GRID`); the intercept is a₀ = G. Centring first makes the noise on the moments small
   relative to the spread of the data, whatever the bounds' offset.
2. The integer statistic T = Σ_rows a·aᵀ (upper triangle: n, the sums, XᵀX, Xᵀy, yᵀy at once) has
   exact integer sensitivities from :func:`dpsynth.neighbours.moment_matrix_sensitivity`.
3. Exact discrete Laplace noise (ε-DP, scale Δ₁/ε) or exact discrete Gaussian noise ((ε, δ)-DP via
   zCDP, :func:`dpsynth.mechanisms.gaussian_sigma2_for`) is added to every entry, the count included
   (the row count is never released exactly). The ledger is charged before T is computed.
4. Post-processing: the normal equations on the noisy moments, with a ridge λ only when the noisy
   XᵀX is not comfortably positive definite (λ brings its smallest eigenvalue up to the noise level);
   coefficients mapped back to data units; an approximate interval per coefficient by a parametric
   bootstrap that redraws both the sampling error of y given X and the DP noise from its known law
   (in the spirit of Ferrando, Wang & Sheldon 2022, "Parametric bootstrap for differentially private
   confidence intervals").

Missing values: refused (naming the column and row) by default; ``nan_policy='drop'`` drops the rows
with a missing value in a chosen column (each row's fate depends on that row alone, so the
sensitivities hold; under replace-one the count entry's sensitivity is then counted too).
"""

from __future__ import annotations

import math
import platform
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any, Literal

import numpy as np
import pandas as pd

from dpsynth import noise
from dpsynth.accounting import Ledger, PrivacyBudget
from dpsynth.errors import InputError
from dpsynth.inference import check_level
from dpsynth.mechanisms import check_delta, check_epsilon, gaussian_sigma2_for, laplace_scale
from dpsynth.neighbours import Neighbours, moment_matrix_sensitivity
from dpsynth.schema import NumericColumn, Schema

NanPolicy = Literal["error", "drop"]

#: Fixed-point units per half-range of a scaled column: values are kept to 1/4096 of half their range.
GRID = 1 << 12
#: Largest noise parameter the exact samplers take (discrete Laplace scale; σ for the Gaussian).
_MAX_SCALE = 1 << 40
BOOTSTRAP_DRAWS = 2000


@dataclass(frozen=True)
class Regression:
    """A DP linear regression: coefficients in data units, approximate intervals, and the card.

    ``card`` holds everything released (the noisy moments, the coefficients, the intervals);
    ``notes`` is for the curator only (what was clamped or dropped), never released.
    """

    terms: list[str]
    coefficients: np.ndarray
    low: np.ndarray
    high: np.ndarray
    level: float
    ridge: float
    noisy_n: float
    residual_sd: float
    card: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    def table(self) -> pd.DataFrame:
        """One row per term: coefficient and interval."""
        return pd.DataFrame({"term": self.terms, "coefficient": self.coefficients, "low": self.low, "high": self.high})

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able summary (what the CLI prints with --json)."""
        return {
            "terms": list(self.terms),
            "coefficients": {t: float(c) for t, c in zip(self.terms, self.coefficients, strict=True)},
            "intervals": {t: [float(lo), float(hi)] for t, lo, hi in zip(self.terms, self.low, self.high, strict=True)},
            "level": self.level,
            "noisy_n": self.noisy_n,
            "residual_sd": self.residual_sd,
            "ridge": self.ridge,
            "epsilon": self.card["privacy"]["epsilon"],
            "delta": self.card["privacy"]["delta"],
        }


@dataclass(frozen=True)
class _Plan:
    """Everything decided from public inputs before the data is read or the budget charged."""

    columns: list[NumericColumn]  # x columns, then y
    neighbours: Neighbours
    l1: int
    l2_squared: int
    kind: str
    scale: Fraction | None  # discrete Laplace scale (grid units²)
    sigma2: Fraction | None  # discrete Gaussian σ² (grid units⁴)

    @property
    def noise_sd(self) -> float:
        """Standard deviation of the noise on one entry, in grid units² (continuous approximation)."""
        return math.sqrt(2.0) * float(self.scale) if self.scale is not None else math.sqrt(float(self.sigma2))


def dp_linear_regression(
    df: pd.DataFrame,
    schema: Schema,
    *,
    y: str,
    x: list[str],
    epsilon: float,
    delta: float = 0.0,
    neighbours: Neighbours | str = Neighbours.ADD_REMOVE,
    mechanism: str = "auto",
    id_column: str | None = None,
    max_contributions: int = 1,
    nan_policy: NanPolicy = "error",
    level: float = 0.95,
    bootstrap: int = BOOTSTRAP_DRAWS,
    rng: np.random.Generator | None = None,
    seed: int | None = None,
    ledger: Ledger | None = None,
    dataset_id: str | None = None,
    dataset_label: str = "",
    budget: PrivacyBudget | None = None,
    purpose: str = "linear regression (noisy sufficient statistics)",
    created: str | None = None,
    accept_data_derived: bool = False,
) -> Regression:
    """Fit y ≈ β₀ + Σ βⱼ xⱼ with (ε, δ)-DP for the chosen relation and unit (one row, or a person of ≤ k rows).

    Guarantee: the released noisy moments are ε-DP (discrete Laplace, δ = 0 or ``mechanism='laplace'``)
    or (ε, δ)-DP (discrete Gaussian through ρ-zCDP); the coefficients, intervals and card are
    post-processing of them and public inputs. Everything refusable is refused before the ledger is
    charged; with a ``ledger`` the spend is recorded before the data's moments are computed. Bounds of the
    target or a feature read off the data are refused unless ``accept_data_derived`` (then the card says they
    are not private).
    """
    from dpsynth.provenance import refuse_data_derived

    eps, dlt = check_epsilon(epsilon), check_delta(delta)
    plan = plan_regression(schema, y=y, x=x, epsilon=eps, delta=dlt, neighbours=neighbours, mechanism=mechanism,
                           max_contributions=max_contributions, nan_policy=nan_policy)
    refuse_data_derived(Schema(tuple(plan.columns)), accept=accept_data_derived)
    level = check_level(level)  # the intervals' rule (a basic bootstrap interval at 1% left out its own estimate)
    if isinstance(bootstrap, bool) or int(bootstrap) != bootstrap or not 100 <= bootstrap <= 100_000:
        raise InputError(f"The number of bootstrap draws must be a whole number from 100 to 100,000, got {bootstrap!r}.")
    if rng is not None and seed is not None:
        raise InputError("Pass either a generator or a seed, not both.")
    if rng is None:
        rng = noise.seeded_rng(seed) if seed is not None else noise.secure_rng()
    secure = noise.is_secure(rng)
    if not isinstance(df, pd.DataFrame) or len(df.columns) == 0:
        raise InputError("The table has no columns.")
    names = [c.name for c in plan.columns]
    if id_column is not None and id_column in names:
        raise InputError(f"The ID column {id_column!r} cannot also be the target or a feature.")
    absent = [c for c in names + ([id_column] if id_column else []) if c not in df.columns]
    if absent:
        raise InputError(f"The data has no column(s) {', '.join(map(repr, absent))}.")

    from dpsynth.neighbours import bound_contributions

    data, unit = bound_contributions(df[names + ([id_column] if id_column else [])], id_column, max_contributions,
                                     rng=rng)
    grid, notes = _to_grid(data[names], plan.columns, nan_policy)  # refuses bad values before the charge

    if ledger is not None:
        from dpsynth.pipeline import DEFAULT_TOTAL_BUDGET, dataset_identity

        ds = dataset_id or dataset_identity(df)
        ledger.register(ds, budget or DEFAULT_TOTAL_BUDGET, label=dataset_label)
        ledger.charge(ds, PrivacyBudget(eps, dlt), mechanism=f"regression: {_mechanism_name(plan)}", purpose=purpose)

    exact = _moment_matrix(grid)
    iu = np.triu_indices(exact.shape[0])
    noisy_upper = exact[iu] + _draw(plan, iu[0].size, rng)
    noisy = np.zeros_like(exact)
    noisy[iu] = noisy_upper
    noisy = noisy + np.triu(noisy, 1).T
    del exact
    return _post_process(noisy, plan, eps, dlt, float(level), int(bootstrap), rng, unit, secure, seed, created,
                         dataset_label, schema, notes)


def plan_regression(
    schema: Schema, *, y: str, x: list[str], epsilon: float, delta: float = 0.0,
    neighbours: Neighbours | str = Neighbours.ADD_REMOVE, mechanism: str = "auto", max_contributions: int = 1,
    nan_policy: str = "error",
) -> _Plan:
    """Check the request against the public schema and calibrate the noise (no data involved)."""
    eps, dlt = check_epsilon(epsilon), check_delta(delta)
    rel = Neighbours.parse(neighbours)
    if nan_policy not in ("error", "drop"):
        raise InputError(f"Unknown missing-value policy {nan_policy!r}; use error or drop.")
    xs = [str(c).strip() for c in (x if isinstance(x, list | tuple) else [x])]
    if not xs or any(not c for c in xs):
        raise InputError("Name at least one feature column (x).")
    if len(set(xs)) != len(xs):
        raise InputError(f"A feature column is named twice: {', '.join(xs)}.")
    if y in xs:
        raise InputError(f"Column {y!r} is both the target and a feature.")
    cols = []
    for name in xs + [y]:
        try:
            col = schema.column(name)
        except (KeyError, InputError):
            raise InputError(f"Column {name!r} is not in the schema, so it has no public bounds.") from None
        if not isinstance(col, NumericColumn):
            raise InputError(f"Column {name!r} is categorical; a regression needs numeric columns with public bounds.")
        cols.append(col)
    kind = (mechanism or "auto").lower()
    if kind not in ("auto", "laplace", "gaussian"):
        raise InputError(f"Unknown mechanism {mechanism!r}; use laplace, gaussian or auto.")
    if kind == "auto":
        kind = "gaussian" if dlt > 0 else "laplace"
    if kind == "gaussian" and dlt <= 0:
        raise InputError("The Gaussian mechanism needs δ > 0; use the Laplace mechanism for δ = 0.")
    l1, l2sq = moment_matrix_sensitivity(rel, len(cols), GRID * GRID, max_contributions, rows_may_drop=nan_policy == "drop")
    scale = sigma2 = None
    if kind == "laplace":
        scale = laplace_scale(l1, eps)
        too_big = scale > _MAX_SCALE
    else:
        sigma2 = gaussian_sigma2_for(l2sq, eps, dlt)
        too_big = sigma2 > _MAX_SCALE * _MAX_SCALE
    if too_big:
        raise InputError(f"ε = {eps:g} is too small for a regression on {len(cols)} columns (the noise would exceed the"
                         " exact sampler's range); use a larger ε or fewer columns.")
    return _Plan(columns=cols, neighbours=rel, l1=l1, l2_squared=l2sq, kind=kind, scale=scale, sigma2=sigma2)


def _mechanism_name(plan: _Plan) -> str:
    return "discrete Laplace (geometric)" if plan.kind == "laplace" else "discrete Gaussian"


def _to_grid(data: pd.DataFrame, cols: list[NumericColumn], nan_policy: str) -> tuple[np.ndarray, list[str]]:
    """Rows × (1 + columns) int64 grid values: G, then round(G·u) of each clamped, scaled column."""
    from dpsynth.binning import _to_float

    values = np.empty((len(data), len(cols)), dtype=np.float64)
    empty = np.zeros(len(data), dtype=bool)
    notes = []
    for j, col in enumerate(cols):
        v, e = _to_float(data[col.name], col.name)  # refuses text that is not a number, and infinities
        if e.any() and nan_policy == "error":
            first = int(np.flatnonzero(e)[0]) + 1
            raise InputError(f"Column {col.name!r} has {int(e.sum()):,} empty value(s) (first at row {first}); fill them"
                             " or drop those rows (nan_policy 'drop', --nan-policy drop).")
        low, high = int((v < col.lower).sum()), int((v > col.upper).sum())
        if low or high:
            notes.append(f"{low + high:,} value(s) of {col.name!r} were outside [{col.lower:g}, {col.upper:g}] and were clamped.")
        values[:, j] = np.clip(v, col.lower, col.upper)
        empty |= e
    if empty.any():
        notes.append(f"{int(empty.sum()):,} row(s) with a missing value were dropped.")
        values = values[~empty]
    centre, half = _centre_half(cols)
    grid = np.empty((len(values), len(cols) + 1), dtype=np.int64)
    grid[:, 0] = GRID
    grid[:, 1:] = np.clip(np.rint((values - centre) / half * GRID), -GRID, GRID).astype(np.int64)
    return grid, notes


def _centre_half(cols: list[NumericColumn]) -> tuple[np.ndarray, np.ndarray]:
    lo = np.array([c.lower for c in cols], dtype=np.float64)
    hi = np.array([c.upper for c in cols], dtype=np.float64)
    return (lo + hi) / 2.0, (hi - lo) / 2.0


def _moment_matrix(grid: np.ndarray) -> np.ndarray:
    """Exact Σ_rows a·aᵀ in int64 (|entries| ≤ rows·G², exact for up to 2^39 rows)."""
    if len(grid) >= 1 << 39:
        raise InputError("Too many rows for exact 64-bit moments.")
    return grid.T @ grid


def _draw(plan: _Plan, size: int | tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    if plan.kind == "laplace":
        return noise.discrete_laplace(plan.scale, size, rng=rng)
    return noise.discrete_gaussian(plan.sigma2, size, rng=rng)


# ---------------------------------------------------------------- post-processing (no data, no ε)


def _solve(xx: np.ndarray, xy: np.ndarray, floor: float) -> tuple[np.ndarray, np.ndarray]:
    """Normal equations with a ridge λ = max(0, floor − smallest eigenvalue), batched over leading axes."""
    lam = np.maximum(0.0, floor - np.linalg.eigvalsh(xx)[..., 0])
    eye = np.eye(xx.shape[-1])
    beta = np.linalg.solve(xx + lam[..., None, None] * eye, xy[..., None])[..., 0]
    return beta, lam


def _to_data_units(b: np.ndarray, cols: list[NumericColumn]) -> np.ndarray:
    """Map coefficients of u_y on (1, u_x) to y on (1, x): slopes h_y·b_j/h_j, intercept c_y + h_y(b₀ − Σ b_j c_j/h_j)."""
    centre, half = _centre_half(cols)
    cx, hx, cy, hy = centre[:-1], half[:-1], centre[-1], half[-1]
    slopes = hy * b[..., 1:] / hx
    intercept = cy + hy * (b[..., 0] - (b[..., 1:] * cx / hx).sum(axis=-1))
    return np.concatenate([intercept[..., None], slopes], axis=-1)


def _post_process(
    noisy: np.ndarray, plan: _Plan, eps: float, dlt: float, level: float, draws: int, rng: np.random.Generator,
    unit: dict[str, Any], secure: bool, seed: int | None, created: str | None, label: str, schema: Schema,
    notes: list[str],
) -> Regression:
    b2 = float(GRID) ** 2
    s = noisy.astype(np.float64) / b2  # moments of u (intercept 1): n, sums, cross-products
    p1 = s.shape[0] - 1  # intercept + features
    xx, xy, yy, n_hat = s[:p1, :p1], s[:p1, p1], s[p1, p1], s[0, 0]
    sd = plan.noise_sd / b2
    floor = sd * math.sqrt(p1)  # the noise matrix's typical spectral size: below it XᵀX is noise-dominated
    beta, lam = _solve(xx, xy, floor)
    dof = max(n_hat - p1, 1.0)
    rss = yy - 2.0 * beta @ xy + beta @ xx @ beta
    # u_y ∈ [−1, 1]: its variance is at most 1; below the noise on yᵀy the residual sum cannot be told
    # from 0, so take it at that noise level (conservative; the sampling error is then small anyway)
    sigma2 = float(np.clip(max(rss, sd) / dof, 0.0, 1.0))

    # parametric bootstrap: the noisy XᵀX (made positive definite) as the design, y | X from the fitted
    # model, then fresh noise of the released law on every entry, solved by the same rule
    w, v = np.linalg.eigh(xx)
    design = (v * np.maximum(w, floor)) @ v.T
    chol = np.linalg.cholesky(sigma2 * design + 1e-12 * np.eye(p1))
    xy_star = design @ beta + rng.standard_normal((draws, p1)) @ chol.T
    iu = np.triu_indices(s.shape[0])
    z = np.zeros((draws,) + s.shape)
    z[:, iu[0], iu[1]] = _draw(plan, (draws, iu[0].size), rng) / b2
    z = z + np.triu(z, 1).transpose(0, 2, 1)
    beta_star, _ = _solve(design + z[:, :p1, :p1], xy_star + z[:, :p1, p1], floor)

    coef = _to_data_units(beta, plan.columns)
    boot = _to_data_units(beta_star, plan.columns)
    a = (1.0 - level) / 2.0
    q_lo, q_hi = np.quantile(boot, [a, 1.0 - a], axis=0)
    low, high = 2.0 * coef - q_hi, 2.0 * coef - q_lo  # basic (pivotal) bootstrap: corrects the noise's bias
    terms = ["intercept"] + [c.name for c in plan.columns[:-1]]
    resid_sd = math.sqrt(sigma2) * float(plan.columns[-1].upper - plan.columns[-1].lower) / 2.0
    card = _card(plan, eps, dlt, level, draws, noisy, terms, coef, low, high, float(lam), n_hat, resid_sd, unit,
                 secure, seed, created, label, schema)
    return Regression(terms=terms, coefficients=coef, low=low, high=high, level=level, ridge=float(lam),
                      noisy_n=float(n_hat), residual_sd=resid_sd, card=card, notes=notes)


def _card(
    plan: _Plan, eps: float, dlt: float, level: float, draws: int, noisy: np.ndarray, terms: list[str], coef: np.ndarray,
    low: np.ndarray, high: np.ndarray, lam: float, n_hat: float, resid_sd: float, unit: dict[str, Any], secure: bool,
    seed: int | None, created: str | None, label: str, schema: Schema,
) -> dict[str, Any]:
    import scipy

    from dpsynth import __version__

    cols = plan.columns
    c, d = len(cols), len(cols) + 1
    rel = plan.neighbours
    k = unit.get("max_rows_per_person", 1)
    if rel is Neighbours.ADD_REMOVE:
        derivation = (f"add-remove: each of the {d * (d + 1) // 2} entries of the upper triangle moves by at most G² per"
                      f" row; L1 = G²·D(D+1)/2·k, L2 = G²·√(D(D+1)/2)·k with D = {d}, k = {k}")
    else:
        derivation = (f"replace-one: the count entry is fixed (unless rows with missing values are dropped), each of the"
                      f" {c} other diagonal entries moves by at most G², each of the {d * (d - 1) // 2} off-diagonal"
                      f" entries by at most 2G² per row; times k = {k} rows")
    mech: dict[str, Any] = {"mechanism": _mechanism_name(plan), "sampler": "exact integer sampler (Canonne, Kamath &"
                            " Steinke 2020)", "noise_std_grid_units": plan.noise_sd,
                            "noise_std_scaled_units": plan.noise_sd / GRID**2}
    if plan.kind == "laplace":
        mech.update(guarantee=f"{eps:g}-DP (pure)", scale=str(plan.scale))
    else:
        mech.update(guarantee=f"({eps:g}, {dlt:g})-DP through ρ-zCDP, ρ = Δ₂²/(2σ²) (CKS20 Thm 4, Cor 13)",
                    sigma2=str(plan.sigma2), sigma=math.sqrt(float(plan.sigma2)))
    warnings = []
    derived = [col.name for col in cols if col.provenance == "data"]
    if derived:
        warnings.append("NOT PRIVATE: the bounds of " + ", ".join(map(repr, derived)) +
                        " were taken from the data without a DP mechanism and published with the curator's explicit"
                        " acceptance; they can reveal individual values.")
    if not secure:
        warnings.append("Reproducible (seeded) noise: for tests and demonstrations only, NOT for publication.")
    if lam > 0:
        warnings.append(f"The noisy XᵀX was not comfortably positive definite: a ridge λ = {lam:.4g} (scaled units) was"
                        " added before solving (post-processing). Coefficients are shrunk; more ε or more rows help.")
    centre, half = _centre_half(cols)
    return {
        "format": "dpsynth-regression-card/1",
        "release_id": uuid.uuid4().hex if secure else f"seeded-{seed}",
        "created": created or datetime.now(UTC).isoformat(timespec="seconds"),
        "dataset": label,
        "query": {"model": f"{cols[-1].name} ~ 1 + " + " + ".join(col.name for col in cols[:-1]),
                  "method": "noisy sufficient statistics (Kifer's notes on differential privacy, 'Linear Regression')"},
        "privacy": {
            "epsilon": eps, "delta": dlt,
            "definition": "approximate (ε, δ)-DP" if dlt > 0 else "pure ε-DP",
            "neighbours": rel.value, "neighbours_meaning": rel.describe(), "unit_of_protection": unit,
            "composition": "one measurement of all the moments at once; everything after the noise is post-processing",
        },
        "sensitivity": {"grid": GRID, "entry_bound": "G² (|a_i·a_j| ≤ G², a₀ = G for the intercept)",
                        "l1": plan.l1, "l2": math.sqrt(plan.l2_squared), "l2_squared": plan.l2_squared,
                        "derivation": derivation, "source": "dpsynth.neighbours.moment_matrix_sensitivity"},
        "mechanism": mech,
        "released": {
            "statistic": "T = Σ_rows a·aᵀ with a = (G, round(G·u_1), …, round(G·u_y)), u = (v − centre)/half_width,"
                         " v clamped to the schema bounds; every entry of the upper triangle noised (the count too)",
            "columns": ["(intercept)"] + [col.name for col in cols],
            "centre": dict(zip([col.name for col in cols], centre.tolist(), strict=True)),
            "half_width": dict(zip([col.name for col in cols], half.tolist(), strict=True)),
            "noisy_moments": noisy.tolist(),
            "noisy_n": n_hat,
        },
        "model": {
            "terms": terms, "coefficients": coef.tolist(), "interval_low": low.tolist(), "interval_high": high.tolist(),
            "interval_level": level, "residual_sd": resid_sd, "ridge": lam,
            "intervals": f"approximate: basic parametric bootstrap ({draws} draws) redrawing y | X from the fitted model"
                         " and the DP noise from its exact law, on the noisy moments (post-processing)",
        },
        "schema": schema.select([col.name for col in cols]).to_dict(),
        "warnings": warnings,
        "software": {"dpsynth": __version__, "python": platform.python_version(), "numpy": np.__version__,
                     "pandas": pd.__version__, "scipy": scipy.__version__},
    }
