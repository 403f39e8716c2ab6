"""Many columns: select–measure–reconstruct with a junction tree of low-order marginals.

When the full histogram is too large (Adult: ~10¹⁵ cells), we measure a few small noisy
marginals chosen well, fit a graphical model consistent with them, and sample rows from it
(seed 003, "Select-Measure-Reconstruct" [LHR+10]; MST [McKenna et al. 2021]; PrivBayes [Zhang
et al. 2017]; AIM [McKenna et al. 2022]). Our design is an *AIM-lite on a 2-tree*:

1. **One-way marginals** of every column are measured (budget share ``one_way_share``).
2. **Rounds** ``t = 1 … d−1``. Each round selects one clique with the exponential mechanism and
   measures it. Round 1 picks a pair of columns; every later round attaches one new column
   ``x`` to the model, either with one parent ``{x, u}`` or with two parents ``{x, u, v}``
   where ``{u, v}`` already lie in one measured clique. The cliques therefore form a junction
   tree of width ≤ 2 (a "2-tree", i.e. a Bayesian network of degree ≤ 2 whose parent sets are
   complete), which we can sample exactly and quickly.

   The score of a candidate clique ``C`` is AIM's [McKenna et al. 2022, §4]:
   ``q(C) = ‖M_C(D) − N̂·P̂_C‖₁ − E‖noise_C‖₁`` where ``P̂_C`` is the current model's estimate
   (the noisy marginal of the clique's separator times the noisy one-way of ``x``; before round
   1 the product of noisy one-ways) and the last term, data-independent, is the expected L1
   size of the noise the measurement would add (√(2/π)·σ per cell for the Gaussian). ``P̂_C``
   and ``N̂`` are functions of earlier noisy releases only, so adding or removing one person
   changes ``q`` by at most the histogram's L1 sensitivity Δ₁ (:mod:`dpsynth.neighbours`).
3. **Reconstruction** (post-processing): the noisy total ``N̂`` is the inverse-variance mean
   of the sums of all measured tables. Each measured table is projected onto the scaled
   simplex ``{t ≥ 0, Σt = N̂}`` (Euclidean projection; it removes most of the noise in empty
   cells), one-way tables are merged into the model's column marginals, and the conditional
   ``P(x | separator)`` of each clique is read from its table, shrunk toward ``P(x)`` where the
   separator cell holds few rows. The result is a Bayesian network over the 2-tree.
4. **Sampling** (post-processing): ancestral sampling in clique order, one vectorised
   inverse-CDF draw per clique for all rows (O(rows × columns)).

Guarantees of the stages and how they compose (sensitivities from :mod:`dpsynth.neighbours`):

=====================  ==================================  =================================
stage                  δ > 0 (zCDP accounting)              δ = 0 (pure DP)
=====================  ==================================  =================================
one-way marginals      discrete Gaussian, ρ = Δ₂²/(2σ²)     discrete Laplace, ε = Δ₁/scale
                       each [CKS20, Thm 4]                  each [GRS09]
selection, per round   exponential mechanism at ε_t:       exponential mechanism at ε_t:
                       ρ = ε_t²/8 [Cesar & Rogers 2021]     ε_t-DP [McSherry & Talwar 2007]
measurement, per round discrete Gaussian, ρ = Δ₂²/(2σ²)     discrete Laplace, ε = Δ₁/scale
reconstruction, sample post-processing (free)               post-processing (free)
composition            adaptive: ρ adds [BS16, Lemma 2.3];  adaptive basic composition: ε adds
                       total ρ → (ε, δ) by [CKS20, Cor. 13]
=====================  ==================================  =================================

Each round's budget is fixed before the round looks at the data (remaining budget / remaining
rounds), so the composition is the standard adaptive one; noise parameters are rounded toward
*more* noise, so the actual spend is at or below the plan (recorded in ``describe()``).

Caveat: the exponential mechanism's probabilities are computed in floating point (see
:func:`dpsynth.mechanisms.exponential_mechanism`); counts get exact integer noise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import combinations
from typing import Any

import numpy as np

from dpsynth import zcdp
from dpsynth.errors import InputError
from dpsynth.neighbours import (
    Neighbours,
    histogram_l1_sensitivity,
    histogram_l2_sensitivity_squared,
)

FORMAT = "dpsynth.marginals/1"
# Candidate cliques larger than this are never measured (memory and noise both explode).
MAX_CLIQUE_CELLS = 1_000_000
# Budget shares (of ρ for δ > 0, of ε for δ = 0); chosen on Adult and Titanic, see benchmarks/.
ONE_WAY_SHARE = 0.05
SELECT_SHARE = 0.06
# Pseudo-rows (in units of the per-cell noise std) that shrink a conditional toward P(x).
SHRINK_NOISE_UNITS = 0.3
# Weight of the expected-noise term in the selection score (AIM uses 1; projection onto the
# simplex removes much of the noise in empty cells, so the raw expectation overstates it).
PENALTY_FACTOR = 0.3
# Mirror-descent iterations of the final estimation (0: keep the Bayesian network as read).
ESTIMATION_ITERS = 300
# Measurement budget ∝ cells^ALLOC_POWER (2/3 would minimise the total expected L1 noise of a
# fixed set of tables; 0 = equal split; 1/3 did best on Adult).
ALLOC_POWER = 1.0 / 3.0
# Offer "two parents, measured as two pairs" candidates; a candidate measures at most MAX_SETS sets.
PAIR_PAIRS = True
MAX_SETS = 2
# Scores of two-set candidates are scaled by this (their L1 gains overlap through x's marginal).
MULTI_SET_SCALE = 1.0
# ... and scores of three-way candidates by this (a triple also covers its three pairs).
TRIPLE_SCALE = 1.0

Progress = Callable[[float, str], None]


# --------------------------------------------------------------------------------------------
# The fitted model
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Step:
    """One factor of the Bayesian network: ``P(new | parents)`` as a (parent cells × new cells) table."""

    new: tuple[int, ...]
    parents: tuple[int, ...]
    cpt: np.ndarray


@dataclass(frozen=True, eq=False)
class MarginalModel:
    """A fitted model: the released noisy measurements and the network reconstructed from them.

    Everything here is a release artifact or post-processing of one: sampling it again, with any
    number of rows, spends no budget.
    """

    sizes: tuple[int, ...]
    steps: tuple[Step, ...]
    noisy_total: float
    measurements: list[tuple[tuple[int, ...], np.ndarray]]
    noise: list[dict[str, Any]]
    stages: list[dict[str, Any]]
    params: dict[str, Any] = field(default_factory=dict)

    # -- sampling ----------------------------------------------------------------------------

    def sample(self, n_rows: int, *, rng: np.random.Generator) -> np.ndarray:
        """``n_rows`` synthetic rows of cell codes (int64, rows × columns); post-processing.

        Ancestral sampling: for each factor, one uniform per row is mapped through the CDF of the
        row's parent configuration (a single ``searchsorted`` on the stacked CDFs).
        """
        n = int(n_rows)
        if n < 0:
            raise InputError(f"The number of rows to sample must be ≥ 0, got {n_rows!r}.")
        d = len(self.sizes)
        out = np.zeros((n, d), dtype=np.int64)
        for step in self.steps:
            k = step.cpt.shape[1]
            if step.parents:
                pidx = np.ravel_multi_index(tuple(out[:, p] for p in step.parents),
                                            tuple(self.sizes[p] for p in step.parents))
            else:
                pidx = np.zeros(n, dtype=np.int64)
            cdf = np.cumsum(step.cpt, axis=1)
            cdf[:, -1] = 1.0
            # Row p's CDF lives in [p, p+1]; stacking keeps the whole key array sorted.
            keys = (cdf + np.arange(cdf.shape[0], dtype=np.float64)[:, None]).ravel()
            u = rng.random(n)
            pos = np.searchsorted(keys, pidx + u, side="right") - pidx * k
            pos = np.clip(pos, 0, k - 1)
            new_vals = np.unravel_index(pos, tuple(self.sizes[c] for c in step.new))
            for c, v in zip(step.new, new_vals, strict=True):
                out[:, c] = v
        return out

    def joint(self, max_cells: int = 2_000_000) -> np.ndarray:
        """The model's full joint distribution (small domains only; for checks and tests)."""
        total = math.prod(self.sizes)
        if total > max_cells:
            raise InputError(f"The full domain has {total:,} cells; joint() is for domains ≤ {max_cells:,}.")
        d = len(self.sizes)
        p = np.ones(self.sizes, dtype=np.float64)
        for step in self.steps:
            shape = [1] * d
            cols = list(step.parents) + list(step.new)
            for c in cols:
                shape[c] = self.sizes[c]
            table = step.cpt.reshape([self.sizes[c] for c in cols])
            order = np.argsort(cols)
            table = np.transpose(table, order).reshape(shape)
            p = p * table
        return p

    def marginal(self, cols: Sequence[int]) -> np.ndarray:
        """The model's marginal on ``cols`` (in that order) from :meth:`joint` (small domains only)."""
        cols = tuple(int(c) for c in cols)
        p = self.joint()
        other = tuple(i for i in range(len(self.sizes)) if i not in cols)
        m = p.sum(axis=other)
        kept = sorted(cols)
        return np.transpose(m, [kept.index(c) for c in cols])

    # -- release card -------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """Release-card entry: stages, their budget shares and guarantees, how they compose."""
        p = self.params
        pure = p.get("delta", 0.0) == 0.0
        return {
            "method": "marginals (select–measure–reconstruct on a 2-tree junction tree)",
            "guarantee": (
                f"({p.get('epsilon')}, 0)-DP (pure)" if pure
                else f"({p.get('epsilon')}, {p.get('delta')})-DP via {p.get('rho_spent'):.6g}-zCDP"
            ),
            "neighbours": p.get("neighbours"),
            "max_contributions": p.get("max_contributions"),
            "accounting": p.get("accounting"),
            "composition": (
                "Adaptive basic composition: the ε of all stages add up." if pure else
                "zCDP: the ρ of all stages add up (Bun & Steinke 2016, Lemma 2.3); the total ρ is"
                " converted to (ε, δ) with Canonne, Kamath & Steinke 2020, Corollary 13."
            ),
            "stages": self.stages,
            "selected_marginals": [list(c) for c, _ in self.measurements if len(c) > 1],
            "noisy_total": self.noisy_total,
            "post_processing": [
                "noisy total = inverse-variance mean of the measured tables' sums",
                "each table projected onto {t ≥ 0, Σt = noisy total}",
                "conditionals read from the cliques (shrunk toward the column's one-way)",
                "ancestral sampling, one inverse-CDF draw per clique",
            ],
            "floating_point": "selection probabilities use floating point (Ilvento 2020); counts use exact integer noise",
        }

    # -- JSON ----------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form; :meth:`from_dict` restores a model that samples identically."""
        return {
            "format": FORMAT,
            "sizes": list(self.sizes),
            "noisy_total": float(self.noisy_total),
            "steps": [
                {"new": list(s.new), "parents": list(s.parents), "cpt": s.cpt.tolist()} for s in self.steps
            ],
            "measurements": [
                {"cols": list(c), "shape": list(y.shape), "noisy_counts": y.ravel().tolist(), **nz}
                for (c, y), nz in zip(self.measurements, self.noise, strict=True)
            ],
            "stages": self.stages,
            "params": self.params,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MarginalModel:
        """Rebuild from :meth:`to_dict` output; a malformed document is an :class:`InputError`."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise InputError(f"Not a marginal model document (expected format {FORMAT!r}).")
        try:
            sizes = tuple(int(s) for s in data["sizes"])
            steps = []
            for s in data["steps"]:
                new, parents = tuple(int(c) for c in s["new"]), tuple(int(c) for c in s["parents"])
                cpt = np.asarray(s["cpt"], dtype=np.float64)
                rows = math.prod(sizes[c] for c in parents)
                cells = math.prod(sizes[c] for c in new)
                if cpt.shape != (rows, cells) or np.any(cpt < 0):
                    raise InputError(f"Model step for columns {list(new)} has a malformed table.")
                steps.append(Step(new=new, parents=parents, cpt=cpt))
            meas, noise = [], []
            for m in data["measurements"]:
                cols = tuple(int(c) for c in m["cols"])
                y = np.asarray(m["noisy_counts"], dtype=np.int64).reshape([int(s) for s in m["shape"]])
                meas.append((cols, y))
                noise.append({k: v for k, v in m.items() if k not in {"cols", "shape", "noisy_counts"}})
            covered = sorted(c for s in steps for c in s.new)
            if covered != list(range(len(sizes))):
                raise InputError("The model's steps do not cover every column exactly once.")
            return cls(sizes=sizes, steps=tuple(steps), noisy_total=float(data["noisy_total"]),
                       measurements=meas, noise=noise, stages=list(data["stages"]),
                       params=dict(data.get("params", {})))
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, InputError):
                raise
            raise InputError(f"Malformed marginal model document: {exc}.") from None


# --------------------------------------------------------------------------------------------
# Budget bookkeeping
# --------------------------------------------------------------------------------------------


@dataclass
class _Mech:
    """Noise for one measurement: discrete Gaussian (zCDP) or discrete Laplace (pure)."""

    pure: bool
    param: Fraction  # σ² for Gaussian, scale for Laplace
    cost: float  # ρ or ε actually spent

    @property
    def mean_abs(self) -> float:
        """E|Z| of one draw (Gaussian: √(2/π)σ, a close upper bound for the discrete one)."""
        if self.pure:
            p = math.exp(-1.0 / float(self.param))
            return 2.0 * p / (1.0 - p * p)
        return math.sqrt(2.0 / math.pi * float(self.param))

    @property
    def variance(self) -> float:
        """Variance of one draw (Gaussian: ≤ σ², CKS20 Prop. 19)."""
        if self.pure:
            p = math.exp(-1.0 / float(self.param))
            return 2.0 * p / (1.0 - p) ** 2
        return float(self.param)

    def info(self) -> dict[str, Any]:
        if self.pure:
            return {"noise": "discrete Laplace", "scale": str(self.param), "epsilon": self.cost}
        return {"noise": "discrete Gaussian", "sigma2": str(self.param), "rho": self.cost}


def _rational_at_least(x: float) -> Fraction:
    """A simple fraction ≥ x (noise parameters round toward more noise)."""
    from dpsynth import noise

    if hasattr(noise, "rational_at_least"):
        return Fraction(noise.rational_at_least(x))
    f = Fraction(x).limit_denominator(1 << 20)
    return f if f >= x else f + Fraction(1, 1 << 20)


class _Plan:
    """Turns a budget (ρ or ε) into mechanisms, recording each spend."""

    def __init__(self, epsilon: float, delta: float, neighbours: Neighbours, k: int) -> None:
        self.pure = delta == 0.0
        self.l1 = histogram_l1_sensitivity(neighbours, k)
        self.l2sq = histogram_l2_sensitivity_squared(neighbours, k)
        # A hair below the budget so that float rounding in the splits can never overspend.
        self.total = (epsilon if self.pure else zcdp.rho_from_epsilon(epsilon, delta)) * (1 - 1e-9)
        self.spent = 0.0

    def measurement(self, budget: float) -> _Mech:
        if self.pure:
            scale = _rational_at_least(self.l1 / budget)
            cost = self.l1 / float(scale)
        else:
            sigma2 = _rational_at_least(self.l2sq / (2.0 * budget))
            cost = float(zcdp.gaussian_rho(sigma2, self.l2sq))
        self.spent += cost
        return _Mech(self.pure, scale if self.pure else sigma2, cost)

    def selection_epsilon(self, budget: float) -> float:
        eps = budget if self.pure else zcdp.exponential_mechanism_epsilon(budget) * (1 - 1e-12)
        self.spent += eps if self.pure else eps * eps / 8.0
        return eps


def _measure(counts: np.ndarray, mech: _Mech, rng: np.random.Generator) -> np.ndarray:
    from dpsynth import noise

    c = np.asarray(counts, dtype=np.int64)
    if mech.pure:
        z = noise.discrete_laplace(mech.param, c.shape, rng=rng)
    else:
        z = noise.discrete_gaussian(mech.param, c.shape, rng=rng)
    return c + np.asarray(z, dtype=np.int64).reshape(c.shape)


def _select(scores: np.ndarray, sensitivity: float, epsilon: float, rng: np.random.Generator) -> int:
    from dpsynth.mechanisms import exponential_mechanism

    return exponential_mechanism(scores, sensitivity, epsilon, rng=rng)


# --------------------------------------------------------------------------------------------
# Fitting
# --------------------------------------------------------------------------------------------


def _counts(codes: np.ndarray, sizes: Sequence[int], cols: tuple[int, ...]) -> np.ndarray:
    shape = tuple(sizes[c] for c in cols)
    idx = np.ravel_multi_index(tuple(codes[:, c] for c in cols), shape)
    return np.bincount(idx, minlength=math.prod(shape)).reshape(shape)


def project_simplex(y: np.ndarray, total: float) -> np.ndarray:
    """Euclidean projection of ``y`` onto ``{t ≥ 0, Σt = total}`` (Duchi et al. 2008; O(m log m))."""
    v = np.asarray(y, dtype=np.float64).ravel()
    if total <= 0:
        return np.zeros_like(np.asarray(y, dtype=np.float64))
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - total
    ind = np.arange(1, v.size + 1)
    cond = u - css / ind > 0
    r = ind[cond][-1]
    theta = css[cond][-1] / r
    return np.maximum(v - theta, 0.0).reshape(np.shape(y))


def _validate(codes: np.ndarray, sizes: Sequence[int]) -> tuple[np.ndarray, tuple[int, ...]]:
    a = np.asarray(codes)
    if a.ndim != 2:
        raise InputError(f"codes must be a table (rows × columns), got an array of shape {a.shape}.")
    if not np.issubdtype(a.dtype, np.integer):
        raise InputError("codes must be whole-number cell indices.")
    sz = tuple(int(s) for s in sizes)
    if len(sz) != a.shape[1]:
        raise InputError(f"sizes lists {len(sz)} columns but codes has {a.shape[1]}.")
    for j, s in enumerate(sz):
        if s < 1:
            raise InputError(f"Column {j} has {s} cells; every column needs at least one.")
        col = a[:, j]
        bad = np.flatnonzero((col < 0) | (col >= s))
        if bad.size:
            raise InputError(
                f"Column {j}: row {int(bad[0])} holds cell {int(col[bad[0]])}, outside [0, {s})"
                f" ({bad.size:,} such rows)."
            )
    return a.astype(np.int64, copy=False), sz


def fit_marginal_model(
    codes: np.ndarray,
    sizes: Sequence[int],
    *,
    epsilon: float,
    delta: float,
    neighbours: Neighbours | str,
    max_contributions: int = 1,
    rng: np.random.Generator,
    progress: Progress | None = None,
) -> MarginalModel:
    """Fit the 2-tree marginal model; the whole fit is (ε, δ)-DP (pure ε-DP when δ = 0).

    See the module docstring for the stages, their guarantees and their composition.
    """
    from dpsynth.mechanisms import check_delta, check_epsilon

    eps, dlt = check_epsilon(epsilon), check_delta(delta)
    rel = Neighbours.parse(neighbours)
    codes, sizes = _validate(codes, sizes)
    d = len(sizes)
    plan = _Plan(eps, dlt, rel, max_contributions)
    report = progress or (lambda _f, _m: None)

    one_share = ONE_WAY_SHARE if d > 1 else 1.0
    sel_share = SELECT_SHARE if d > 1 else 0.0
    budget_one = plan.total * one_share
    budget_sel = plan.total * sel_share
    budget_meas = plan.total - budget_one - budget_sel
    stages: list[dict[str, Any]] = []

    # ---- stage 1: one-way marginals ---------------------------------------------------------
    report(0.02, "Measuring one-way marginals")
    one_mech = plan.measurement(budget_one / d)
    plan.spent += one_mech.cost * (d - 1)  # the same mechanism is applied to each of the d columns
    measurements: list[tuple[tuple[int, ...], np.ndarray]] = []
    mechs: list[_Mech] = []
    for j in range(d):
        y = _measure(_counts(codes, sizes, (j,)), one_mech, rng)
        measurements.append(((j,), y))
        mechs.append(one_mech)
    stages.append(_stage("one-way marginals", plan, one_mech.cost * d,
                         f"{d} one-way marginals, each " + _mech_text(one_mech, plan)))
    n_hat = _noisy_total(measurements, mechs)
    one_way = [project_simplex(y, max(n_hat, 1.0)) for _, y in measurements]

    # ---- stage 2+3: rounds of selection and measurement --------------------------------------
    cliques: list[tuple[int, ...]] = []  # model cliques (sorted column tuples), in junction-tree order
    parent_of: dict[tuple[int, ...], tuple[tuple[int, ...], tuple[int, ...]]] = {}  # clique -> (separator, new)
    tables: dict[tuple[int, ...], np.ndarray] = {}  # projected noisy tables of measured sets
    attached: list[int] = []
    l1_cache: dict[tuple[int, ...], float] = {}
    rounds_total = d - 1
    sel_left, meas_left = budget_sel, budget_meas
    sel_spent = meas_spent = 0.0
    sel_eps_used: list[float] = []
    meas_mechs: list[_Mech] = []
    round_weights: list[float] = []
    # Scores add the L1 gains of up to MAX_SETS measured sets: each changes by ≤ Δ₁ per person.
    score_sensitivity = plan.l1 * max(1.0, MULTI_SET_SCALE * MAX_SETS, TRIPLE_SCALE)
    t = 0
    while len(attached) < d and d > 1:
        rounds_left = rounds_total - t  # round 1 attaches two columns, every later round one
        report(0.05 + 0.85 * t / max(1, rounds_total), f"Selecting marginal {t + 1} of {rounds_total}")
        round_sel = sel_left / rounds_left
        cands = _candidates(attached, cliques, d, sizes)
        scores = np.empty(len(cands))
        for i, (_cl, _sep, new, sets) in enumerate(cands):
            budgets = _split(_allocate(meas_left, rounds_left, _weight(sets, sizes), round_weights), sets, sizes)
            q = 0.0
            for m, b in zip(sets, budgets, strict=True):
                if m not in l1_cache:
                    est = _estimate(m, new, sizes, tables, one_way)
                    l1_cache[m] = float(np.abs(_counts(codes, sizes, m) - n_hat * est).sum())
                cells = math.prod(sizes[c] for c in m)
                q += l1_cache[m] - PENALTY_FACTOR * _preview_mech(plan, b).mean_abs * cells
            scores[i] = q * (MULTI_SET_SCALE if len(sets) > 1 else TRIPLE_SCALE if len(sets[0]) == 3 else 1.0)
        sel_eps = plan.selection_epsilon(round_sel)
        sel_eps_used.append(sel_eps)
        sel_left -= round_sel
        sel_spent += sel_eps if plan.pure else sel_eps * sel_eps / 8.0
        cl, sep, new, sets = cands[_select(scores, score_sensitivity, sel_eps, rng)]
        weight = _weight(sets, sizes)
        round_meas = _allocate(meas_left, rounds_left, weight, round_weights)
        round_weights.append(weight)
        meas_left -= round_meas
        for m, b in zip(sets, _split(round_meas, sets, sizes), strict=True):
            mech = plan.measurement(b)
            meas_spent += mech.cost
            meas_mechs.append(mech)
            y = _measure(_counts(codes, sizes, m), mech, rng)
            measurements.append((m, y))
            mechs.append(mech)
            tables[m] = project_simplex(y, max(n_hat, 1.0))
        cliques.append(cl)
        parent_of[cl] = (sep, new)
        for c in cl:
            if c not in attached:
                attached.append(c)
        t += 1
    if d > 1:
        stages.append(_stage(
            "selection", plan, sel_spent,
            f"{t} exponential-mechanism choices (score sensitivity {score_sensitivity}), ε per choice "
            + ", ".join(f"{e:.4g}" for e in sel_eps_used)
            + ("" if plan.pure else " (each ε²/8-zCDP)"),
        ))
        stages.append(_stage(
            "measurement", plan, meas_spent,
            f"{len(meas_mechs)} selected marginals, each " + "; ".join(sorted({_mech_text(m, plan) for m in meas_mechs})),
        ))

    # ---- reconstruction (post-processing) ----------------------------------------------------
    report(0.92, "Reconstructing the model")
    n_hat = _noisy_total(measurements, mechs)
    steps = _reconstruct(sizes, measurements, mechs, cliques, parent_of, n_hat)
    steps = _refine(sizes, steps, measurements, mechs, cliques, n_hat, ESTIMATION_ITERS)
    report(1.0, "Done")
    params = {
        "epsilon": eps,
        "delta": dlt,
        "neighbours": rel.value,
        "max_contributions": int(max_contributions),
        "accounting": "pure DP, basic composition" if plan.pure else "zCDP (discrete Gaussian + exponential mechanism)",
        "budget": plan.total,
        "spent": plan.spent,
    }
    if not plan.pure:
        params["rho_budget"] = plan.total
        params["rho_spent"] = plan.spent
        params["epsilon_spent"] = zcdp.epsilon_from_rho(plan.spent, dlt) if plan.spent > 0 else 0.0
    assert plan.spent <= plan.total * (1 + 1e-12), "over-spent the privacy budget"  # noqa: S101
    return MarginalModel(sizes=sizes, steps=tuple(steps), noisy_total=float(n_hat), measurements=measurements,
                         noise=[m.info() for m in mechs], stages=stages, params=params)


def _stage(name: str, plan: _Plan, cost: float, detail: str) -> dict[str, Any]:
    unit = "epsilon" if plan.pure else "rho"
    return {"stage": name, unit: cost, "share": cost / plan.total if plan.total else 0.0,
            "guarantee": (f"{cost:.6g}-DP" if plan.pure else f"{cost:.6g}-zCDP"), "detail": detail}


def _mech_text(m: _Mech, plan: _Plan) -> str:
    if m.pure:
        return f"discrete Laplace scale {float(m.param):.4g} (Δ₁ = {plan.l1}, {m.cost:.4g}-DP)"
    return f"discrete Gaussian σ = {math.sqrt(float(m.param)):.4g} (Δ₂² = {plan.l2sq}, {m.cost:.4g}-zCDP)"


def _allocate(left: float, rounds_left: int, weight: float, earlier: list[float]) -> float:
    """This round's share of the measurement budget: ∝ cells^ALLOC_POWER, against the mean weight
    of the cliques measured so far standing in for the rounds still to come. Depends only on
    public sizes and earlier (released) selections."""
    if rounds_left <= 1:
        return left
    typical = (sum(earlier) + weight) / (len(earlier) + 1)
    return left * weight / (weight + (rounds_left - 1) * typical)


def _preview_mech(plan: _Plan, budget: float) -> _Mech:
    """The mechanism a measurement at ``budget`` would use (nothing is spent)."""
    if plan.pure:
        return _Mech(True, Fraction(plan.l1 / budget), budget)
    return _Mech(False, Fraction(plan.l2sq / (2.0 * budget)), budget)


def _noisy_total(measurements: list[tuple[tuple[int, ...], np.ndarray]], mechs: list[_Mech]) -> float:
    """Inverse-variance weighted mean of the tables' sums (each sum has variance cells·Var(Z))."""
    num = den = 0.0
    for (_, y), m in zip(measurements, mechs, strict=True):
        w = 1.0 / (y.size * m.variance)
        num += w * float(y.sum())
        den += w
    return num / den


def _weight(sets: tuple[tuple[int, ...], ...], sizes: tuple[int, ...]) -> float:
    return sum(math.prod(sizes[c] for c in m) ** ALLOC_POWER for m in sets)


def _split(budget: float, sets: tuple[tuple[int, ...], ...], sizes: tuple[int, ...]) -> list[float]:
    """A round's measurement budget split over its sets ∝ cells^ALLOC_POWER."""
    w = [math.prod(sizes[c] for c in m) ** ALLOC_POWER for m in sets]
    return [budget * x / sum(w) for x in w]


Candidate = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[tuple[int, ...], ...]]


def _candidates(attached: list[int], cliques: list[tuple[int, ...]], d: int, sizes: tuple[int, ...]) -> list[Candidate]:
    """(model clique, separator, new columns, sets to measure) that keep the cliques a 2-tree.

    A new column ``x`` joins with one parent ``u`` (measure ``{x, u}``) or with two parents
    ``{u, v}`` already together in a clique, measuring either ``{x, u, v}`` or the two pairs
    ``{x, u}`` and ``{x, v}`` (fewer cells; the estimation fills in the three-way interaction).
    """
    def srt(*c: int) -> tuple[int, ...]:
        return tuple(sorted(c))

    out: list[Candidate] = []
    if not attached:
        for u, v in combinations(range(d), 2):
            out.append(((u, v), (), (u, v), ((u, v),)))
    else:
        edges = sorted({srt(*e) for cl in cliques for e in combinations(cl, 2)})
        for x in range(d):
            if x in attached:
                continue
            for u in attached:
                out.append((srt(x, u), (u,), (x,), (srt(x, u),)))
            for u, v in edges:
                cl = srt(x, u, v)
                out.append((cl, (u, v), (x,), (cl,)))
                if PAIR_PAIRS:
                    out.append((cl, (u, v), (x,), (srt(x, u), srt(x, v))))
    ok = [c for c in out if all(math.prod(sizes[i] for i in m) <= MAX_CLIQUE_CELLS for m in c[3])]
    return ok or out[:1]


def _sep_table(sep: tuple[int, ...], tables: dict[tuple[int, ...], np.ndarray], one_way: list[np.ndarray]) -> np.ndarray:
    """Normalised estimate of the marginal of ``sep`` (axes in ``sep`` order) from a measured set."""
    if len(sep) == 1:
        t = one_way[sep[0]]
        return t / t.sum() if t.sum() > 0 else np.full(t.shape, 1.0 / t.size)
    for m, t in tables.items():
        if set(sep) <= set(m):
            drop = tuple(i for i, c in enumerate(m) if c not in sep)
            mm = t.sum(axis=drop) if drop else t
            kept = [c for c in m if c in sep]
            mm = np.transpose(mm, [kept.index(c) for c in sep])
            return mm / mm.sum() if mm.sum() > 0 else np.full(mm.shape, 1.0 / mm.size)
    # Only reached for an edge no measured set covers (its clique was measured by pairs):
    # fall back to independence of its columns.
    return np.einsum(",".join(chr(97 + i) for i in range(len(sep))) + "->" + "".join(chr(97 + i) for i in range(len(sep))),
                     *[_sep_table((c,), tables, one_way) for c in sep])


def _estimate(m: tuple[int, ...], new: tuple[int, ...], sizes: tuple[int, ...],
              tables: dict, one_way: list[np.ndarray]) -> np.ndarray:
    """The current model's distribution on the set ``m`` (axes in ``m`` order): the known part's
    marginal times the new columns' one-ways (the new columns are still independent)."""
    old = tuple(c for c in m if c not in new)
    factors, axes = [], []
    if old:
        factors.append(_sep_table(old, tables, one_way))
        axes.append(list(old))
    for x in (c for c in m if c in new):
        factors.append(_sep_table((x,), tables, one_way))
        axes.append([x])
    letters = {c: chr(97 + i) for i, c in enumerate(m)}
    expr = ",".join("".join(letters[c] for c in a) for a in axes) + "->" + "".join(letters[c] for c in m)
    return np.einsum(expr, *factors)


def _reconstruct(sizes: tuple[int, ...], measurements: list, mechs: list[_Mech], cliques: list,
                 parent_of: dict, n_hat: float) -> list[Step]:
    """Bayesian network over the 2-tree from the projected noisy tables (post-processing)."""
    d = len(sizes)
    total = max(n_hat, 1.0)
    noisy = {c: (y, m) for (c, y), m in zip(measurements, mechs, strict=True)}
    one_way = []
    for j in range(d):
        y, _ = noisy[(j,)]
        t = project_simplex(y, total)
        one_way.append(t / t.sum() if t.sum() > 0 else np.full(t.shape, 1.0 / t.size))
    steps: list[Step] = []
    if not cliques:
        return [Step(new=(j,), parents=(), cpt=one_way[j][None, :]) for j in range(d)]
    for cl in cliques:
        sep, new = parent_of[cl]
        if cl not in noisy:
            steps.append(Step(new=new, parents=sep, cpt=_pairs_conditional(sep, new[0], noisy, one_way, sizes, total)))
            continue
        y, m = noisy[cl]
        t = project_simplex(y, total)
        if not sep:
            # Root clique: its joint, with the merged one-ways pulling its margins (IPF-style step).
            joint = t / t.sum() if t.sum() > 0 else np.full(t.shape, 1.0 / t.size)
            steps.append(Step(new=cl, parents=(), cpt=joint.reshape(1, -1)))
            continue
        # Axes: separator first, then the new column.
        order = [cl.index(c) for c in sep] + [cl.index(c) for c in new]
        tt = np.transpose(t, order)
        cpt = _conditional(tt, one_way[new[0]], math.sqrt(m.variance))
        steps.append(Step(new=new, parents=sep, cpt=cpt.reshape(-1, tt.shape[-1])))
    return steps


def _pairs_conditional(sep: tuple[int, ...], x: int, noisy: dict, one_way: list[np.ndarray],
                       sizes: tuple[int, ...], total: float) -> np.ndarray:
    """P(x | u, v) ∝ P(x | u)·P(x | v) / P(x) from the measured pairs {x,u}, {x,v} (a naive-Bayes
    start for the estimation, which then fits the clique to all measurements)."""
    conds, pxs = [], []
    for u in sep:
        key = tuple(sorted((x, u)))
        y, m = noisy[key]
        t = project_simplex(y, total)
        if key[0] == x:
            t = t.T
        c = _conditional(t, one_way[x], math.sqrt(m.variance))
        conds.append(c)
        # P(x) as implied by this pair's own table, so that the ratio below stays bounded.
        pu = t.sum(axis=1)
        pxs.append((pu / max(pu.sum(), 1e-300)) @ c)
    px = np.maximum(np.sqrt(pxs[0] * pxs[1]), 1e-12)
    c = conds[0][:, None, :] * conds[1][None, :, :] / px
    rs = c.sum(axis=-1, keepdims=True)
    c = np.where(rs > 0, c / np.where(rs > 0, rs, 1.0), one_way[x])
    return c.reshape(sizes[sep[0]] * sizes[sep[1]], sizes[x])


def _conditional(t: np.ndarray, prior: np.ndarray, noise_std: float) -> np.ndarray:
    """P(x | parents) from a table with axes (parents…, x), shrunk hierarchically (post-processing).

    Each parent configuration gets ``SHRINK_NOISE_UNITS · noise_std · cells(x)`` pseudo-rows
    drawn from the prior: with two parents the prior is the mean of the one-parent
    conditionals (themselves read from the same table, summed over the other parent, and
    shrunk toward ``P(x)``); with one parent it is ``P(x)``. Where a parent cell holds many
    rows the table dominates; where it holds about the noise level the prior does.
    """
    k = t.shape[-1]
    if t.ndim == 3:
        priors = []
        for axis in (0, 1):
            t2 = t.sum(axis=1 - axis)
            c2 = _conditional(t2, prior, noise_std * math.sqrt(t.shape[1 - axis]))
            priors.append(np.expand_dims(c2, 1 - axis))
        base = 0.5 * (priors[0] + priors[1])
    else:
        base = np.broadcast_to(prior, t.shape)
    pseudo = SHRINK_NOISE_UNITS * noise_std * k
    if pseudo <= 0:
        pseudo = 1e-12
    return (t + pseudo * base) / (t.sum(axis=-1, keepdims=True) + pseudo)


# --------------------------------------------------------------------------------------------
# Private-PGM-lite: exact inference on the junction tree + mirror descent (post-processing)
# --------------------------------------------------------------------------------------------


class _JunctionTree:
    """Cliques (sorted column tuples) in an order where each clique's parent comes earlier."""

    def __init__(self, sizes: tuple[int, ...], cliques: list[tuple[int, ...]]) -> None:
        self.sizes = sizes
        self.cliques = cliques
        self.parent: list[int] = []
        for i, cl in enumerate(cliques):
            p = -1
            if i:
                best = 0
                for j in range(i):
                    k = len(set(cl) & set(cliques[j]))
                    if k > best:
                        best, p = k, j
            self.parent.append(p)
        self.children: list[list[int]] = [[] for _ in cliques]
        for i, p in enumerate(self.parent):
            if p >= 0:
                self.children[p].append(i)
        self.shapes = [tuple(sizes[c] for c in cl) for cl in cliques]

    def _msg(self, belief: np.ndarray, src: int, dst: int) -> np.ndarray:
        """Log-sum-exp of ``belief`` (on clique src) onto the separator, shaped to broadcast on dst."""
        a, b = self.cliques[src], self.cliques[dst]
        drop = tuple(i for i, c in enumerate(a) if c not in b)
        m = _logsumexp(belief, drop)
        return m.reshape([self.sizes[c] if c in a else 1 for c in b])

    def beliefs(self, theta: list[np.ndarray]) -> list[np.ndarray]:
        """Calibrated log-beliefs (unnormalised log-marginals) of every clique: two passes."""
        n = len(self.cliques)
        up = [t.copy() for t in theta]
        to_parent: list[np.ndarray | None] = [None] * n
        for i in reversed(range(n)):
            p = self.parent[i]
            if p >= 0:
                to_parent[i] = self._msg(up[i], i, p)
                up[p] = up[p] + to_parent[i]
        full = [np.empty(0)] * n
        for i in range(n):
            p = self.parent[i]
            if p < 0:
                full[i] = up[i]
            else:
                full[i] = up[i] + self._msg(full[p] - to_parent[i], p, i)
        return full

    def marginals(self, theta: list[np.ndarray], total: float) -> list[np.ndarray]:
        out = []
        for b in self.beliefs(theta):
            e = np.exp(b - b.max())
            out.append(e * (total / e.sum()))
        return out


def _logsumexp(a: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    if not axes:
        return a
    m = a.max(axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    return (np.log(np.exp(a - m).sum(axis=axes, keepdims=True)) + m).squeeze(axis=axes)


def _mirror_descent(tree: _JunctionTree, theta: list[np.ndarray], obs: list[tuple[int, tuple[int, ...], np.ndarray, float]],
                    total: float, iters: int) -> list[np.ndarray]:
    """Minimise Σ_m ‖M_m(μ) − y_m‖²/Var_m over junction-tree models with Σμ = total (McKenna et al.
    2019, Private-PGM, entropic mirror descent with backtracking). ``obs`` holds (clique index,
    axes of the clique to keep, noisy counts, noise variance)."""

    def loss_grad(mu: list[np.ndarray]) -> tuple[float, list[np.ndarray]]:
        loss = 0.0
        grads = [np.zeros_like(m) for m in mu]
        for ci, keep, y, var in obs:
            drop = tuple(i for i in range(mu[ci].ndim) if i not in keep)
            r = (mu[ci].sum(axis=drop) if drop else mu[ci]) - y
            loss += float((r * r).sum()) / var
            g = (2.0 / var) * r
            grads[ci] = grads[ci] + (np.expand_dims(g, drop) if drop else g)
        return loss, grads

    mu = tree.marginals(theta, total)
    loss, grads = loss_grad(mu)
    # A first step that moves log-potentials by about 1 where the gradient is largest.
    gmax = max(float(np.abs(g).max()) for g in grads) or 1.0
    eta = 1.0 / gmax
    for _ in range(iters):
        new_theta = [t - eta * g for t, g in zip(theta, grads, strict=True)]
        new_mu = tree.marginals(new_theta, total)
        new_loss, new_grads = loss_grad(new_mu)
        if new_loss <= loss:
            theta, mu, loss, grads = new_theta, new_mu, new_loss, new_grads
            eta *= 1.25
        else:
            eta *= 0.5
    return theta


def _refine(sizes: tuple[int, ...], steps: list[Step], measurements: list, mechs: list[_Mech],
            cliques: list[tuple[int, ...]], n_hat: float, iters: int) -> list[Step]:
    """Fit the junction-tree model to *all* measurements (one-ways included) by mirror descent,
    starting from the Bayesian network ``steps``; returns the refined network (post-processing)."""
    if not cliques or iters <= 0:
        return steps
    total = max(n_hat, 1.0)
    tree = _JunctionTree(sizes, cliques)
    by_cols = {s.new + s.parents: s for s in steps}
    theta = []
    for cl in cliques:
        step = next(s for s in steps if set(s.new) | set(s.parents) == set(cl))
        cols = list(step.parents) + list(step.new)
        t = np.log(np.maximum(step.cpt, 1e-300)).reshape([sizes[c] for c in cols])
        theta.append(np.transpose(t, [cols.index(c) for c in cl]))
    del by_cols
    obs = []
    for (cols, y), m in zip(measurements, mechs, strict=True):
        ci = next(i for i, cl in enumerate(cliques) if set(cols) <= set(cl))
        keep = tuple(cliques[ci].index(c) for c in cols)
        if keep != tuple(sorted(keep)):
            order = np.argsort(keep)
            y = np.transpose(y, order)
            keep = tuple(sorted(keep))
        obs.append((ci, keep, y.astype(np.float64), m.variance))
    theta = _mirror_descent(tree, theta, obs, total, iters)
    mu = tree.marginals(theta, 1.0)
    if not all(np.all(np.isfinite(m)) for m in mu):
        return steps
    out: list[Step] = []
    for i, cl in enumerate(cliques):
        p = tree.parent[i]
        if p < 0:
            out.append(Step(new=cl, parents=(), cpt=(mu[i] / max(mu[i].sum(), 1e-300)).reshape(1, -1)))
            continue
        sep = tuple(c for c in cl if c in cliques[p])
        new = tuple(c for c in cl if c not in sep)
        order = [cl.index(c) for c in sep] + [cl.index(c) for c in new]
        t = np.transpose(mu[i], order).reshape(math.prod(sizes[c] for c in sep), -1)
        rs = t.sum(axis=1, keepdims=True)
        # A separator cell whose probability underflowed is never sampled; give it a valid row anyway.
        out.append(Step(new=new, parents=sep, cpt=np.where(rs > 0, t / np.where(rs > 0, rs, 1.0), 1.0 / t.shape[1])))
    return out
