"""Predicted against measured utility: :func:`dpsynth.prediction.predict_utility` on the Adult sample.

For each ε (and δ) it prints the predicted mean one- and two-column TVD (public inputs only, the
size hint rounded to 50,000) beside the mean measured on real releases (``release(method="auto")``,
seeded), and their ratio. The acceptance target is a ratio within [1/1.5, 1.5]. A 3-column
sub-schema (age, sex, income) is included, where the histogram method runs.

    python benchmarks/bench_prediction.py                    # ε ∈ {0.1, 0.3, 1, 3, 10}, δ = 0 and 1e-6, 2 seeds
    python benchmarks/bench_prediction.py --eps 1 --seeds 3

Seeds are for the benchmark only (reproducible comparison); releases use a secure generator.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dpsynth.binning import encode  # noqa: E402
from dpsynth.datasets import sample_path  # noqa: E402
from dpsynth.prediction import predict_utility  # noqa: E402
from dpsynth.release import release  # noqa: E402
from dpsynth.schema import Schema, load_schema  # noqa: E402
from dpsynth.utility import marginal_tvds  # noqa: E402

SIZE_HINT = 50_000


def measured(df: pd.DataFrame, schema: Schema, eps: float, delta: float, seed: int) -> tuple[str, float, float]:
    """Method and mean 1- and 2-column TVD of one seeded release."""
    rel = release(df, schema, epsilon=eps, delta=delta, method="auto", seed=seed, expected_rows=SIZE_HINT)
    rc, sc = encode(df, schema).codes, encode(rel.synthetic, schema).codes
    one = float(marginal_tvds(rc, sc, schema.sizes, 1)["tvd"].mean())
    two = float(marginal_tvds(rc, sc, schema.sizes, 2)["tvd"].mean()) if len(schema.columns) > 1 else float("nan")
    return rel.card["method"]["name"], one, two


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--eps", type=float, nargs="*", default=[0.1, 0.3, 1.0, 3.0, 10.0])
    ap.add_argument("--deltas", type=float, nargs="*", default=[0.0, 1e-6])
    ap.add_argument("--seeds", type=int, default=2)
    a = ap.parse_args()
    df = pd.read_csv(sample_path("adult"), dtype=str, keep_default_na=False, na_values=[""])
    full = load_schema(sample_path("adult", "schema"))
    schemas = {"adult (15 columns)": full, "adult (age, sex, income)": full.select(["age", "sex", "income"])}
    print(f"{'schema':26} {'ε':>5} {'δ':>6} {'method':10} {'1-col pred':>10} {'meas':>7} {'ratio':>6}"
          f" {'2-col pred':>10} {'meas':>7} {'ratio':>6} {'secs':>5}")
    worst = 1.0
    for label, schema in schemas.items():
        for delta in a.deltas:
            for eps in a.eps:
                t = time.perf_counter()
                pred = predict_utility(schema, eps, delta, expected_rows=SIZE_HINT)
                runs = [measured(df, schema, eps, delta, seed) for seed in range(1, a.seeds + 1)]
                one = float(np.mean([r[1] for r in runs]))
                two = float(np.mean([r[2] for r in runs]))
                r1, r2 = pred.one_way_tvd / one, pred.two_way_tvd / two
                worst = max(worst, r1, 1 / r1, r2, 1 / r2)
                print(f"{label:26} {eps:5g} {delta:6.0e} {runs[0][0]:10} {pred.one_way_tvd:10.4f} {one:7.4f} {r1:6.2f}"
                      f" {pred.two_way_tvd:10.4f} {two:7.4f} {r2:6.2f} {time.perf_counter() - t:5.1f}", flush=True)
    print(f"worst factor between predicted and measured: {worst:.2f} (target ≤ 1.5)")


if __name__ == "__main__":
    main()
