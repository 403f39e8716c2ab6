"""Benchmark of honest statistics from a release (dpsynth.inference) against the naive ones, on Adult.

The bundled Adult sample (dpsynth/samples/) is the population. Each trial draws ``--rows`` people from
it with replacement, releases them (histogram or marginals method) at ε, and asks the release for:

- the mean of ``education_num`` (bins of one whole number each: no binning bias) and of ``age``
  (bins 8 wide: the interval is widened to the worst case inside the bins);
- the share of ``sex = Female``;
- independence of ``sex`` and ``coin`` (a copy of ``income`` drawn independently of everything: H0
  true, type-I error) and of ``sex`` and ``income`` (dependent in Adult: power).

Printed per method and ε: coverage of the population values by the honest and the naive 95%
intervals, their mean widths and the width ratio honest/naive, and the rejection rates at α = 0.05
of the honest and the naive test (type-I error and power). The naive answers come from the same
releases' synthetic rows as if they were real data, so each ratio is against a baseline of the
same run.

    python benchmarks/bench_inference.py                          # 150 trials × {histogram, marginals} × ε ∈ {0.1, 1}
    python benchmarks/bench_inference.py --trials 400 --eps 0.1   # more trials, one ε
    python benchmarks/bench_inference.py --methods histogram --json out.json

Seeds are for the benchmark only (reproducible comparison); real releases use a secure generator.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dpsynth.errors import InputError  # noqa: E402
from dpsynth.inference import from_release, independence, mean, proportion  # noqa: E402
from dpsynth.release import release  # noqa: E402
from dpsynth.schema import CategoricalColumn, Schema, load_schema  # noqa: E402

SAMPLES = ROOT / "dpsynth" / "samples"
COLUMNS = ["age", "education_num", "sex", "income"]


def population() -> tuple[pd.DataFrame, Schema]:
    """Adult's columns of interest (values clamped to the public bounds, as a release encodes them) and their schema."""
    full = load_schema(SAMPLES / "adult_schema.json")
    schema = Schema(tuple(full.column(c) for c in COLUMNS) + (CategoricalColumn(name="coin", categories=("<=50K", ">50K")),))
    df = pd.read_csv(SAMPLES / "adult.csv", usecols=COLUMNS, dtype={"sex": str, "income": str})
    df = df.dropna().reset_index(drop=True)
    for c in ("age", "education_num"):
        col = full.column(c)
        df[c] = df[c].clip(col.lower, col.upper)
    return df, schema


def run(method: str, epsilon: float, trials: int, rows: int, pop: pd.DataFrame, schema: Schema) -> dict[str, float]:
    truth = {"education_num": float(pop["education_num"].mean()), "age": float(pop["age"].mean()),
             "female": float((pop["sex"] == "Female").mean())}
    keys = ["education_num", "age", "female"]
    hit = {k: 0 for k in keys}
    naive_hit = {k: 0 for k in keys}
    width = {k: 0.0 for k in keys}
    naive_width = {k: 0.0 for k in keys}
    rej = {"null": [0, 0, 0], "alt": [0, 0, 0]}  # honest rejections, naive rejections, trials with the pair measured
    t0 = time.perf_counter()
    for i in range(trials):
        rng = np.random.default_rng(1_000_003 * i + 7)
        df = pop.iloc[rng.integers(0, len(pop), rows)].reset_index(drop=True)
        df["coin"] = pop["income"].to_numpy()[rng.integers(0, len(pop), rows)]
        rel = from_release(release(df, schema, epsilon=epsilon, seed=i, method=method))
        results = {"education_num": mean(rel, "education_num", rng=rng, n_sim=1000),
                   "age": mean(rel, "age", rng=rng, n_sim=1000),
                   "female": proportion(rel, "sex", "Female", rng=rng, n_sim=1000)}
        for k, r in results.items():
            hit[k] += r.low <= truth[k] <= r.high
            width[k] += r.high - r.low
            if math.isfinite(r.naive_low):
                naive_hit[k] += r.naive_low <= truth[k] <= r.naive_high
                naive_width[k] += r.naive_high - r.naive_low
        for name, pair in (("null", ("sex", "coin")), ("alt", ("sex", "income"))):
            try:
                t = independence(rel, *pair, rng=rng, n_sim=199)
            except InputError:  # marginals: this pair was not measured in this release
                continue
            rej[name][0] += t.p_value <= 0.05
            rej[name][1] += t.naive_p_value <= 0.05
            rej[name][2] += 1
    out: dict[str, float] = {"method": method, "epsilon": epsilon, "trials": trials, "rows": rows,
                             "seconds": time.perf_counter() - t0}
    for k in keys:
        out[f"cover_{k}"] = hit[k] / trials
        out[f"naive_cover_{k}"] = naive_hit[k] / trials
        out[f"width_{k}"] = width[k] / trials
        out[f"naive_width_{k}"] = naive_width[k] / trials
        out[f"width_ratio_{k}"] = width[k] / naive_width[k] if naive_width[k] else math.nan
    for name in ("null", "alt"):
        h, nv, used = rej[name]
        out[f"tested_{name}"] = used
        out[f"reject_{name}"] = h / used if used else math.nan
        out[f"naive_reject_{name}"] = nv / used if used else math.nan
    return out


def report(r: dict[str, float]) -> None:
    print(f"\n{r['method']} method, ε = {r['epsilon']:g}: {r['trials']} releases of {r['rows']:,} rows"
          f" ({r['seconds']:.0f} s)")
    print(f"  {'statistic':<28}{'coverage':>9}{'naive':>8}{'width':>11}{'naive':>10}{'ratio':>8}")
    for k, label in (("education_num", "mean education_num (exact)"), ("age", "mean age (bins 8 wide)"),
                     ("female", "share sex = Female")):
        print(f"  {label:<28}{r[f'cover_{k}']:>9.3f}{r[f'naive_cover_{k}']:>8.3f}{r[f'width_{k}']:>11.4g}"
              f"{r[f'naive_width_{k}']:>10.4g}{r[f'width_ratio_{k}']:>8.2f}")
    print(f"  independence at α = 0.05     {'honest':>9}{'naive':>8}   releases with the pair measured")
    print(f"  {'type-I (sex ⟂ coin)':<28}{r['reject_null']:>9.3f}{r['naive_reject_null']:>8.3f}   {r['tested_null']}")
    print(f"  {'power (sex × income)':<28}{r['reject_alt']:>9.3f}{r['naive_reject_alt']:>8.3f}   {r['tested_alt']}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trials", type=int, default=150)
    p.add_argument("--rows", type=int, default=2000)
    p.add_argument("--eps", type=float, nargs="+", default=[0.1, 1.0])
    p.add_argument("--methods", nargs="+", default=["histogram", "marginals"], choices=["histogram", "marginals"])
    p.add_argument("--json", default=None, help="also write the figures to this JSON file")
    a = p.parse_args()
    pop, schema = population()
    print(f"Population: bundled Adult sample, {len(pop):,} people; mean education_num {pop['education_num'].mean():.4f},"
          f" mean age {pop['age'].mean():.4f}, share Female {(pop['sex'] == 'Female').mean():.4f}")
    results = []
    for method in a.methods:
        for eps in a.eps:
            r = run(method, eps, a.trials, a.rows, pop, schema)
            report(r)
            results.append(r)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
