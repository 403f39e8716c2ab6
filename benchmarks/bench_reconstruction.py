"""Reconstruction demo and DP regression: time per point, share recovered, regression interval coverage.

    python benchmarks/bench_reconstruction.py                 # n = 500, m = 2000; 200 regression releases
    python benchmarks/bench_reconstruction.py --n 1000 --m 4000 --reps 50

Prints (1) the time of one reconstruction attack at (n, m) as a ratio to one least-squares solve
of the same size measured in this process (the baseline) and in seconds (the dashboard's budget
is 2 s), (2) the share of secrets recovered against the noise bound E and with discrete Laplace
noise at ε = 1 (total and per query), (3) the coverage and mean width of the DP regression's 95%
intervals over ``--reps`` independent datasets and releases at ε = 1 and ε = 0.3.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dpsynth.noise import seeded_rng  # noqa: E402
from dpsynth.reconstruction import attack, default_sizes, sweep  # noqa: E402
from dpsynth.regression import dp_linear_regression  # noqa: E402
from dpsynth.schema import NumericColumn, Schema  # noqa: E402


def best_of(k: int, fn) -> float:  # noqa: ANN001
    best = math.inf
    for _ in range(k):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--m", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=200)
    a = ap.parse_args()
    n, m = a.n, a.m
    q = np.random.default_rng(0).integers(0, 2, (m, n)).astype(np.float64)
    base = best_of(3, lambda: np.linalg.lstsq(q, q[:, 0], rcond=None))
    one = best_of(3, lambda: attack(n, m, bound=5.0, rng=seeded_rng(1)))
    whole = best_of(3, lambda: sweep(n, m, epsilon=1.0, rng=seeded_rng(2)))
    print(f"one attack at n={n}, m={m}: {one:.3f} s ({one / base:.2f}x one numpy lstsq of that size, {base:.3f} s);"
          f" a 7-point sweep with the DP point: {whole:.3f} s")
    for acc in ("total", "per-query"):
        s = sweep(n, m, default_sizes(n), epsilon=1.0, accounting=acc, rng=seeded_rng(3))
        curve = ", ".join(f"E={p.size:.3g}: {p.recovered:.1%}" for p in s.points)
        print(f"[{acc}] √n = {s.sqrt_n:.3g}; {curve}; DP at ε = 1 (sd {s.dp.noise_std:.3g}): {s.dp.recovered:.1%}")

    schema = Schema((NumericColumn(name="x1", lower=0, upper=10, bins=5), NumericColumn(name="x2", lower=-5, upper=5, bins=5),
                     NumericColumn(name="y", lower=-30, upper=40, bins=5)))
    truth = np.array([3.0, 2.0, -1.5])
    for eps in (1.0, 0.3):
        hits, widths, t0 = np.zeros(3), [], time.perf_counter()
        for r in range(a.reps):
            rng = np.random.default_rng(10_000 + r)
            x1, x2 = rng.uniform(0, 10, 2000), rng.uniform(-5, 5, 2000)
            df = pd.DataFrame({"x1": x1, "x2": x2, "y": truth[0] + truth[1] * x1 + truth[2] * x2 + rng.normal(0, 2, 2000)})
            res = dp_linear_regression(df, schema, y="y", x=["x1", "x2"], epsilon=eps, seed=r)
            hits += (res.low <= truth) & (truth <= res.high)
            widths.append(res.high - res.low)
        per = (time.perf_counter() - t0) / a.reps
        print(f"regression ε = {eps:g}, n = 2000, {a.reps} releases: coverage of 95% intervals"
              f" {np.round(hits / a.reps, 3).tolist()}, mean width {np.round(np.mean(widths, axis=0), 3).tolist()},"
              f" {per:.3f} s per release")


if __name__ == "__main__":
    main()
