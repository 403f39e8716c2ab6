"""AIM (McKenna, Mullins, Sheldon, Miklau 2022, "AIM: An Adaptive and Iterative Mechanism for
Differentially Private Synthetic Data", Algorithm 1) on Private-PGM ``mbi`` 2.0.0.

``mbi`` 2.0.0 on PyPI ships the estimator and sampler but no mechanisms, so this runner writes
AIM from the paper (as ``peer_mbi2.py`` does for MST), with the paper's defaults:

* workload: every 3-way marginal, weight 1; candidates: its downward closure (every 1-, 2- and
  3-way marginal), each weighted w_r = Σ_{s ∈ W} |r ∩ s|;
* (ε, δ) → ρ by the tight CKS20 conversion (``peer_mbi2.cdp_rho``); T = 16 d rounds planned,
  α = 0.9, σ₀ = sqrt(T / (2αρ)), ε₀ = sqrt(8(1 − α)ρ / T);
* every 1-way marginal measured with σ₀ first;
* each round: charge 1/(2σ²) + ε²/8; the candidates whose junction tree with the chosen marginals
  stays within (ρ_used / ρ)·80 MB (``mbi.junction_tree.hypothetical_model_size``); the exponential
  mechanism at ε on w_r·(‖M_r(D) − M_r(p̂)‖₁ − sqrt(2/π)·σ·n_r) with sensitivity max w_r; the
  chosen marginal measured with Gaussian σ; p̂ re-estimated (mirror descent, warm start);
  σ halved and ε doubled when the estimate moved by no more than sqrt(2/π)·σ·n_r on it;
* when the remaining ρ would not pay for two more rounds, one last round takes all of it
  (σ = sqrt(1/(2α ρ_left)), ε = sqrt(8(1 − α) ρ_left));
* ``n`` rows sampled from the final model (``MarkovRandomField.synthetic_data``).

Noise and selection use ``numpy.random.default_rng(seed)``: a benchmark, not a release.
Run in ``.venvs/mbi2``.
"""

from __future__ import annotations

import itertools
import math
import os
import time

import _common
import numpy as np
from peer_mbi2 import cdp_rho, counts, setup

MAX_SIZE_MB = 80.0
ROUND_ITERS = 1000
FINAL_ITERS = 3000
#: Every new set of cliques compiles new programs; without dropping them, a 15-column run exhausted the
#: process's memory maps after about 50 rounds (LLVM "Cannot allocate memory", exit -11) unless
#: ``vm.max_map_count`` is raised. Dropping them recompiles every candidate's projection, which made an
#: Adult run take over 78 minutes; ``AIM_CLEAR_EVERY=0`` keeps them (raise ``vm.max_map_count`` first).
CLEAR_EVERY = int(os.environ.get("AIM_CLEAR_EVERY", "10"))


def main() -> None:
    args, schema, codes, sizes, rng, names = setup("aim")
    import jax
    from mbi import Domain, LinearMeasurement, estimation, junction_tree

    n, d = codes.shape
    domain = Domain(names, sizes)
    t0 = time.perf_counter()
    rho = cdp_rho(args.epsilon, args.delta)

    workload = list(itertools.combinations(range(d), min(3, d)))
    candidates = sorted({s for w in workload for k in range(1, len(w) + 1) for s in itertools.combinations(w, k)})
    weight = {r: float(sum(len(set(r) & set(w)) for w in workload)) for r in candidates}
    truth = {r: counts(codes, r, sizes) for r in candidates}

    rounds = 16 * d
    alpha = 0.9
    sigma = math.sqrt(rounds / (2 * alpha * rho))
    eps = math.sqrt(8 * (1 - alpha) * rho / rounds)
    used = 0.0
    meas = []
    for j in range(d):
        x = truth[(j,)]
        meas.append(LinearMeasurement(x + rng.normal(0, sigma, x.size), (names[j],), sigma))
        used += 1 / (2 * sigma**2)
    est = estimation.MirrorDescent()
    model = est.estimate(domain, meas, iters=ROUND_ITERS)
    chosen: list[tuple[str, ...]] = [(names[j],) for j in range(d)]
    terminate = False
    steps = 0
    while not terminate:
        left = rho - used
        if left <= 0:
            break
        if left < 2 * (1 / (2 * sigma**2) + eps**2 / 8):
            sigma = math.sqrt(1 / (2 * alpha * left))
            eps = math.sqrt(8 * (1 - alpha) * left)
            terminate = True
        used += 1 / (2 * sigma**2) + eps**2 / 8
        limit = MAX_SIZE_MB * used / rho
        cand = [r for r in candidates
                if junction_tree.hypothetical_model_size(domain, chosen + [tuple(names[c] for c in r)]) <= limit]
        if not cand:
            continue
        scores = np.empty(len(cand))
        for i, r in enumerate(cand):
            xhat = np.asarray(model.project(tuple(names[c] for c in r)).datavector())
            err = np.abs(truth[r] - xhat).sum() - math.sqrt(2 / math.pi) * sigma * truth[r].size
            scores[i] = weight[r] * err
        sens = max(weight[r] for r in cand)
        logits = eps * scores / (2 * sens)
        prob = np.exp(logits - logits.max())
        r = cand[rng.choice(len(cand), p=prob / prob.sum())]
        clique = tuple(names[c] for c in r)
        x = truth[r]
        meas.append(LinearMeasurement(x + rng.normal(0, sigma, x.size), clique, sigma))
        chosen.append(clique)
        before = np.asarray(model.project(clique).datavector())
        model = est.estimate(domain, meas, iters=ROUND_ITERS, warm_start=model)
        after = np.asarray(model.project(clique).datavector())
        steps += 1
        if CLEAR_EVERY and steps % CLEAR_EVERY == 0:
            jax.clear_caches()
        if np.abs(after - before).sum() <= math.sqrt(2 / math.pi) * sigma * x.size:
            sigma /= 2
            eps *= 2
    model = est.estimate(domain, meas, iters=FINAL_ITERS, warm_start=model)
    syn = model.synthetic_data(rows=n).to_dict()
    out = np.stack([np.asarray(syn[names[j]]).astype(np.int64) for j in range(d)], axis=1)
    seconds = time.perf_counter() - t0
    gap = _common.sampler_gap(model, model.synthetic_data(rows=n), names)
    _common.finish(args, schema, out, "aim-mbi2", _common.versions("mbi", "jax"), seconds, **gap, rho=rho,
                   rounds=steps, measured=[[schema[c]["name"] for c in (int(a[1:]) for a in cl)] for cl in chosen[d:]])


if __name__ == "__main__":
    main()
