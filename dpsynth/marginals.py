"""Many columns: select–measure–reconstruct with a junction tree grown from noisy marginals.

When the full histogram is too large (Adult: ~10¹⁵ cells) we measure a few small noisy
marginals chosen well, fit a graphical model consistent with them, and sample rows from it
(seed 003, "Select-Measure-Reconstruct" [LHR+10]; MST [McKenna et al. 2021]; PrivBayes [Zhang
et al. 2017]; AIM [McKenna et al. 2022]). Our design is an *AIM-lite on a growing junction tree*,
all in numpy:

1. **One-way marginals** of every column are measured (budget share ``ONE_WAY_SHARE``).
2. **Rounds** (``ROUNDS_PER_COLUMN·(d−1)`` of them). Each round selects one two-way marginal with
   the exponential mechanism and measures it. The model is a junction tree whose cliques are
   *larger* than what we measure (as in Private-PGM): round 1 picks the root pair; a round may
   *attach* a new column ``x`` through a pair ``{x, u}`` (new clique ``{x, u}``, child of a clique
   holding ``u``), *grow* the clique of ``x`` by a column ``v`` of its parent clique (measuring
   ``{x, v}``; clique ``{x} ∪ S`` becomes ``{x} ∪ S ∪ {v}``, still a junction tree), or measure
   an earlier pair *again*. When the rounds left equal the columns still outside the model,
   only attachments are offered, so every column joins. Cliques are capped at
   ``MAX_CLIQUE_COLS`` columns and ``MAX_CLIQUE_CELLS`` cells.

   The score of a candidate ``m`` is AIM's [McKenna et al. 2022, §4]:
   ``q(m) = ‖M_m(D) − M̂_m‖₁ − c·E‖noise_m‖₁``, where ``M̂_m`` is the current model's estimate of
   the marginal (a function of earlier noisy releases only) and the last term, data-independent,
   is the expected L1 size of the noise the measurement would add (√(2/π)·σ per cell for the
   Gaussian), weighted by ``PENALTY_FACTOR``. Adding or removing one person changes ``q`` by at
   most the histogram's L1 sensitivity Δ₁ (:mod:`dpsynth.neighbours`); that is the sensitivity
   the exponential mechanism uses. A round with a single candidate spends nothing on selection.
3. **Estimation** (post-processing): after every round, and for ``ESTIMATION_ITERS`` steps at the
   end, the junction-tree model is fitted to *all* measurements so far by entropic mirror descent
   on Σ‖M_m(μ) − y_m‖²/Var_m with exact sum-product inference (Private-PGM [McKenna et al. 2019],
   re-implemented for junction trees). The noisy total ``N̂`` is the inverse-variance mean of the
   sums of all measured tables.
4. **Sampling** (post-processing): the fitted model, written as a Bayesian network in clique
   order (``P(new column | separator)`` per clique), is sampled ancestrally: one vectorised
   inverse-CDF draw per clique for all rows (O(rows × columns)), exact for the model.

Guarantees of the stages and how they compose (sensitivities from :mod:`dpsynth.neighbours`):

=====================  ==================================  =================================
stage                  δ > 0 (zCDP accounting)              δ = 0 (pure DP)
=====================  ==================================  =================================
one-way marginals      discrete Gaussian, ρ = Δ₂²/(2σ²)     discrete Laplace, ε = Δ₁/scale
                       each [CKS20, Thm 4]                  each [GRS09]
selection, per round   exponential mechanism at ε_t:       exponential mechanism at ε_t:
                       ρ = ε_t²/8 [Cesar & Rogers 2021]     ε_t-DP [McSherry & Talwar 2007]
measurement, per round discrete Gaussian, ρ = Δ₂²/(2σ²)     discrete Laplace, ε = Δ₁/scale
estimation, sampling   post-processing (free)               post-processing (free)
composition            adaptive: ρ adds [BS16, Lemma 2.3];  adaptive basic composition: ε adds
                       total ρ → (ε, δ) by [CKS20, Cor. 13]
=====================  ==================================  =================================

Budget: ``ONE_WAY_SHARE`` and ``SELECT_SHARE`` of the total (ρ or ε) go to the one-ways and the
selections (split evenly over the rounds); the rest goes to the round measurements, each round
taking its share of what is left in proportion to cells^``ALLOC_POWER`` of its marginal. Every
round's budget is fixed before the round looks at the data (it depends on public sizes and
earlier releases only), so the composition is the standard adaptive one; noise parameters are
rounded toward *more* noise, so the actual spend is at or below the plan (``describe()``).

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
from dpsynth.errors import InputError, InternalError
from dpsynth.neighbours import (
    Neighbours,
    histogram_l1_sensitivity,
    histogram_l2_sensitivity_squared,
)

FORMAT = "dpsynth.marginals/1"
# Model cliques (and measured sets) never exceed this many cells (memory and time).
MAX_CLIQUE_CELLS = 100_000
# Budget shares (of ρ for δ > 0, of ε for δ = 0); chosen on Adult and Titanic, see benchmarks/.
ONE_WAY_SHARE = 0.05
SELECT_SHARE = 0.06
# Weight of the expected-noise term in the selection score (AIM uses 1; the estimation removes
# much of the noise in empty cells, so the raw expectation overstates it).
PENALTY_FACTOR = 0.3
# Mirror-descent iterations at the end (after ROUND_ITERS warm-started ones per round).
ESTIMATION_ITERS = 300
# Measurement budget ∝ cells^ALLOC_POWER (2/3 would minimise the total expected L1 noise of a
# fixed set of tables; 0 = equal split; 1/3 did best on Adult).
ALLOC_POWER = 1.0 / 3.0
# Rounds of selection per column after the first (≥ 1: every column must join the model; the
# rest grow cliques or measure again, as in AIM).
ROUNDS_PER_COLUMN = 3.0
# Columns per model clique (a clique is measured through its pairs, so it may exceed 3).
MAX_CLIQUE_COLS = 5
# Offer three-way measurements when a column joins (besides pairs).
TRIPLES = False
# Offer "join alone" (no pair measured) for each column not yet in the model.
ALONE = True
# Mirror-descent iterations after each round (warm-started) and at the end.
ROUND_ITERS = 12

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

    def clique_marginals(self) -> list[tuple[tuple[int, ...], np.ndarray]]:
        """Exact joint of each step's columns (parents + new, sorted), in step order.

        Each step's parents lie in an earlier step's columns (the junction-tree property), so
        P(parents ∪ new) = P(parents) · P(new | parents) follows recursively from the root.
        """
        out: list[tuple[tuple[int, ...], np.ndarray]] = []
        for step in self.steps:
            cols = step.parents + step.new
            table = step.cpt.reshape([self.sizes[c] for c in cols])
            if step.parents:
                src, p = next((c, m) for c, m in out if set(step.parents) <= set(c))
                drop = tuple(k for k, c in enumerate(src) if c not in step.parents)
                ps = p.sum(axis=drop) if drop else p
                kept = [c for c in src if c in step.parents]
                ps = np.transpose(ps, [kept.index(c) for c in step.parents])
                table = table * ps.reshape(ps.shape + (1,) * len(step.new))
            order = sorted(cols)
            out.append((tuple(order), np.transpose(table, [cols.index(c) for c in order])))
        return out

    def marginal(self, cols: Sequence[int]) -> np.ndarray:
        """The model's exact marginal on ``cols`` (in that order): from a clique that holds them
        all, by propagation along the clique tree for a pair, otherwise from :meth:`joint`
        (small domains only)."""
        cols = tuple(int(c) for c in cols)
        cms = self.clique_marginals()
        for cl, p in cms:
            if set(cols) <= set(cl):
                drop = tuple(k for k, c in enumerate(cl) if c not in cols)
                m = p.sum(axis=drop) if drop else p
                kept = [c for c in cl if c in cols]
                return np.transpose(m, [kept.index(c) for c in cols])
        if len(cols) == 2:
            return self._pair_marginal(cols[0], cols[1], cms)
        p = self.joint()
        other = tuple(i for i in range(len(self.sizes)) if i not in cols)
        m = p.sum(axis=other)
        kept = sorted(cols)
        return np.transpose(m, [kept.index(c) for c in cols])

    def _pair_marginal(self, a: int, b: int, cms: list[tuple[tuple[int, ...], np.ndarray]]) -> np.ndarray:
        """P(a, b) for columns in different cliques: carry P(a, clique) along the tree path,
        using P(next clique | separator) at each hop (exact by the junction-tree property)."""
        parent = []
        for i, step in enumerate(self.steps):
            parent.append(next((j for j in range(i) if set(step.parents) <= set(cms[j][0])), -1)
                          if step.parents else -1)
        ia = next(i for i, (cl, _) in enumerate(cms) if a in cl)
        ib = next(i for i, (cl, _) in enumerate(cms) if b in cl)

        def chain(i: int) -> list[int]:
            out = [i]
            while parent[out[-1]] >= 0:
                out.append(parent[out[-1]])
            return out

        up_a, up_b = chain(ia), chain(ib)
        if up_a[-1] != up_b[-1]:  # different trees of the forest: independent
            pa, pb = self.marginal((a,)), self.marginal((b,))
            return np.outer(pa, pb)
        common = next(i for i in up_a if i in set(up_b))
        path = up_a[: up_a.index(common) + 1] + list(reversed(up_b[: up_b.index(common)]))
        cl, p = cms[path[0]]
        sa = self.sizes[a]
        f = np.zeros((sa,) + p.shape)
        idx = [slice(None)] * p.ndim
        for v in range(sa):  # f[v, c] = P(c) · [c_a = v]
            idx[cl.index(a)] = v
            f[(v, *idx)] = p[tuple(idx)]
            idx[cl.index(a)] = slice(None)
        for j in path[1:]:
            nxt, q = cms[j]
            sep = [c for c in cl if c in nxt]
            g = f.sum(axis=tuple(1 + k for k, c in enumerate(cl) if c not in sep))
            q_sep = q.sum(axis=tuple(k for k, c in enumerate(nxt) if c not in sep))
            shape = [self.sizes[c] if c in sep else 1 for c in nxt]
            cond = q / np.where(q_sep > 0, q_sep, 1.0).reshape(shape)
            f = g.reshape([sa] + shape) * cond[None]
            cl = nxt
        m = f.sum(axis=tuple(1 + k for k, c in enumerate(cl) if c != b))
        return m

    # -- release card -------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """Release-card entry: stages, their budget shares and guarantees, how they compose."""
        p = self.params
        pure = p.get("delta", 0.0) == 0.0
        return {
            "method": "marginals (select–measure–reconstruct, AIM-lite on a junction tree)",
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
            "model_cliques": self.params.get("cliques", []),
            "noisy_total": self.noisy_total,
            "post_processing": [
                "noisy total = inverse-variance mean of the measured tables' sums",
                "junction-tree model fitted to all measurements (mirror descent, Private-PGM style)",
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

    return Fraction(noise.rational_at_least(x))


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


def _counts(codes: np.ndarray, sizes: Sequence[int], cols: tuple[int, ...], weights: np.ndarray | None = None) -> np.ndarray:
    shape = tuple(sizes[c] for c in cols)
    idx = np.ravel_multi_index(tuple(codes[:, c] for c in cols), shape)
    if weights is None:
        return np.bincount(idx, minlength=math.prod(shape)).reshape(shape)
    if int(weights.sum()) < 2**53:  # float sums of whole numbers are exact below 2^53
        return np.bincount(idx, weights=weights, minlength=math.prod(shape)).astype(np.int64).reshape(shape)
    out = np.zeros(math.prod(shape), dtype=np.int64)
    np.add.at(out, idx, weights)
    return out.reshape(shape)


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
    weights: np.ndarray | None = None,
) -> MarginalModel:
    """Fit the junction-tree marginal model; the whole fit is (ε, δ)-DP (pure ε-DP when δ = 0).

    See the module docstring for the stages, their guarantees and their composition. With
    ``weights``, row i of ``codes`` stands for ``weights[i]`` identical records (an engine's
    occupied cells and their counts, :meth:`dpsynth.engines.CellCounts.occupied_codes`): every
    marginal, hence the released model and its guarantee, is that of the expanded table.
    """
    from dpsynth.mechanisms import check_delta, check_epsilon

    eps, dlt = check_epsilon(epsilon), check_delta(delta)
    rel = Neighbours.parse(neighbours)
    codes, sizes = _validate(codes, sizes)
    if weights is not None:
        weights = np.asarray(weights)
        if weights.shape != (len(codes),) or not np.issubdtype(weights.dtype, np.integer) or (weights < 0).any():
            raise InputError("weights must be one whole number ≥ 0 per row of codes.")
        weights = weights.astype(np.int64, copy=False)
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
        y = _measure(_counts(codes, sizes, (j,), weights), one_mech, rng)
        measurements.append(((j,), y))
        mechs.append(one_mech)
    stages.append(_stage("one-way marginals", plan, one_mech.cost * d,
                         f"{d} one-way marginals, each " + _mech_text(one_mech, plan)))
    n_hat = _noisy_total(measurements, mechs)
    total = max(n_hat, 1.0)
    one_way = []
    for _, y in measurements:
        t = project_simplex(y, total)
        one_way.append(t / t.sum() if t.sum() > 0 else np.full(t.shape, 1.0 / t.size))

    # ---- stage 2+3: rounds of selection and measurement --------------------------------------
    model = _Model(sizes, one_way, total)
    counts_cache: dict[tuple[int, ...], np.ndarray] = {}

    def real(m: tuple[int, ...]) -> np.ndarray:
        if m not in counts_cache:
            counts_cache[m] = _counts(codes, sizes, m, weights)
        return counts_cache[m]

    # Two columns: one pair says everything. Otherwise extra rounds grow cliques or re-measure.
    rounds_total = max(d - 1, round(ROUNDS_PER_COLUMN * (d - 1))) if d > 2 else d - 1
    sel_left, meas_left = budget_sel, budget_meas
    sel_spent = meas_spent = 0.0
    sel_eps_used: list[float] = []
    meas_mechs: list[_Mech] = []
    round_weights: list[float] = []
    for t in range(rounds_total):
        rounds_left = rounds_total - t
        report(0.05 + 0.85 * t / rounds_total, f"Selecting marginal {t + 1} of {rounds_total}")
        round_sel = sel_left / rounds_left
        cands = model.candidates(must_attach=model.rounds_needed() >= rounds_left)
        if not cands:  # nothing left to measure within the size caps; the rest stays unspent
            break
        scores = np.empty(len(cands))
        for i, cand in enumerate(cands):
            if cand.kind == "alone":
                scores[i] = 0.0
                continue
            w = math.prod(sizes[c] for c in cand.measure) ** ALLOC_POWER
            b = _allocate(meas_left, rounds_left, w, round_weights)
            cells = math.prod(sizes[c] for c in cand.measure)
            gap = float(np.abs(real(cand.measure) - model.estimate(cand)).sum())
            scores[i] = gap - PENALTY_FACTOR * _preview_mech(plan, b).mean_abs * cells
        sel_left -= round_sel
        if len(cands) == 1:
            cand = cands[0]  # no choice to make: nothing depends on the data, nothing is spent
        else:
            sel_eps = plan.selection_epsilon(round_sel)
            sel_eps_used.append(sel_eps)
            sel_spent += sel_eps if plan.pure else sel_eps * sel_eps / 8.0
            cand = cands[_select(scores, plan.l1, sel_eps, rng)]
        if cand.kind == "alone":
            model.apply(cand, np.zeros(0), 1.0)  # nothing measured; the budget stays for later rounds
            continue
        weight = math.prod(sizes[c] for c in cand.measure) ** ALLOC_POWER
        round_meas = _allocate(meas_left, rounds_left, weight, round_weights)
        round_weights.append(weight)
        meas_left -= round_meas
        mech = plan.measurement(round_meas)
        meas_spent += mech.cost
        meas_mechs.append(mech)
        y = _measure(real(cand.measure), mech, rng)
        measurements.append((cand.measure, y))
        mechs.append(mech)
        model.apply(cand, y, mech.variance)
        model.fit(ROUND_ITERS)
    for x in range(d):
        if d > 1 and x not in model.attached:  # only if the rounds ran out (e.g. one round per column)
            model.apply(_Candidate("alone", (), new=x), np.zeros(0), 1.0)
    if d > 1:
        stages.append(_stage(
            "selection", plan, sel_spent,
            f"{len(sel_eps_used)} exponential-mechanism choices (score sensitivity {plan.l1}), "
            + _range_text("ε", sel_eps_used) + " each" + ("" if plan.pure else " (each ε²/8-zCDP)"),
        ))
        stages.append(_stage(
            "measurement", plan, meas_spent,
            f"{len(meas_mechs)} selected marginals with "
            + ("discrete Laplace noise, " + _range_text("scale", [float(m.param) for m in meas_mechs])
               + f" (Δ₁ = {plan.l1}), " + _range_text("ε", [m.cost for m in meas_mechs])
               if plan.pure else
               "discrete Gaussian noise, " + _range_text("σ", [math.sqrt(float(m.param)) for m in meas_mechs])
               + f" (Δ₂² = {plan.l2sq}), " + _range_text("ρ", [m.cost for m in meas_mechs]))
            + " each (per-measurement values in the model file)",
        ))

    # ---- reconstruction (post-processing) ----------------------------------------------------
    report(0.92, "Estimating the model")
    model.total = max(_noisy_total(measurements, mechs), 1.0)
    model.fit(ESTIMATION_ITERS)
    steps = model.steps()
    report(1.0, "Done")
    params = {
        "epsilon": eps,
        "delta": dlt,
        "neighbours": rel.value,
        "max_contributions": int(max_contributions),
        "accounting": "pure DP, basic composition" if plan.pure else "zCDP (discrete Gaussian + exponential mechanism)",
        "budget": plan.total,
        "spent": plan.spent,
        "cliques": [list(c) for c in model.cliques],
    }
    if not plan.pure:
        params["rho_budget"] = plan.total
        params["rho_spent"] = plan.spent
        params["epsilon_spent"] = zcdp.epsilon_from_rho(plan.spent, dlt) if plan.spent > 0 else 0.0
    if plan.spent > plan.total * (1 + 1e-12):
        raise InternalError("The marginal method over-spent its privacy budget.")
    return MarginalModel(sizes=sizes, steps=tuple(steps), noisy_total=float(model.total), measurements=measurements,
                         noise=[m.info() for m in mechs], stages=stages, params=params)


@dataclass(frozen=True)
class _Candidate:
    """One option of a round: measure ``measure``; ``kind`` says how the model changes."""

    kind: str  # "alone", "root", "attach", "grow" or "again"
    measure: tuple[int, ...]
    new: int = -1  # the column that joins (attach) or whose clique grows (grow)
    clique: int = -1  # attach: the parent clique; grow: the clique that grows


class _Model:
    """The current junction tree (cliques, parents, log-potentials) and its measurements.

    Every clique but a root (the first pair, or a column that joined alone) holds exactly one
    column that no earlier clique holds (its *new* column); its separator (the other columns)
    lies inside its parent clique. The cliques form a junction tree (a forest) at every step,
    so sampling and inference are exact.
    """

    def __init__(self, sizes: tuple[int, ...], one_way: list[np.ndarray], total: float) -> None:
        self.sizes = sizes
        self.one_way = one_way
        self.total = total
        self.cliques: list[tuple[int, ...]] = []
        self.parent: list[int] = []
        self.new: list[int] = []  # new column of each clique (-1 for the root)
        self.theta: list[np.ndarray] = []
        self.obs: list[tuple[tuple[int, ...], np.ndarray, float]] = []
        self.mu: list[np.ndarray] = []
        self.eta: float | None = None

    # -- structure ------------------------------------------------------------------------------

    @property
    def attached(self) -> set[int]:
        return {c for cl in self.cliques for c in cl}

    def rounds_needed(self) -> int:
        left = len(self.sizes) - len(self.attached)
        return left - 1 if not self.cliques else left

    def _cells(self, cols: Sequence[int]) -> int:
        return math.prod(self.sizes[c] for c in cols)

    def candidates(self, must_attach: bool) -> list[_Candidate]:
        d = len(self.sizes)
        out: list[_Candidate] = []
        att = self.attached
        if ALONE:
            # A column may join on its own (its one-way only): the right call when no pair is
            # worth its noise. Score 0: no gain, no noise.
            out.extend(_Candidate("alone", (), new=x) for x in range(d) if x not in att)
        if not self.cliques:
            return out + [_Candidate("root", (u, v)) for u, v in combinations(range(d), 2)
                          if self._cells((u, v)) <= MAX_CLIQUE_CELLS]
        for x in range(d):
            if x in att:
                continue
            for u in sorted(att):
                if self._cells((x, u)) > MAX_CLIQUE_CELLS:
                    continue
                home = max((i for i, cl in enumerate(self.cliques) if u in cl), key=lambda i: len(self.cliques[i]))
                out.append(_Candidate("attach", tuple(sorted((x, u))), new=x, clique=home))
            if TRIPLES:
                for i, cl in enumerate(self.cliques):
                    for u, v in combinations(cl, 2):
                        m = tuple(sorted((x, u, v)))
                        if self._cells(m) <= MAX_CLIQUE_CELLS:
                            out.append(_Candidate("attach", m, new=x, clique=i))
        if must_attach and out:
            return out
        for i, cl in enumerate(self.cliques):
            p = self.parent[i]
            if p < 0 or len(cl) >= MAX_CLIQUE_COLS:
                continue
            x = self.new[i]
            for v in self.cliques[p]:
                if v not in cl and self._cells(cl + (v,)) <= MAX_CLIQUE_CELLS:
                    out.append(_Candidate("grow", tuple(sorted((x, v))), new=x, clique=i))
        seen = set()
        for m, _, _ in self.obs:
            if len(m) > 1 and m not in seen:
                seen.add(m)
                out.append(_Candidate("again", m))
        return out

    def apply(self, cand: _Candidate, y: np.ndarray, variance: float) -> None:
        """Record the measurement and change the structure (the distribution is unchanged)."""
        if cand.measure:
            self.obs.append((cand.measure, y.astype(np.float64), variance))
        if cand.kind == "alone":
            self.cliques.append((cand.new,))
            self.parent.append(-1)
            self.new.append(-1)
            self.theta.append(self._independent((cand.new,)))
        elif cand.kind == "root":
            self.cliques.append(cand.measure)
            self.parent.append(-1)
            self.new.append(-1)
            self.theta.append(self._independent(cand.measure))
        elif cand.kind == "attach":
            x = cand.new
            self.cliques.append(cand.measure)
            self.parent.append(cand.clique)
            self.new.append(x)
            # x joins independent of its separator: log P(x) broadcast.
            shape = [self.sizes[c] if c == x else 1 for c in cand.measure]
            self.theta.append(np.broadcast_to(np.log(np.maximum(self.one_way[x], 1e-30)).reshape(shape),
                                              [self.sizes[c] for c in cand.measure]).copy())
        elif cand.kind == "grow":
            i = cand.clique
            old = self.cliques[i]
            v = next(c for c in cand.measure if c != cand.new)
            grown = tuple(sorted(old + (v,)))
            # Extending a potential along a new axis leaves the distribution unchanged: v is
            # already in the parent clique, and the new clique's factor does not depend on it.
            th = np.expand_dims(self.theta[i], grown.index(v))
            self.theta[i] = np.broadcast_to(th, [self.sizes[c] for c in grown]).copy()
            self.cliques[i] = grown
        self.mu = []

    def _independent(self, cols: tuple[int, ...]) -> np.ndarray:
        th = np.zeros([self.sizes[c] for c in cols])
        for k, c in enumerate(cols):
            shape = [1] * len(cols)
            shape[k] = self.sizes[c]
            th = th + np.log(np.maximum(self.one_way[c], 1e-30)).reshape(shape)
        return th

    # -- inference ------------------------------------------------------------------------------

    def _tree(self) -> _JunctionTree:
        return _JunctionTree(self.sizes, self.cliques, self.parent)

    def fit(self, iters: int) -> None:
        """Mirror descent on all measurements so far (post-processing)."""
        if not self.cliques:
            return
        tree = self._tree()
        obs = []
        for m, y, var in self.obs:
            # The smallest clique holding the measured columns (cheapest to marginalise).
            ci = min((i for i, cl in enumerate(self.cliques) if set(m) <= set(cl)),
                     key=lambda i: self._cells(self.cliques[i]), default=-1)
            if ci >= 0:  # one-ways of columns not yet in the model wait until they join
                obs.append((ci, tuple(self.cliques[ci].index(c) for c in m), y, var))
        if iters > 0:
            self.theta, self.eta = _mirror_descent(tree, self.theta, obs, self.total, iters, self.eta)
        self.mu = tree.marginals(self.theta, self.total)

    def _marg(self, cols: tuple[int, ...]) -> np.ndarray:
        """Model counts on ``cols`` (axes in sorted order); ``cols`` must lie in one clique."""
        i = next(i for i, cl in enumerate(self.cliques) if set(cols) <= set(cl))
        cl = self.cliques[i]
        drop = tuple(k for k, c in enumerate(cl) if c not in cols)
        return self.mu[i].sum(axis=drop) if drop else self.mu[i]

    def estimate(self, cand: _Candidate) -> np.ndarray:
        """The current model's counts on ``cand.measure`` (axes in sorted order)."""
        m = cand.measure
        if cand.kind == "root":
            a, b = (self.one_way[c] for c in m)
            return self.total * np.outer(a, b)
        if not self.mu:
            self.fit(0)
        if cand.kind == "again":
            return self._marg(m)
        x = cand.new
        if cand.kind == "attach":
            sep = tuple(c for c in m if c != x)
            known = self._marg(sep)  # counts, axes sorted
            px = self.one_way[x]
            pos = m.index(x)
            return np.expand_dims(known, pos) * px.reshape([self.sizes[x] if c == x else 1 for c in m])
        # grow: x ⟂ v given the separator S of x's clique C; P(x, v) = Σ_S P(x, S) P(v | S).
        i = cand.clique
        cl = self.cliques[i]
        v = next(c for c in m if c != x)
        sep = tuple(c for c in cl if c != x)
        a = self._marg(tuple(sorted(sep + (x,))))  # axes sorted(sep ∪ {x})
        a = np.moveaxis(a, tuple(sorted(sep + (x,))).index(x), 0).reshape(self.sizes[x], -1)
        b = self._marg(tuple(sorted(sep + (v,))))
        b = np.moveaxis(b, tuple(sorted(sep + (v,))).index(v), -1).reshape(-1, self.sizes[v])
        cond = b / np.maximum(b.sum(axis=1, keepdims=True), 1e-300)
        xv = a @ cond  # axes (x, v)
        return xv if x < v else xv.T

    def steps(self) -> list[Step]:
        """The fitted model as a Bayesian network in clique order (what the sampler runs)."""
        d = len(self.sizes)
        if not self.cliques:
            return [Step(new=(j,), parents=(), cpt=self.one_way[j][None, :]) for j in range(d)]
        if not self.mu:
            self.fit(0)
        out: list[Step] = []
        for i, cl in enumerate(self.cliques):
            mu = self.mu[i]
            if self.parent[i] < 0:
                out.append(Step(new=cl, parents=(), cpt=(mu / max(mu.sum(), 1e-300)).reshape(1, -1)))
                continue
            x = self.new[i]
            sep = tuple(c for c in cl if c != x)
            t = np.moveaxis(mu, cl.index(x), -1).reshape(self._cells(sep), self.sizes[x])
            rs = t.sum(axis=1, keepdims=True)
            # A separator cell whose probability underflowed is never sampled; give it a valid row anyway.
            cpt = np.where(rs > 0, t / np.where(rs > 0, rs, 1.0), 1.0 / t.shape[1])
            out.append(Step(new=(x,), parents=sep, cpt=cpt))
        return out


class _JunctionTree:
    """Cliques (sorted column tuples) with parents earlier in the list; exact inference."""

    def __init__(self, sizes: tuple[int, ...], cliques: list[tuple[int, ...]], parent: list[int]) -> None:
        self.sizes = sizes
        self.cliques = cliques
        self.parent = parent

    def _msg(self, table: np.ndarray, src: int, dst: int) -> np.ndarray:
        """Sum of ``table`` (on clique src) onto the separator, rescaled to max 1, shaped for dst."""
        a, b = self.cliques[src], self.cliques[dst]
        drop = tuple(i for i, c in enumerate(a) if c not in b)
        m = table.sum(axis=drop) if drop else table
        mx = m.max()
        if mx > 0:
            m = m / mx
        return m.reshape([self.sizes[c] if c in a else 1 for c in b])

    def marginals(self, theta: list[np.ndarray], total: float) -> list[np.ndarray]:
        """Clique marginals scaled to ``total`` rows: sum-product, upward then downward.

        Works on exp(θ − max θ) per clique with every message rescaled to a maximum of 1 (the
        scale of a message cancels in the normalised beliefs), which is exact up to floating
        point and several times faster than log-domain passes.
        """
        n = len(self.cliques)
        phi = [np.exp(t - t.max()) for t in theta]
        children: list[list[int]] = [[] for _ in range(n)]
        for i, p in enumerate(self.parent):
            if p >= 0:
                children[p].append(i)
        up = list(phi)
        to_parent: list[np.ndarray] = [np.empty(0)] * n
        for i in reversed(range(n)):
            p = self.parent[i]
            if p >= 0:
                to_parent[i] = self._msg(up[i], i, p)
                up[p] = up[p] * to_parent[i]
        down: list[np.ndarray | float] = [1.0] * n
        for i in range(n):
            for c in children[i]:
                rest = phi[i] * down[i]
                for o in children[i]:
                    if o != c:
                        rest = rest * to_parent[o]
                down[c] = self._msg(rest, i, c)
        out = []
        for i in range(n):
            b = up[i] * down[i]
            mx = b.max()
            if not mx > 0:  # everything underflowed: no information left, stay valid
                out.append(np.full(b.shape, total / b.size))
                continue
            b = b / mx
            out.append(b * (total / b.sum()))
        return out


def _mirror_descent(tree: _JunctionTree, theta: list[np.ndarray], obs: list[tuple[int, tuple[int, ...], np.ndarray, float]],
                    total: float, iters: int, eta: float | None = None) -> tuple[list[np.ndarray], float]:
    """Minimise Σ_m ‖M_m(μ) − y_m‖²/Var_m over junction-tree models with Σμ = total: entropic
    mirror descent with a step that grows on success and halves on failure (McKenna et al. 2019,
    Private-PGM). ``obs`` holds (clique index, clique axes of the measured columns, noisy
    counts, noise variance). Returns the potentials and the last step size."""

    def loss_grad(mu: list[np.ndarray]) -> tuple[float, list[np.ndarray]]:
        loss = 0.0
        grads = [np.zeros_like(m) for m in mu]
        for ci, keep, y, var in obs:
            drop = tuple(i for i in range(mu[ci].ndim) if i not in keep)
            # keep is increasing (measured sets and cliques are sorted), so axes already match y.
            r = (mu[ci].sum(axis=drop) if drop else mu[ci]) - y
            loss += float((r * r).sum()) / var
            g = (2.0 / var) * r
            grads[ci] += np.expand_dims(g, drop) if drop else g
        return loss, grads

    mu = tree.marginals(theta, total)
    loss, grads = loss_grad(mu)
    if eta is None:
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
    return theta, eta


def _stage(name: str, plan: _Plan, cost: float, detail: str) -> dict[str, Any]:
    unit = "epsilon" if plan.pure else "rho"
    return {"stage": name, unit: cost, "share": cost / plan.total if plan.total else 0.0,
            "guarantee": (f"{cost:.6g}-DP" if plan.pure else f"{cost:.6g}-zCDP"), "detail": detail}


def _range_text(name: str, values: list[float]) -> str:
    if not values:
        return f"no {name}"
    lo, hi = min(values), max(values)
    return f"{name} = {lo:.4g}" if math.isclose(lo, hi, rel_tol=1e-9) else f"{name} from {lo:.4g} to {hi:.4g}"


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
