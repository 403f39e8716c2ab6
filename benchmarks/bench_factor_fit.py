"""Time of fitting pair factors on distinct rows against fitting every row, on the factors of Adult's release.

``pair_factors.fit_factor`` fits each distinct combination of a working-sample row's logits, configurations and
current value once, weighted by its rows (``pair_factors.distinct_rows``). This benchmark releases Adult (or any
table with its schema) once per ε, records the inputs of every factor fitted, and then times ``fit_factor`` on
them as they are against the same rows made all distinct (a constant added to each row's logits, which leaves
its law unchanged: the fit the rows had before), alternated in one process, and prints the ratio and the
largest difference between the two fits' weights.

    python benchmarks/bench_factor_fit.py --eps 1 10
    python benchmarks/bench_factor_fit.py --data /tmp/rdat/Wages.csv --schema /tmp/rdat/Wages_schema.json --eps 10

Seeds are for the benchmark only; releases use a secure generator.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def main(argv: list[str] | None = None) -> None:
    import dpsynth.marginals.fit as fit_module
    from dpsynth.marginals import pair_factors
    from dpsynth.release import release
    from dpsynth.schema import load_schema

    shared = HERE.parent.parent / "shared" / "data"
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(shared / "adult.csv"))
    ap.add_argument("--schema", default=str(shared / "adult_schema.json"))
    ap.add_argument("--eps", type=float, nargs="+", default=[1.0, 10.0])
    ap.add_argument("--seed", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    df = pd.read_csv(args.data, dtype=str, keep_default_na=False)
    schema = load_schema(args.schema)
    real_fit = pair_factors.fit_factor
    for eps in args.eps:
        calls: list[tuple] = []

        def record(q, cfgs, targets, iters=pair_factors.FIT_ITERS, current=None, _calls=calls):
            _calls.append((q, cfgs, targets, iters, current))
            return real_fit(q, cfgs, targets, iters, current)

        fit_module.fit_factor = record
        try:
            release(df, schema, epsilon=eps, delta=1e-9, method="marginals", accept_data_derived=True, rng=np.random.default_rng(args.seed))
        finally:
            fit_module.fit_factor = real_fit
        if not calls:
            print(f"ε = {eps:g}: no pair factor fitted")
            continue
        fast = slow = 0.0
        worst = 0.0
        distinct = []
        for q, cfgs, targets, iters, current in calls:
            spread = q + np.arange(len(q))[:, None] * 2.0**-20
            distinct.append(len(pair_factors.distinct_rows(q, *cfgs, *([] if current is None else [current]))[0]))
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                a = real_fit(q, cfgs, targets, iters, current)
                t1 = time.perf_counter()
                b = real_fit(spread, cfgs, targets, iters, current)
                t2 = time.perf_counter()
                fast, slow = fast + t1 - t0, slow + t2 - t1
            worst = max(worst, max(float(np.max(np.abs(x - y))) for x, y in zip(a, b, strict=True)))
        print(f"ε = {eps:g}: {len(calls)} factors on {len(calls[0][0]):,} rows ({min(distinct):,}–{max(distinct):,}"
              f" distinct); distinct rows ÷ every row: {fast / slow:.2f} of the time; largest weight difference"
              f" {worst:.1e}")


if __name__ == "__main__":
    main()
