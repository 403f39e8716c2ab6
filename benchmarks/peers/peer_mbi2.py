"""MST (McKenna, Miklau, Sheldon 2021, "Winning the NIST Contest") on Private-PGM ``mbi`` 2.0.0.

``mbi`` 2.0.0 on PyPI ships the estimation library only (no ``mechanisms/``), and
smartnoise-synth 1.0.8's MST code does not run on it (``mbi.Dataset`` now takes a dict of
columns; the function ``estimation.mirror_descent`` became the class
``estimation.MirrorDescent``).  So this runner writes MST's three steps itself, following the paper, and uses
``mbi`` 2.0.0 for what it is: the graphical-model estimator and its sampler.

* (ε, δ) -> ρ: the tight conversion of Canonne, Kamath, Steinke 2020 (Prop. 12 / Cor. 13),
  ``δ = min_α exp((α-1)(αρ-ε) + α log(1-1/α)) / (α-1)``, ρ found by bisection.
* ρ/3: every 1-way marginal, Gaussian σ₁ = sqrt(3 d / (2ρ)) (d measurements of L2 sensitivity 1).
  Domain compression as in the paper: values whose noisy count is below 3σ₁ are merged into
  one cell, measured as their summed noisy count scaled by 1/sqrt(m) (query scaled too).
* ρ/3: a spanning tree by Kruskal with the exponential mechanism on
  ``||x_ab - x̂_ab||_1`` (x̂ from the 1-way model), each of the d-1 steps at
  ε' = sqrt(8 (ρ/3) / (d-1)), sensitivity 1.
* ρ/3: the d-1 tree marginals, Gaussian σ₂ = sqrt(3 (d-1) / (2ρ)).
* Estimate with ``mbi.estimation.MirrorDescent`` with the total estimated from the noisy 1-way
  sums (inverse-variance weighted), not the true n, sample ``n`` rows with ``MarkovRandomField.synthetic_data``, undo the compression
  (a merged cell becomes a uniformly drawn merged value).

Noise, selection and un-compression use ``numpy.random.default_rng(seed)``: a benchmark, not a
release.  Run in ``.venvs/mbi2``.
"""

from __future__ import annotations

import itertools
import math
import time

import _common
import numpy as np


def cdp_delta(rho: float, eps: float) -> float:
    """Smallest δ for which ρ-zCDP implies (ε, δ)-DP [CKS20, Cor. 13], α by bisection."""
    if rho <= 0:
        return 0.0
    amin, amax = 1.01, (eps + 1) / (2 * rho) + 2
    for _ in range(1000):
        alpha = (amin + amax) / 2
        if (2 * alpha - 1) * rho - eps + math.log1p(-1.0 / alpha) < 0:
            amin = alpha
        else:
            amax = alpha
    delta = math.exp((alpha - 1) * (alpha * rho - eps) + alpha * math.log1p(-1.0 / alpha)) / (alpha - 1.0)
    return min(delta, 1.0)


def cdp_rho(eps: float, delta: float) -> float:
    """Largest ρ with ``cdp_delta(ρ, ε) <= δ`` (bisection)."""
    lo, hi = 0.0, eps + 1
    for _ in range(1000):
        mid = (lo + hi) / 2
        if cdp_delta(mid, eps) <= delta:
            lo = mid
        else:
            hi = mid
    return lo


def counts(codes: np.ndarray, cols: tuple[int, ...], sizes: list[int]) -> np.ndarray:
    """Flattened contingency table of ``cols`` (C order)."""
    shape = tuple(sizes[c] for c in cols)
    flat = np.ravel_multi_index(tuple(codes[:, c] for c in cols), shape)
    return np.bincount(flat, minlength=int(np.prod(shape))).astype(float)


def setup(peer: str):  # noqa: ANN201 - (args, schema, codes, sizes, rng, names)
    """Arguments, the coded table, a generator from ``--seed`` and mbi's column names; JAX in float64."""
    args = _common.parse([peer])
    schema, codes, sizes = _common.load(args)
    import jax

    jax.config.update("jax_enable_x64", True)
    return args, schema, codes, sizes, np.random.default_rng(args.seed), [f"c{j}" for j in range(codes.shape[1])]


def main() -> None:
    args, schema, codes, sizes, rng, names = setup("mst")
    from mbi import Domain, LinearMeasurement, WeightedQuery, estimation

    n, d = codes.shape
    t0 = time.perf_counter()
    rho = cdp_rho(args.epsilon, args.delta)

    # 1. one-way marginals (ρ/3) and domain compression.
    sigma1 = math.sqrt(3 * d / (2 * rho))
    maps, new_sizes, merged, log1, totals = [], [], [], [], []
    for j in range(d):
        y = counts(codes, (j,), sizes) + rng.normal(0, sigma1, sizes[j])
        totals.append(y.sum())
        keep = y >= 3 * sigma1
        if keep.all():
            maps.append(np.arange(sizes[j]))
            new_sizes.append(sizes[j])
            merged.append(np.array([], dtype=int))
            log1.append((y, None))
            continue
        k = int(keep.sum())
        m = np.empty(sizes[j], dtype=int)
        m[keep] = np.arange(k)
        m[~keep] = k
        w = np.ones(k + 1)
        w[-1] = 1.0 / math.sqrt(sizes[j] - k)
        maps.append(m)
        new_sizes.append(k + 1)
        merged.append(np.flatnonzero(~keep))
        log1.append((np.append(y[keep], y[~keep].sum()) * w, w))
    comp = np.stack([maps[j][codes[:, j]] for j in range(d)], axis=1)
    domain = Domain(names, new_sizes)
    meas1 = [
        LinearMeasurement(y, (names[j],), sigma1)
        if w is None
        else LinearMeasurement(y, (names[j],), sigma1, query=WeightedQuery(w))
        for j, (y, w) in enumerate(log1)
    ]
    # mbi estimates the total only from identity-query measurements (it falls back to 1.0 when
    # every column was compressed), so give it the noisy total: the inverse-variance weighted
    # mean of the 1-way sums (variance sigma1^2 * size_j), post-processing of the same noise.
    inv_var = 1.0 / np.array(sizes, dtype=float)
    total = max(1.0, float(np.average(totals, weights=inv_var)))
    est = estimation.MirrorDescent().estimate(domain, meas1, known_total=total, iters=1000)

    # 2. spanning tree by Kruskal + exponential mechanism (ρ/3).
    pairs = list(itertools.combinations(range(d), 2))
    score = {}
    for a, b in pairs:
        xhat = np.asarray(est.project((names[a], names[b])).datavector())
        score[a, b] = np.abs(counts(comp, (a, b), new_sizes) - xhat).sum()
    eps_em = math.sqrt(8 * (rho / 3) / (d - 1))
    comp_of = list(range(d))
    tree = []
    for _ in range(d - 1):
        cand = [p for p in pairs if comp_of[p[0]] != comp_of[p[1]]]
        q = np.array([score[p] for p in cand])
        logits = 0.5 * eps_em * (q - q.max())
        prob = np.exp(logits) / np.exp(logits).sum()
        a, b = cand[rng.choice(len(cand), p=prob)]
        old, new = comp_of[b], comp_of[a]
        comp_of = [new if c == old else c for c in comp_of]
        tree.append((a, b))

    # 3. tree marginals (ρ/3), estimation, sampling.
    sigma2 = math.sqrt(3 * (d - 1) / (2 * rho))
    meas2 = []
    for a, b in tree:
        x = counts(comp, (a, b), new_sizes)
        meas2.append(LinearMeasurement(x + rng.normal(0, sigma2, x.size), (names[a], names[b]), sigma2))
    model = estimation.MirrorDescent().estimate(domain, meas1 + meas2, known_total=total, iters=5000)
    syn = model.synthetic_data(rows=n).to_dict()
    out = np.empty((n, d), dtype=np.int64)
    for j in range(d):
        col = np.asarray(syn[names[j]]).astype(np.int64)
        if merged[j].size:
            inv = np.flatnonzero(maps[j] < new_sizes[j] - 1)
            is_m = col == new_sizes[j] - 1
            res = np.empty(n, dtype=np.int64)
            res[~is_m] = inv[col[~is_m]]
            res[is_m] = rng.choice(merged[j], size=int(is_m.sum()))
            col = res
        out[:, j] = col
    seconds = time.perf_counter() - t0
    # Not timed: a second draw from the fitted model, to check the sampler against the model.
    gap = _common.sampler_gap(model, model.synthetic_data(rows=n), names)
    _common.finish(args, schema, out, "mst", _common.versions("mbi", "jax"), seconds, **gap,
                   rho=rho, tree=[[schema[a]["name"], schema[b]["name"]] for a, b in tree])


if __name__ == "__main__":
    main()
