"""Fitting the marginal model: one-way marginals, rounds of selection and measurement, estimation.

The stages, their guarantees and how they compose are described in :mod:`dpsynth.marginals`;
the budget of each stage comes from :mod:`dpsynth.marginals.budget`, the model and its fit from
:mod:`dpsynth.marginals.estimation`. This module is the only one that reads the data, and it
does so only through the mechanisms: noisy counts (:class:`~dpsynth.marginals.budget.Measurement`)
and the exponential mechanism's choices.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dpsynth import zcdp
from dpsynth.errors import InputError, InternalError
from dpsynth.marginals import budget as _budget
from dpsynth.marginals.budget import Measurement, Plan, allocate, mech_text, noisy_total, range_text, stage
from dpsynth.marginals.estimation import Candidate, TreeModel, project_simplex
from dpsynth.marginals.model import MarginalModel
from dpsynth.mechanisms import check_delta, check_epsilon, exponential_mechanism
from dpsynth.neighbours import Neighbours

# Model cliques (and measured sets) never exceed this many cells (memory and time).
MAX_CLIQUE_CELLS = 100_000
# Weight of the expected-noise term in the selection score (AIM uses 1; the estimation removes
# much of the noise in empty cells, so the raw expectation overstates it).
PENALTY_FACTOR = 0.3
# Mirror-descent iterations at the end (after ROUND_ITERS warm-started ones per round).
ESTIMATION_ITERS = 300
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
    eps, dlt = check_epsilon(epsilon), check_delta(delta)
    rel = Neighbours.parse(neighbours)
    codes, sizes = _validate(codes, sizes)
    if weights is not None:
        weights = np.asarray(weights)
        if weights.shape != (len(codes),) or not np.issubdtype(weights.dtype, np.integer) or (weights < 0).any():
            raise InputError("weights must be one whole number ≥ 0 per row of codes.")
        weights = weights.astype(np.int64, copy=False)
    d = len(sizes)
    plan = Plan(eps, dlt, rel, max_contributions)
    report = progress or (lambda _f, _m: None)

    one_share = _budget.ONE_WAY_SHARE if d > 1 else 1.0
    sel_share = _budget.SELECT_SHARE if d > 1 else 0.0
    budget_one = plan.total * one_share
    budget_sel = plan.total * sel_share
    budget_meas = plan.total - budget_one - budget_sel
    stages: list[dict[str, Any]] = []

    # ---- stage 1: one-way marginals ---------------------------------------------------------
    report(0.02, "Measuring one-way marginals")
    one_mech = plan.measurement(budget_one / d)
    plan.spent += one_mech.cost * (d - 1)  # the same mechanism is applied to each of the d columns
    measurements: list[tuple[tuple[int, ...], np.ndarray]] = []
    mechs: list[Measurement] = []
    for j in range(d):
        y = one_mech(_counts(codes, sizes, (j,), weights), rng=rng)
        measurements.append(((j,), y))
        mechs.append(one_mech)
    stages.append(stage("one-way marginals", plan, one_mech.cost * d,
                         f"{d} one-way marginals, each " + mech_text(one_mech, plan)))
    n_hat = noisy_total(measurements, mechs)
    total = max(n_hat, 1.0)
    one_way = []
    for _, y in measurements:
        t = project_simplex(y, total)
        one_way.append(t / t.sum() if t.sum() > 0 else np.full(t.shape, 1.0 / t.size))

    # ---- stage 2+3: rounds of selection and measurement --------------------------------------
    model = TreeModel(sizes, one_way, total, max_cells=MAX_CLIQUE_CELLS, max_cols=MAX_CLIQUE_COLS,
                      triples=TRIPLES, alone=ALONE)
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
    meas_mechs: list[Measurement] = []
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
            w = math.prod(sizes[c] for c in cand.measure) ** _budget.ALLOC_POWER
            b = allocate(meas_left, rounds_left, w, round_weights)
            cells = math.prod(sizes[c] for c in cand.measure)
            gap = float(np.abs(real(cand.measure) - model.estimate(cand)).sum())
            scores[i] = gap - PENALTY_FACTOR * plan.preview(b).mean_abs * cells
        sel_left -= round_sel
        if len(cands) == 1:
            cand = cands[0]  # no choice to make: nothing depends on the data, nothing is spent
        else:
            sel_eps = plan.selection_epsilon(round_sel)
            sel_eps_used.append(sel_eps)
            sel_spent += sel_eps if plan.pure else sel_eps * sel_eps / 8.0
            cand = cands[exponential_mechanism(scores, plan.l1, sel_eps, rng=rng)]
        if cand.kind == "alone":
            model.apply(cand, np.zeros(0), 1.0)  # nothing measured; the budget stays for later rounds
            continue
        weight = math.prod(sizes[c] for c in cand.measure) ** _budget.ALLOC_POWER
        round_meas = allocate(meas_left, rounds_left, weight, round_weights)
        round_weights.append(weight)
        meas_left -= round_meas
        mech = plan.measurement(round_meas)
        meas_spent += mech.cost
        meas_mechs.append(mech)
        y = mech(real(cand.measure), rng=rng)
        measurements.append((cand.measure, y))
        mechs.append(mech)
        model.apply(cand, y, mech.variance)
        model.fit(ROUND_ITERS)
    for x in range(d):
        if d > 1 and x not in model.attached:  # only if the rounds ran out (e.g. one round per column)
            model.apply(Candidate("alone", (), new=x), np.zeros(0), 1.0)
    if d > 1:
        stages.append(stage(
            "selection", plan, sel_spent,
            f"{len(sel_eps_used)} exponential-mechanism choices (score sensitivity {plan.l1}), "
            + range_text("ε", sel_eps_used) + " each" + ("" if plan.pure else " (each ε²/8-zCDP)"),
        ))
        stages.append(stage(
            "measurement", plan, meas_spent,
            f"{len(meas_mechs)} selected marginals with "
            + ("discrete Laplace noise, " + range_text("scale", [float(m.param) for m in meas_mechs])
               + f" (Δ₁ = {plan.l1}), " + range_text("ε", [m.cost for m in meas_mechs])
               if plan.pure else
               "discrete Gaussian noise, " + range_text("σ", [math.sqrt(float(m.param)) for m in meas_mechs])
               + f" (Δ₂² = {plan.l2sq}), " + range_text("ρ", [m.cost for m in meas_mechs]))
            + " each (per-measurement values in the model file)",
        ))

    # ---- reconstruction (post-processing) ----------------------------------------------------
    report(0.92, "Estimating the model")
    model.total = max(noisy_total(measurements, mechs), 1.0)
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


