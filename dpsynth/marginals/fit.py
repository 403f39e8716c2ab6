"""Fitting the marginal model: one-way marginals, rounds of selection and measurement, estimation.

The stages, their guarantees and how they compose are described in :mod:`dpsynth.marginals`;
the budget of each stage comes from :mod:`dpsynth.marginals.budget`, the model and its fit from
:mod:`dpsynth.marginals.estimation`. This module is the only one that reads the data, and it
does so only through the mechanisms: noisy counts (:class:`~dpsynth.marginals.budget.Measurement`)
and the exponential mechanism's choices.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np

from dpsynth import zcdp
from dpsynth.errors import InputError, InternalError
from dpsynth.marginals import budget as _budget
from dpsynth.marginals.budget import (
    Capacity,
    Measurement,
    Plan,
    allocate,
    capacity,
    mech_text,
    noisy_total,
    range_text,
    stage,
)
from dpsynth.marginals.estimation import Candidate, TreeModel, project_simplex
from dpsynth.marginals.model import MarginalModel, Step
from dpsynth.marginals.pair_factors import (
    PairFactor,
    conditional_logits,
    config_index,
    coupled_values,
    fit_factor,
    target_table,
)
from dpsynth.mechanisms import check_delta, check_epsilon, exponential_mechanism
from dpsynth.neighbours import Neighbours
from dpsynth.randomness import fast_rng, post_processing_seed

# Weight of the expected-noise term in the selection score (AIM uses 1; the estimation removes
# much of the noise in empty cells, so the raw expectation overstates it).
PENALTY_FACTOR = 0.3
# Mirror-descent iterations at the end (after ROUND_ITERS warm-started ones per round) on the wide path and,
# times PROPORTIONAL_ITERS_FACTOR, the proportional one; elsewhere MOMENTUM_ITERS with momentum.
ESTIMATION_ITERS = 300
# κ of the proportional-fitting steps of the final estimation (estimation.mirror_descent), taken
# from budget.PROPORTIONAL_SNR on: a cell's step is damped by κ noise standard deviations. On one
# Adult release at ε = 10, κ = 3, 10 and 30 gave 3-way TVD 0.0244, 0.0244 and 0.0246 (plain steps
# 0.0257); κ = 0.2 gave 0.0259.
PRECONDITION = 10.0
# With proportional steps the final estimation converges sooner: 4/3 × ESTIMATION_ITERS iterations
# (half of them proportional) whatever the capacity's iters_factor. Paired whole Adult releases
# (seeds 2000–2003, the constant set in one process): at ε = 10, 400 instead of 600 iterations gave the same TVD
# (−0.0000 / −0.0000) in 10.2 s instead of 12.7 s (300: +0.0001 / +0.0001 in 8.8 s); at ε = 3,
# 400 instead of 300 gave −0.0000 / −0.0001.
PROPORTIONAL_ITERS_FACTOR = 4 / 3
# Rounds of selection per column after the first (≥ 1: every column must join the model; the
# rest grow cliques or measure again, as in AIM).
ROUNDS_PER_COLUMN = 3.0
# Offer three-way measurements when a column joins (besides pairs).
TRIPLES = False
# Offer "join alone" (no pair measured) for each column not yet in the model.
ALONE = True
# Proportional-fitting passes that bring the model's one-ways to the one-way estimates when the
# capacity plan moved budget to the one-ways (the wide path), at most; each is one inference pass
# (about 2 ms on 100 columns). The raking's damped steps (estimation.TreeModel.rake) converge slowly
# on long chains of dependent columns: a 100-column random walk in 8 bins (50,000 rows, ε = 1) kept a
# one-column TVD 1.47× that of independent noisy one-ways after 30 passes, 0.98× after 200.
RAKE_ITERS = 400
# Below this signal-to-noise of a typical pair the fitted model is raked to the one-way targets as well (the
# inverse-variance mean of every released table summed onto each column, projected onto counts): there the
# pairs are noisy, the fit stopped early (DISCREPANCY) keeps one-ways a good deal further from the data than
# those targets, and sparse noisy pairs drive many cells to 0 (politicalInformation, 1,807 rows: five
# pairs of an 80-category age with yes/no columns left 27 ages empty; its one-column TVD 0.33, the targets'
# 0.22). Paired releases, 2-/3-way TVD (geometric mean, this ÷ without): the 14 AIM tables at ε = 1 (12 seeds)
# 0.997 / 0.997 (the AR(1) panel, at 1.6, −3.5% / −3.7%; the others unchanged or within noise), at ε = 0.3
# 0.998 / 0.998; 52 R tables (benchmarks/bench_independent.py, 2 seeds) at ε = 1 0.997 / 0.997 (12 raked:
# Chile −8%, bfeed −6%, arthritis −5%; dietox +3%, PatentsRD +2%) and at ε = 0.3 0.995 / 0.993 (29 raked;
# medpar −8%, Cracker −7%, colon −6%; mdvis +7%, RetSchool +7%, Tuna +6%); mean KS of the R tables 0.0316 →
# 0.0314. Adult (18.7 at ε = 1) is not raked: raking every release cost it 1.3–3.4 s of its 5.
RAKE_SNR = 3.0
# Mirror-descent iterations after each round (warm-started); the final fit has its own (ESTIMATION_ITERS, MOMENTUM_ITERS).
ROUND_ITERS = 12
# The final estimation (plain steps) stops once its loss, a χ² of the measured cells, is down to this
# many per cell (1 in expectation at the truth): a model that already fits its measurements that much
# better than the truth would has absorbed their noise, and stopping early shrinks it towards the
# smoother model the rounds built. Paired whole releases at ε = 1 (seeds 2000+, 16–24):
# Fair's affairs table (benchmarks/tables, loss at 0.60 per cell when the final fit starts)
# −0.0020 ± 0.0003 / −0.0038 ± 0.0004 2-/3-way TVD (−6%), at ε = 2 −0.0008 / −0.0019; Titanic (0.80)
# −0.0009 ± 0.0006 / −0.0024 ± 0.0009; Adult (0.89, reaching 0.80 only at the last iterations)
# +0.0000 / +0.0000 at ε = 1 (8 seeds) and +0.0001 / −0.0000 at ε = 0.5; the RAND extract (0.91)
# +0.0000 / +0.0000; Titanic at ε = 3 and 10 within ±0.0003. A threshold of 1 stopped every table at
# once and cost Adult +0.0009 / +0.0015 and the RAND extract +0.0004 / +0.0006; so did a fixed 25
# iterations. (The proportional-fitting path, from budget.PROPORTIONAL_SNR, runs to its end, and so does
# the wide path, whose one-ways are raked afterwards: stopped early, the generated 100 × 50,000 table's
# one-column TVD rose 0.2%, to parity with independent noisy one-ways.)
DISCREPANCY = 0.8
#: Momentum of the final fit's plain steps where they stop early (:data:`DISCREPANCY`): the heavy ball of Polyak
#: 1964, restarted whenever a step is refused (O'Donoghue & Candès 2015) …
MOMENTUM = 0.7
#: … and its iterations. The loss that 300 plain steps reach on Adult at ε = 1 takes about 150 with momentum,
#: and the fit's cost is its iterations (one pass of inference each): Adult's final fit at ε = 1 (seeds 2000,
#: 2005, 2007) took 0.76 / 0.23 / 1.11 s instead of 1.72 / 0.58 / 2.22, the whole release 3.8 s instead of
#: 4.5 on average over seeds 2000–2007 (two runs of each version, alternated; the slowest seed 5.4 s instead of
#: 6.7), with the same 2-/3-way TVD (paired, 8 seeds: −0.0000 / −0.0000 at
#: ε = 1, −0.0001 / −0.0001 at 0.3). The 14 tables of the AIM yardstick at ε = 1 (12 paired seeds):
#: 0.9999 / 1.0002 × the plain steps'; the 52 R tables at ε = 1 0.9998 / 0.9997, at ε = 0.3 1.0000 / 1.0001,
#: at ε = 10 0.997 / 0.999 × their floor ratios (2 seeds). Momentum run to the discrepancy (300 iterations)
#: fitted more of the noise: 1.0025 / 1.0026 on the 14 (the RAND extract +1.4%, the lab panel +1%). In the
#: rounds' fits, momentum with 6 or 8 steps instead of 12 plain ones moved the selections: 0.995 / 0.996 on the
#: 14, but 1.007 / 1.005 and 1.008 / 1.007 on the 52 R tables.
MOMENTUM_ITERS = 150
#: Decimals of the released conditional tables (post-processing). Written in full, Adult's model.json
#: at ε = 1 took 26 MB (17 significant digits per probability, 0.7 s to write, 1.5 s to compress);
#: rounded to 7 decimals it is 12.5 MB (0.3 s, 0.6 s) and samples the same law to within 5e-8 per
#: cell (probabilities below that become 0: under 0.003 expected rows in a table of 50,000).
CPT_DECIMALS = 7
#: Rows of the working sample on which pair factors are scored and fitted, whatever the table's size (a
#: public constant). When it was the noisy total capped at this: Adult at ε = 10 with a cap of 32,768
#: instead of its 48,842 rows gave +0.0004 / +0.0007 TVD (4 paired seeds; ε = 1: +0.0001 / +0.0001), and a
#: generated 16-column table of 200,000 rows at ε = 10 took 21 s instead of 26 s (15.4 s without factors). A
#: table under the cap got a working sample of its own noisy total, and its factors' terms (up to a hundred
#: configurations × the column's categories) were fitted to that sample's chance sparsity: on the flchain
#: table (7,874 rows, a 51-bin creatinine) at ε = 10 one release in six drew creatinine 0.26 from its
#: one-way (2-way TVD 3.9 × the sampling floor), on rwm1984 (3,874 rows) one in three drew three columns
#: 0.14–0.26 from theirs (0.0791 / 0.1091 against 0.0067 / 0.0142 now).
#: On 52 real tables of 800–54,000 rows (benchmarks/tables/fetch_rdatasets.py, 6 seeds at ε = 10): 2-/3-way
#: TVD −1.4% / −1.0% (geometric mean; flchain −0.21 / −0.14 × the floor, Workinghours −0.05 / −0.05), 11
#: unchanged, the largest loss Catsup +0.03 / +0.02 ± 0.02; paired releases at ε = 10 (8 seeds): Titanic
#: −0.0005 / −0.0012, Fair −0.0002 / −0.0008, the RAND extract −0.0003 / −0.0005, Adult −0.0001 / −0.0001 (4
#: seeds). At ε = 1 the 52 tables moved ±0.0% (45 have no factors there).
FACTOR_WORK_ROWS = 1 << 16
#: A measured pair becomes a factor only if it differs from the model's table by more than noise: its
#: χ²-like statistic Σ (y − est)² / (σ² + est·(1 + scale)) (the noise, the data's and the working sample's
#: multinomial spread) above cells + SKIP_NULL_Z·√(2·cells). On a generated table of mostly independent
#: columns (benchmarks/bench_factors.py --table mixed --rows 20000, 6 seeds) factors against none went
#: +0.0004 / +0.0006 → +0.0002 / +0.0003 at ε = 1 and +0.0004 / +0.0004 → +0.0001 / +0.0002 at ε = 3;
#: Adult at ε = 1 unchanged, at ε = 10 one factor of 12 skipped (+0.0001 / +0.0002, 4 seeds).
SKIP_NULL_Z = 2.0
#: Stream key of the working sample's generator under a seed drawn from the release's generator.
FACTOR_KEY = 3
#: A measured pair or triple whose noisy table departs from the product of its own noisy one-way margins
#: by no more than its noise — Σ (y − product)² ≤ σ²·df·(1 + INDEPENDENCE_Z·√(2/df)), df the degrees of
#: freedom of independence, the mean plus INDEPENDENCE_Z sds of the statistic when the columns are
#: independent — enters the fit as that product (a pretest estimator; post-processing of the released
#: table, which the model file keeps as measured). Fitting a noisy table whose interaction is all noise
#: copies the noise into the model: on a generated table of independent columns
#: (``bench_marginals.py --only survey``, 10 seeds, ε = 1) 0.0117 / 0.0225 → 0.0109 / 0.0208 (0.93 / 0.91
#: → 0.87 / 0.84 × AIM); Titanic, Fair and Adult unchanged (Adult's pairs are all far from independence);
#: weak real structure is lost where it is under the noise: the RAND extract 0.0068 / 0.0145 → 0.0072 /
#: 0.0150 (0.68 → 0.71 × AIM) and the lab panel 0.0167 / 0.0287 → 0.0169 / 0.0289. 2 lost more there and
#: gained less on the survey; shrinking every pair's interaction by a James–Stein factor instead took
#: Titanic from 0.86 to 1.01 × AIM.
INDEPENDENCE_Z = 1.0

Progress = Callable[[float, str], None]


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


def _one_way_targets(sizes: tuple[int, ...], measurements: list[tuple[tuple[int, ...], np.ndarray]],
                     mechs: list[Measurement], total: float) -> list[np.ndarray]:
    """Each column's proportions from every released table in ``measurements`` that holds it (post-processing): the
    inverse-variance mean of the tables summed onto the column (a table's sum over other columns of c
    cells carries c times its per-cell noise variance; every such sum estimates the same counts),
    projected onto counts with the noisy ``total`` (:func:`project_simplex`)."""
    num: list[Any] = [0.0] * len(sizes)
    den = [0.0] * len(sizes)
    for (cols, y), m in zip(measurements, mechs, strict=True):
        for k, j in enumerate(cols):
            onto = y.sum(axis=tuple(a for a in range(len(cols)) if a != k)) if len(cols) > 1 else y
            v = m.variance * (y.size // sizes[j])
            num[j] = num[j] + onto / v
            den[j] += 1.0 / v
    out = []
    for j, s in enumerate(sizes):
        t = project_simplex(num[j] / den[j], total) if den[j] > 0 else np.zeros(s)
        out.append(t / t.sum() if t.sum() > 0 else np.full(s, 1.0 / s))
    return out


def _pair_gaps(codes: np.ndarray, sizes: tuple[int, ...], weights: np.ndarray | None,
               one_way: list[np.ndarray], total: float, max_cells: int) -> np.ndarray:
    """‖M_uv(D) − N̂·p̂_u⊗p̂_v‖₁ for every pair u < v (a d × d array, upper triangle): the AIM score's
    gap against the independent model built from the released one-ways. Adding or removing one
    person moves each entry by at most Δ₁ (only the data counts change)."""
    d = len(sizes)
    out = np.zeros((d, d))
    # Contiguous int32 columns: one small bincount per pair is faster than batching pairs.
    cols = [np.ascontiguousarray(codes[:, j], dtype=np.int32 if max_cells < 2**31 else np.int64) for j in range(d)]
    w = None if weights is None else weights.astype(np.float64)
    for u in range(d - 1):
        for v in range(u + 1, d):
            if sizes[u] * sizes[v] > max_cells:  # never a candidate
                continue
            counts = np.bincount(cols[u] * sizes[v] + cols[v], weights=w, minlength=sizes[u] * sizes[v])
            out[u, v] = float(np.abs(counts - total * np.outer(one_way[u], one_way[v]).ravel()).sum())
    return out


def _again_gain(gap: float, var: float, cells: int, var_new: float) -> float:
    """The score's gap for measuring a marginal again: what a new measurement can mend.

    The gap ‖x − μ‖₁ of a measured marginal mixes the noise left in its measurements (merged
    variance ``var``) with how far the few warm-started fitting steps still are from them, which
    measuring again does not mend (at large ε the raw gap bought re-measures of clean marginals).
    So the gap is capped at the expected L1 noise of the earlier measurements, √(2/π·var)·cells,
    and scaled by the share of the noise's standard deviation a new measurement of variance
    ``var_new`` removes, 1 − √(var_new/(var + var_new)) (inverse-variance merging). Both factors
    are public, so the score's sensitivity does not grow.
    """
    return min(gap, math.sqrt(2.0 / math.pi * var) * cells) * (1.0 - math.sqrt(var_new / (var + var_new)))


class _RoundSpend:
    """The rounds' selections and measurements, each spent through ``plan`` and recorded (the tree's
    rounds and the pair factors' share it)."""

    def __init__(self, plan: Plan, rng: np.random.Generator, measurements: list, mechs: list) -> None:
        self.plan, self.rng = plan, rng
        self.measurements, self.mechs = measurements, mechs
        self.sel_eps_used: list[float] = []
        self.meas_mechs: list[Measurement] = []
        self.sel_spent = self.meas_spent = 0.0

    def select(self, scores: np.ndarray, budget: float) -> int:
        """The exponential mechanism's choice among ``scores`` at ``budget``; with one candidate there
        is no choice to make: nothing depends on the data, nothing is spent."""
        if len(scores) == 1:
            return 0
        eps = self.plan.selection_epsilon(budget)
        self.sel_eps_used.append(eps)
        self.sel_spent += eps if self.plan.pure else eps * eps / 8.0
        return exponential_mechanism(scores, self.plan.l1, eps, rng=self.rng)

    def measure(self, cols: tuple[int, ...], counts: np.ndarray, budget: float) -> tuple[np.ndarray, Measurement]:
        """Noisy ``counts`` of ``cols`` at ``budget``, recorded as a released measurement."""
        mech = self.plan.measurement(budget)
        self.meas_spent += mech.cost
        self.meas_mechs.append(mech)
        y = mech(counts, rng=self.rng)
        self.measurements.append((cols, y))
        self.mechs.append(mech)
        return y, mech


@dataclass(frozen=True)
class _Observed:
    """The noise of a one-way observation from elsewhere (``fit_marginal_model``'s ``one_way_observations``)."""

    variance: float


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
    one_way_observations: Mapping[int, tuple[np.ndarray, float]] | None = None,
) -> MarginalModel:
    """Fit the junction-tree marginal model; the whole fit is (ε, δ)-DP (pure ε-DP when δ = 0).

    See the module docstring for the stages, their guarantees and their composition. With
    ``weights``, row i of ``codes`` stands for ``weights[i]`` identical records (an engine's
    occupied cells and their counts, :meth:`dpsynth.engines.CellCounts.occupied_codes`): every
    marginal, hence the released model and its guarantee, is that of the expanded table.

    ``one_way_observations`` maps a column to noisy counts of its cells released by another mechanism of
    the same release and their noise variance per cell (the value model's bin counts of a numeric column,
    :func:`dpsynth.value_model.bin_count_observations`). They join the released one-ways wherever those are
    used (the noisy total, the one-way estimates, the capacity plan, the fit and its raking) and are not
    part of this model's measurements. Using released values is post-processing: the guarantee above is
    this fit's, and the release composes it with the other mechanism's.
    """
    eps, dlt = check_epsilon(epsilon), check_delta(delta)
    rel = Neighbours.parse(neighbours)
    codes, sizes = _validate(codes, sizes)
    if weights is not None:
        weights = np.asarray(weights)
        if weights.shape != (len(codes),) or not np.issubdtype(weights.dtype, np.integer) or (weights < 0).any():
            raise InputError("weights must be one whole number ≥ 0 per row of codes.")
        weights = weights.astype(np.int64, copy=False)
    order = layout(sizes)
    observed = []
    for j, (y, var) in sorted((one_way_observations or {}).items()):
        y = np.asarray(y, dtype=np.float64)
        if not (0 <= j < len(sizes) and y.shape == (sizes[j],) and np.isfinite(y).all() and var > 0):
            what = f"its {sizes[j]} cells" if 0 <= j < len(sizes) else f"the {len(sizes)} columns"
            raise InputError(f"A one-way observation of column {j} does not fit {what} (finite counts, variance > 0).")
        observed.append(((order.index(j),), y, float(var)))
    # Columns contiguous (every count reads whole columns), in the model's layout.
    inner = np.asfortranarray(codes[:, list(order)])
    model = _fit(inner, tuple(sizes[c] for c in order), weights, eps, dlt, rel, max_contributions, rng,
                 progress or (lambda _f, _m: None), observed)
    return _to_original(model, sizes, order)


def layout(sizes: Sequence[int]) -> tuple[int, ...]:
    """The order in which the model holds the columns: fewest cells first (ties by position).

    Clique tables keep their columns in this order, so a clique's last, contiguous axis is its
    largest column. numpy runs the inner loop of a broadcast product or a reduction along the last
    axis, and a two-cell last axis (a yes/no column at the end of the table) made the fit's
    products about 10× slower. The order depends on the public sizes only.
    """
    return tuple(sorted(range(len(sizes)), key=lambda j: (sizes[j], j)))


def _relabel(cols: tuple[int, ...], order: tuple[int, ...]) -> tuple[tuple[int, ...], list[int]]:
    """Columns ``cols`` of the layout as table columns (sorted), and the axis permutation that
    takes a table over ``cols`` to one over them."""
    orig = [order[c] for c in cols]
    perm = sorted(range(len(cols)), key=lambda k: orig[k])
    return tuple(orig[k] for k in perm), perm


def _to_original(model: MarginalModel, sizes: tuple[int, ...], order: tuple[int, ...]) -> MarginalModel:
    """The model fitted in :func:`layout` order, with the table's column numbers and axis orders."""
    steps = []
    for s in model.steps:
        parents, pp = _relabel(s.parents, order)
        new, pn = _relabel(s.new, order)
        inner = [model.sizes[c] for c in s.parents + s.new]
        cpt = s.cpt.reshape(inner).transpose(pp + [len(pp) + k for k in pn])
        cpt = np.round(np.ascontiguousarray(cpt).reshape(s.cpt.shape), CPT_DECIMALS)
        steps.append(Step(new=new, parents=parents, cpt=cpt))
    measurements = []
    for cols, y in model.measurements:
        orig, perm = _relabel(cols, order)
        measurements.append((orig, np.ascontiguousarray(y.transpose(perm))))
    # The one-way installments come first, d tables each; list each installment by column.
    d, listed = len(sizes), list(range(len(measurements)))
    ones = next((i for i, (c, _) in enumerate(measurements) if len(c) > 1), len(measurements))
    for b in range(0, ones - ones % d, d):
        listed[b:b + d] = sorted(listed[b:b + d], key=lambda i: measurements[i][0])
    params = dict(model.params)
    params["cliques"] = [list(_relabel(tuple(c), order)[0]) for c in params.get("cliques", [])]
    factors = tuple(PairFactor(order[f.given], order[f.col], f.log_phi,
                               tuple((tuple(order[c] for c in cols), lam) for cols, lam in f.kept))
                    for f in model.factors)
    return MarginalModel(sizes=sizes, steps=tuple(steps), noisy_total=model.noisy_total,
                         measurements=[measurements[i] for i in listed], noise=[model.noise[i] for i in listed],
                         stages=model.stages, params=params, factors=factors)


def _fit(codes: np.ndarray, sizes: tuple[int, ...], weights: np.ndarray | None, eps: float, dlt: float,
         rel: Neighbours, max_contributions: int, rng: np.random.Generator, report: Progress,
         observed: Sequence[tuple[tuple[int, ...], np.ndarray, float]] = ()) -> MarginalModel:
    """:func:`fit_marginal_model` on validated input, its columns in :func:`layout` order (``observed``: the
    one-way observations from elsewhere, (column, counts, variance))."""
    d = len(sizes)
    plan = Plan(eps, dlt, rel, max_contributions)

    one_share = _budget.first_one_way_share(plan.pure, d)
    budget_one = plan.total * one_share
    stages: list[dict[str, Any]] = []

    # ---- stage 1: one-way marginals ---------------------------------------------------------
    report(0.02, "Measuring one-way marginals")
    measurements: list[tuple[tuple[int, ...], np.ndarray]] = []
    mechs: list[Measurement] = []
    one_counts = [_counts(codes, sizes, (j,), weights) for j in range(d)]

    # Each installment of one-ways: its mechanisms, and whether one mechanism served every column.
    installments: list[tuple[list[Measurement], bool]] = []

    def measure_one_ways(budget: float) -> None:
        """Every column's one-way with the same mechanism at ``budget / d``."""
        mech = plan.measurement(budget / d)
        plan.spent += mech.cost * (d - 1)  # the same mechanism is applied to each of the d columns
        for j in range(d):
            measurements.append(((j,), mech(one_counts[j], rng=rng)))
            mechs.append(mech)
        installments.append(([mech], True))

    def measure_each(budgets: Sequence[float]) -> None:
        """Column j's one-way at ``budgets[j]`` (none at 0): an installment whose columns differ."""
        out = []
        for j in range(d):
            if budgets[j] > 0:
                out.append(plan.measurement(budgets[j]))
                measurements.append(((j,), out[-1](one_counts[j], rng=rng)))
                mechs.append(out[-1])
        installments.append((out, False))

    def one_cost() -> float:
        return sum(ms[0].cost * d if shared else sum(m.cost for m in ms) for ms, shared in installments)

    def tables() -> tuple[list[tuple[tuple[int, ...], np.ndarray]], list[Any]]:
        """Every released table so far and its noise, with the one-way observations from elsewhere."""
        return measurements + [(m, y) for m, y, _ in observed], mechs + [_Observed(v) for _, _, v in observed]

    def one_way_estimates() -> tuple[float, list[np.ndarray]]:
        """Noisy total and one-way proportions from the one-way measurements (the only ones so far)."""
        tot = max(noisy_total(*tables()), 1.0)
        return tot, _one_way_targets(sizes, *tables(), tot)

    measure_one_ways(budget_one)
    total, one_way = one_way_estimates()
    # How much model the budget buys, from public sizes and the released one-ways; a second
    # installment of one-ways when the pairs would cost the one-column accuracy too much.
    cap = capacity(plan, sizes, total, one_way, ROUNDS_PER_COLUMN, one_share)
    if cap.small_pairs:
        measure_each([plan.total * x / d for x in cap.one_way_cols])
        total, one_way = one_way_estimates()
    elif cap.one_way_extra > 0:
        measure_one_ways(plan.total * cap.one_way_extra)
        total, one_way = one_way_estimates()
    budget_sel = plan.total * cap.select_share
    budget_meas = max(0.0, plan.total - one_cost() - budget_sel) if cap.rounds else 0.0
    if cap.small_pairs:  # the rest goes back to the one-ways after the rounds
        budget_meas = min(budget_meas, plan.total * cap.pairs_share)

    # ---- stage 2+3: rounds of selection and measurement --------------------------------------
    # Clique limits (cells, columns) grow with the signal-to-noise (budget.CLIQUE_LIMITS); a clique is
    # measured through its pairs (and triples), so it may hold more columns than any measurement.
    model = TreeModel(sizes, one_way, total, max_cells=cap.max_cells, max_cols=cap.max_cols,
                      triples=TRIPLES or cap.triples, alone=ALONE,
                      one_ways_again=cap.one_ways_in_fit and cap.snr >= _budget.ONE_WAYS_AGAIN_SNR)
    # With a second installment (noisy pairs) the one-ways are observations of the fit, as in
    # Private-PGM; with clean pairs fitting them cost a little (budget.ONE_WAY_MORE_SNR).
    if cap.one_ways_in_fit:
        for (m, y), mech in zip(*tables(), strict=True):
            model.obs.append((m, y.astype(np.float64), mech.variance))
    counts_cache: dict[tuple[int, ...], np.ndarray] = {}

    def real(m: tuple[int, ...]) -> np.ndarray:
        if m not in counts_cache:
            counts_cache[m] = _counts(codes, sizes, m, weights)
        return counts_cache[m]

    gap_vs_independent = _pair_gaps(codes, sizes, weights, one_way, total, cap.max_cells) if cap.wide and cap.rounds else None
    rounds_total = cap.rounds + cap.inside_rounds
    # The pair-factor rounds (after the tree's) take their share of the selection and measurement
    # budgets as rounds of their own.
    factor_share = cap.pair_factors / (rounds_total + cap.pair_factors) if cap.pair_factors else 0.0
    sel_left, meas_left = budget_sel * (1.0 - factor_share), budget_meas * (1.0 - factor_share)
    spend = _RoundSpend(plan, rng, measurements, mechs)
    round_weights: list[float] = []
    factor_rounds, first, exhausted = cap.pair_factors, 0, False
    within_noise = inside_measured = 0
    while True:
        for t in range(first, rounds_total):
            rounds_left = rounds_total - t
            report(0.05 + 0.85 * t / rounds_total, f"Selecting marginal {t + 1} of {rounds_total}")
            round_sel = sel_left / rounds_left
            # the inside rounds come after the tree's (budget.INSIDE_SNR): its structure is built first
            model.inside = cap.inside_rounds > 0 and t >= cap.rounds
            cands = model.candidates(must_attach=model.rounds_needed() >= rounds_left)
            if not cands:  # nothing left to measure within the size caps; the rest stays unspent
                exhausted = True
                break
            scores = np.empty(len(cands))
            # By cells: the measurement this round would buy, hence its expected noise, depends on the size only.
            planned: dict[int, Measurement] = {}
            for i, cand in enumerate(cands):
                if cand.kind == "alone":
                    scores[i] = 0.0
                    continue
                cells = math.prod(sizes[c] for c in cand.measure)
                if cells not in planned:
                    planned[cells] = plan.preview(allocate(meas_left, rounds_left, cells ** _budget.ALLOC_POWER,
                                                           round_weights))
                if gap_vs_independent is not None:  # wide path: both kinds are pairs scored vs independence
                    gap = float(gap_vs_independent[cand.measure])
                else:
                    est = model.estimate(cand)
                    gap = float(np.abs(real(cand.measure) - est).sum())
                    # a one-way offered again (budget.ONE_WAYS_AGAIN_SNR) keeps its whole gap, as in AIM
                    if cand.kind == "again" and len(cand.measure) > 1:
                        gap = _again_gain(gap, model.measured_variance(cand.measure), est.size, planned[cells].variance)
                scores[i] = gap - PENALTY_FACTOR * planned[cells].mean_abs * cells
            sel_left -= round_sel
            cand = cands[spend.select(scores, round_sel)]
            if cand.kind == "alone":
                model.apply(cand, np.zeros(0), 1.0)  # nothing measured; the budget stays for later rounds
                continue
            weight = math.prod(sizes[c] for c in cand.measure) ** _budget.ALLOC_POWER
            round_meas = allocate(meas_left, rounds_left, weight, round_weights)
            round_weights.append(weight)
            meas_left -= round_meas
            y, mech = spend.measure(cand.measure, real(cand.measure), round_meas)
            fitted = independent_within_noise(y, tuple(sizes[c] for c in cand.measure), mech.variance)
            within_noise += fitted is not y
            inside_measured += cand.kind == "inside"
            model.apply(cand, fitted, mech.variance)
            if gap_vs_independent is None:  # the wide path's scores do not read the fitted model
                model.fit(ROUND_ITERS * cap.iters_factor)
        # Fewer pairs outside the cliques than factor rounds planned (a small table the tree covers):
        # the spare rounds' budget buys more rounds of the tree instead (public: sizes and selections).
        spare = factor_rounds - min(factor_rounds, len(_pairs_outside(model.cliques, d)))
        if exhausted or spare == 0 or first == rounds_total:
            break
        sel_left += budget_sel * factor_share * spare / cap.pair_factors
        meas_left += budget_meas * factor_share * spare / cap.pair_factors
        factor_rounds -= spare
        first, rounds_total = rounds_total, rounds_total + spare
    in_rounds = len(spend.meas_mechs)  # the tree's measurements (the pair factors' come later)
    if cap.small_pairs:
        returned = _small_pairs_return(cap, d, plan.total, plan.total - plan.spent,
                                       {c for cols, _ in measurements if len(cols) > 1 for c in cols})
        if returned:
            n_before = len(measurements)
            measure_each(returned)
            for (m, y), mech in zip(measurements[n_before:], mechs[n_before:], strict=True):
                model.obs.append((m, y.astype(np.float64), mech.variance))
    stages.append(stage("one-way marginals", plan, one_cost(),
                        f"{d} one-way marginals, " + " then again with ".join(
                            _installment_text(ms, shared, plan) for ms, shared in installments)))
    for x in range(d):
        if d > 1 and x not in model.attached:  # only if the rounds ran out (e.g. one round per column)
            model.apply(Candidate("alone", (), new=x), np.zeros(0), 1.0)

    # ---- reconstruction (post-processing) ----------------------------------------------------
    report(0.9, "Estimating the model")
    model.total = max(noisy_total(*tables()), 1.0)
    if cap.proportional:
        final_iters = round(ESTIMATION_ITERS * PROPORTIONAL_ITERS_FACTOR)
        model.fit(final_iters, PRECONDITION)
    elif cap.wide:  # plain steps to the end: no early stop (see DISCREPANCY)
        final_iters = ESTIMATION_ITERS * cap.iters_factor
        model.fit(final_iters)
    else:
        final_iters = MOMENTUM_ITERS * cap.iters_factor
        model.fit(final_iters, discrepancy=DISCREPANCY, momentum=MOMENTUM)
    if (cap.one_way_extra > 0 and not cap.one_ways_in_fit) or cap.snr < RAKE_SNR:
        # The budget moved to the one-ways buys one-column accuracy only if the model keeps it (the wide
        # path); the pairs measured since carry a little more of it. Below RAKE_SNR the fit, stopped early on
        # noisy pairs, keeps one-ways further from the data than the targets. The small pairs (below
        # MIN_PAIR_SNR, so below RAKE_SNR too) need it most: their one-ways measured after the rounds are
        # observations the fit, started from the earlier ones, has not reached (without the raking the ANES
        # extract's mean KS rose 0.020 rather than 0.006).
        model.rake(_one_way_targets(sizes, *tables(), model.total), RAKE_ITERS)
    steps = model.steps()

    # ---- pair factors: pairs no clique holds (selection and measurement, then post-processing) --
    factors: list[PairFactor] = []
    factor_pairs = 0
    if factor_rounds and d > 2:
        report(0.95, "Measuring pairs outside the model's cliques")
        sel_left += budget_sel * factor_share * factor_rounds / cap.pair_factors
        meas_left += budget_meas * factor_share * factor_rounds / cap.pair_factors
        factor_pairs = _pair_factor_rounds(sizes, model, steps, factors, factor_rounds, sel_left, meas_left, plan, rng,
                                           spend, real)
    if d > 1:
        stages.append(stage(
            "selection", plan, spend.sel_spent,
            f"{len(spend.sel_eps_used)} exponential-mechanism choices (score sensitivity {plan.l1}), "
            + range_text("ε", spend.sel_eps_used) + " each" + ("" if plan.pure else " (each ε²/8-zCDP)"),
        ))
        stages.append(stage(
            "measurement", plan, spend.meas_spent,
            f"{len(spend.meas_mechs)} selected marginals with "
            + ("discrete Laplace noise, " + range_text("scale", [float(m.param) for m in spend.meas_mechs])
               + f" (Δ₁ = {plan.l1}), " + range_text("ε", [m.cost for m in spend.meas_mechs])
               if plan.pure else
               "discrete Gaussian noise, " + range_text("σ", [math.sqrt(float(m.param)) for m in spend.meas_mechs])
               + f" (Δ₂² = {plan.l2sq}), " + range_text("ρ", [m.cost for m in spend.meas_mechs]))
            + " each (per-measurement values in the model file)",
        ))

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
    params["capacity"] = {"rounds": cap.rounds, "triples": model.triples, "wide": cap.wide,
                          "one_way_extra_share": cap.one_way_extra, "pair_snr": cap.snr,
                          "estimation_iterations": final_iters,
                          "proportional_steps": cap.proportional,
                          "max_clique_columns": model.max_cols, "max_clique_cells": model.max_cells,
                          "pair_factors": len(factors), "pair_factor_measurements": factor_pairs,
                          "inside_rounds": cap.inside_rounds, "inside_measured": inside_measured,
                          "fitted_as_independent": within_noise,
                          "one_way_observations": len(observed),
                          "text": cap.describe() + (
                              f"; the one-ways of {len(observed)} numeric column{'s' if len(observed) != 1 else ''}"
                              " also fitted to the value model's released bin counts" if observed else "") + (
                              f"; {within_noise} of {in_rounds} measured marginals within their noise"
                              " of independence, fitted as the product of their one-way margins" if within_noise else "") + (
                              f"; {inside_measured} three-way table{'s' if inside_measured != 1 else ''} inside the"
                              " cliques measured" if cap.inside_rounds else "") + (
                              f"; {factor_pairs} pair{'s' if factor_pairs != 1 else ''} outside the cliques measured,"
                              f" {len(factors)} applied as factors (the others matched the model within their noise)"
                              + (f" ({cap.pair_factors - factor_rounds} factor rounds went to the tree:"
                                 " fewer pairs lay outside its cliques)"
                                 if factor_rounds < cap.pair_factors else "") if cap.pair_factors else "")}
    if plan.spent > plan.total * (1 + 1e-12):
        raise InternalError("The marginal method over-spent its privacy budget.")
    return MarginalModel(sizes=sizes, steps=tuple(steps), noisy_total=float(model.total), measurements=measurements,
                         noise=[m.info() for m in mechs], stages=stages, params=params, factors=tuple(factors))


def _small_pairs_return(cap: Capacity, d: int, total: float, left: float, held: set[int]) -> list[float] | None:
    """The one-way budgets (per column, from public values: the plan and the released selections) that
    give back what the small pairs' rounds left: one column's spare share to each column that gave its
    spare and that no measured pair holds, the rest evenly over all that gave. None if nothing is left."""
    assert len(cap.one_way_spare) == d
    left *= 1 - 1e-9  # float splits never overspend
    gave = [j for j in range(d) if cap.one_way_spare[j] > 0]
    if left <= 1e-9 * total or not gave:
        return None
    out = [0.0] * d
    for j in gave:
        if j not in held:
            out[j] = min(total * cap.one_way_spare[j], left)
            left -= out[j]
    for j in gave:
        out[j] += left / len(gave)
    # A sliver (what a column's full share left over) would buy a one-way of no use: it stays unspent.
    return [x if x >= 0.01 * total * cap.one_way_spare[j] else 0.0 for j, x in enumerate(out)]


def _installment_text(ms: list[Measurement], shared: bool, plan: Plan) -> str:
    if shared:
        return "each " + mech_text(ms[0], plan)
    return (f"discrete {'Laplace' if plan.pure else 'Gaussian'} noise on {len(ms)} of them ("
            + (range_text("scale", [float(m.param) for m in ms]) if plan.pure
               else range_text("σ", [math.sqrt(float(m.param)) for m in ms])) + ")")


def independent_within_noise(y: np.ndarray, shape: tuple[int, ...], variance: float) -> np.ndarray:
    """``y`` (a noisy marginal over columns of ``shape``, noise ``variance`` per cell), or, when it departs from
    the product of its own one-way margins by no more than its noise (:data:`INDEPENDENCE_Z`), that product:
    the same one-way margins and total, no interaction. Post-processing of a released table."""
    t = np.asarray(y, dtype=np.float64).reshape(shape)
    n = float(t.sum())
    k = len(shape)
    df = math.prod(shape) - sum(s - 1 for s in shape) - 1
    if k < 2 or df <= 0 or not n > 0:
        return y
    prod = np.full((), n)
    for ax in range(k):
        prod = np.multiply.outer(prod, t.sum(axis=tuple(a for a in range(k) if a != ax)) / n)
    if float(((t - prod) ** 2).sum()) > variance * df * (1.0 + INDEPENDENCE_Z * math.sqrt(2.0 / df)):
        return y
    return prod.reshape(np.shape(y))


def _kept_tables(model: TreeModel, factors: list[PairFactor], col: int, given: int) -> list[tuple[int, ...]]:
    """The other columns of every table the model holds with ``col`` (the one-way, each table the tree
    measured, earlier factors' pairs and kept tables), which a new factor on ``col`` keeps as it was."""
    out: list[tuple[int, ...]] = [()]
    sets = [m for m, _, _ in model.obs]
    for f in factors:
        sets.append(tuple(sorted((f.given, f.col))))
        sets.extend(tuple(sorted(c + (f.col,))) for c, _ in f.kept)
    for m in sets:
        if col in m:
            rest = tuple(c for c in m if c != col)
            if rest not in out and rest != (given,):
                out.append(rest)
    return out


def _factor_helps(old: np.ndarray, new: np.ndarray, k: int, cfgs: Sequence[np.ndarray],
                  targets: Sequence[np.ndarray]) -> bool:
    """Whether a fitted factor, applied to the working sample (the column's values ``old`` → ``new``),
    brought its pair (the last of ``cfgs``/``targets``) closer to its target by more than it moved any
    table it was to keep (the others, whose targets are their tables before): L1 distances on the
    working sample. Where the targets cannot all be met (a column nearly fixed by others, as a diamond's
    width by its length and depth), proportional fitting in a few sweeps can leave the pair farther from
    its target and the kept tables broken: on the diamonds table (10 columns, 53,940 rows) at ε = 10 with
    5 rounds per column, a factor redrawing the width given the cut took the pair 0.0175 away from its
    target and moved a kept table by 0.0365, and every pair with the width went from 0.002 to 0.019 TVD.
    On Adult at ε = 1 and 10 (4 releases, 30 factors) every factor's gain exceeded its largest move
    (0.0069 against 0.0015 at the closest). Post-processing of the working sample and released targets."""
    moved = 0.0
    for cfg, t in zip(cfgs[:-1], targets[:-1], strict=True):
        now = np.bincount(cfg * k + new, minlength=t.size).reshape(t.shape)
        moved = max(moved, float(np.abs(now - t).sum()))
    pair_cfg, target = cfgs[-1], targets[-1]
    before = np.bincount(pair_cfg * k + old, minlength=target.size).reshape(target.shape)
    after = np.bincount(pair_cfg * k + new, minlength=target.size).reshape(target.shape)
    gain = float(np.abs(before - target).sum()) - float(np.abs(after - target).sum())
    return gain > 0 and gain > moved


def _pairs_outside(cliques: Sequence[tuple[int, ...]], d: int) -> list[tuple[int, int]]:
    """The column pairs (u < v) that no clique holds."""
    inside = {(u, v) for cl in cliques for u, v in combinations(sorted(cl), 2)}
    return [(u, v) for u in range(d) for v in range(u + 1, d) if (u, v) not in inside]


def _pair_factor_rounds(sizes: tuple[int, ...], model: TreeModel, steps: list[Step], factors: list[PairFactor],
                        rounds: int, sel_budget: float, meas_budget: float, plan: Plan, rng: np.random.Generator,
                        spend: _RoundSpend, real: Callable[[tuple[int, ...]], np.ndarray]) -> int:
    """Rounds that measure pairs no clique holds and turn each that differs from the model by more
    than noise (:data:`SKIP_NULL_Z`) into a :class:`PairFactor` (appended to ``factors``), spending
    through ``spend``; returns the number of pairs measured.

    Each round scores every pair (u, v) outside the cliques and the factors so far as the tree's
    rounds do, ‖M_uv(D) − M̂_uv‖₁ − c·E‖noise‖₁, with M̂ the current model's table read off a working
    sample of it (post-processing: rows drawn from the fitted tree with the factors so far applied),
    chooses one with the exponential mechanism and measures it (its budget fixed before it looks at
    the data, as in the tree's rounds); the factor is fitted on the working sample to the measured
    law of the later-drawn column given the other (:func:`~dpsynth.marginals.pair_factors.target_table`),
    keeping every other table the model holds with that column (:func:`_kept_tables`), and applied
    to it. Which pairs are candidates depends on the cliques and earlier selections only (public).
    A round plans for no more rounds than pairs are left, and the round after whose factor none would be
    left (known once its pair is chosen) takes what is left of both budgets; :func:`_fit` gives the
    tree the rounds of factors that fewer pairs outside the cliques than planned leave over. (A round
    planned for candidates the factors then use up had left 3–10% of the budget unspent on Wages,
    DoctorContacts and diamonds at ε = 10.)"""
    d = len(sizes)
    outside = _pairs_outside(model.cliques, d)
    drawn_at = {c: i for i, st in enumerate(steps) for c in st.new}
    n_work = FACTOR_WORK_ROWS
    g = fast_rng(post_processing_seed(rng), FACTOR_KEY)
    tree = MarginalModel(sizes=sizes, steps=tuple(steps), noisy_total=model.total, measurements=[], noise=[], stages=[])
    work = tree.sample(n_work, rng=g)
    scale = model.total / n_work
    weights_so_far: list[float] = []
    measured: set[tuple[int, int]] = set()
    for t in range(rounds):
        # A column is redrawn by one factor at most, and never once an earlier factor conditions on it
        # (the tables fitted then would move again); a pair of two such columns has no factor. Whole
        # Adult releases at ε = 10 (one seed): 2-/3-way TVD 0.0068 / 0.0197 against 0.0098 / 0.0255
        # when a column could be redrawn again (native-country was, seven times, and drifted).
        used = {f.given for f in factors} | {f.col for f in factors}
        cands = [(u, v) for u, v in outside if not (u in used and v in used) and (u, v) not in measured]
        if not cands or meas_budget <= 1e-9 * plan.total:
            break
        # No more rounds than pairs left to choose from: a pair the factors have used up is never
        # measured, so planning for it would leave its budget unspent.
        left = min(rounds - t, len(cands))
        round_sel = sel_budget / left
        scores = np.empty(len(cands))
        planned: dict[int, Measurement] = {}
        for i, (u, v) in enumerate(cands):
            cells = sizes[u] * sizes[v]
            if cells not in planned:
                planned[cells] = plan.preview(allocate(meas_budget, left, cells ** _budget.ALLOC_POWER, weights_so_far))
            est = np.bincount(work[:, u] * sizes[v] + work[:, v], minlength=cells) * scale
            gap = float(np.abs(real((u, v)).ravel() - est).sum())
            # The working sample's own multinomial noise (expected L1, from the estimate: public) is
            # no gap of the model's. On a generated table of mostly independent columns (20,000
            # rows), factors without this cost +0.0008 / +0.0011 TVD at ε = 1, with it +0.0004 / +0.0006.
            share = est / max(float(est.sum()), 1e-300)
            gap -= float(np.sqrt(2.0 / math.pi * n_work * share * (1.0 - share)).sum()) * scale
            scores[i] = gap - PENALTY_FACTOR * planned[cells].mean_abs * cells
        u, v = cands[spend.select(scores, round_sel)]
        if len(cands) > 1:  # one candidate is no choice: nothing was spent
            sel_budget -= round_sel
        w = (sizes[u] * sizes[v]) ** _budget.ALLOC_POWER
        # The pair chosen (released) decides whether any would be left once its factor holds both columns:
        # if none would, this is the last round and takes the rest, the selections' unspent share too.
        held = used | {u, v}
        last = not any(not (a in held and b in held) for a, b in cands if (a, b) != (u, v))
        if last:
            meas_budget, sel_budget = meas_budget + sel_budget, 0.0
        budget = allocate(meas_budget, 1 if last else left, w, weights_so_far)
        weights_so_far.append(w)
        meas_budget -= budget
        y, mech = spend.measure((u, v), real((u, v)), budget)
        measured.add((u, v))
        # post-processing: the factor redraws the column drawn later by the tree (the other one if that
        # one is used already)
        given, col = (u, v) if drawn_at[v] >= drawn_at[u] else (v, u)
        if col in used:
            given, col = col, given
        noisy = y if given == u else y.T
        k = sizes[col]
        current = np.bincount(work[:, given] * k + work[:, col], minlength=sizes[given] * k).reshape(-1, k)
        est = current * scale
        if float(((noisy - est) ** 2 / (mech.variance + est * (1.0 + scale))).sum()) < (
                est.size + SKIP_NULL_Z * math.sqrt(2.0 * est.size)):
            continue  # the model already has this pair's table, within the noise
        q = conditional_logits(steps, sizes, factors, work, col)
        cols_of = _kept_tables(model, factors, col, given)
        cfgs = [config_index(sizes, work, c) for c in cols_of]
        targets = [np.bincount(cfg * k + work[:, col], minlength=math.prod(sizes[j] for j in c) * k).reshape(-1, k)
                   for cfg, c in zip(cfgs, cols_of, strict=True)]
        cfgs.append(work[:, given])
        targets.append(target_table(noisy / scale, math.sqrt(mech.variance) / scale, current))
        lams = fit_factor(q, cfgs, targets, current=work[:, col])
        f = PairFactor(given, col, lams[-1], tuple(zip(cols_of, lams[:-1], strict=True)))
        new_col = coupled_values(work[:, col], q, q + f.logits(sizes, work), g.random(n_work))
        if not _factor_helps(work[:, col], new_col, k, cfgs, targets):
            continue  # its measurement stays spent and released, as one the model already had
        work[:, col] = new_col
        factors.append(f)
    return len(measured)


