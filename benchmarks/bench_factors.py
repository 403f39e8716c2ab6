"""Pair factors against none, paired by seed, on Adult, Titanic, an Adult extract or a generated table.

The same code releases each seed twice in one process, once as it is and once with the pair-factor
tiers emptied (``dpsynth.marginals.budget.PAIR_FACTOR_TIERS = ()``: no factor rounds, the whole budget
to the tree), and prints both mean 2-/3-way TVDs (the yardstick of ``bench_marginals.py``) and the mean
per-seed difference with its standard error. ``bench_paired.py`` compares two git revisions on Adult
and Titanic; this compares the factors' effect on any of these tables:

    python benchmarks/bench_factors.py --table adult --eps 1 10 --seeds 4
    python benchmarks/bench_factors.py --table adult --rows 15000 --eps 1 3 10 --seeds 6 \
        --columns age,workclass,education,marital_status,occupation,relationship,sex,hours_per_week
    python benchmarks/bench_factors.py --table mixed --rows 20000 --eps 1 3 --seeds 6   # mostly independent columns
    python benchmarks/bench_factors.py --table titanic --eps 3 5 10 --seeds 20 --delta 0

Seeds are for the benchmark only (reproducible comparison); releases use a secure generator.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from bench_marginals import Workload  # noqa: E402
from bench_value_ks import lab_table, mixed_table  # noqa: E402

from dpsynth.binning import encode  # noqa: E402
from dpsynth.marginals import budget  # noqa: E402
from dpsynth.release import release  # noqa: E402
from dpsynth.schema import Schema, load_schema  # noqa: E402


def table(args: argparse.Namespace) -> tuple[pd.DataFrame, Schema]:
    data = Path(args.data)
    if args.table == "mixed":
        df, schema = mixed_table(args.rows or 20_000)
        return df.astype(str), schema
    if args.table == "lab":
        df, schema = lab_table(args.rows or 6_497)
        return df.astype(str), schema
    if args.table == "titanic":
        schema, df = load_schema(HERE / "titanic_schema.json"), pd.read_csv(data / "titanic.csv", dtype=str, keep_default_na=False)
    else:
        schema, df = load_schema(data / "adult_schema.json"), pd.read_csv(data / "adult.csv", dtype=str, keep_default_na=False)
    if args.columns:
        cols = args.columns.split(",")
        schema, df = schema.select(cols), df[cols]
    if args.rows and args.rows < len(df):
        df = df.sample(args.rows, random_state=3).reset_index(drop=True)
    return df, schema


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(ROOT / ".." / "shared" / "data"), help="folder with adult.csv etc.")
    ap.add_argument("--table", choices=["adult", "titanic", "mixed", "lab"], default="adult")
    ap.add_argument("--columns", default=None, help="comma-separated columns (adult, titanic)")
    ap.add_argument("--rows", type=int, default=None, help="a seeded sample of this many rows (mixed: its size)")
    ap.add_argument("--eps", type=float, nargs="+", default=[1.0])
    ap.add_argument("--delta", type=float, default=1e-9)
    ap.add_argument("--seeds", type=int, default=4)
    args = ap.parse_args(argv)
    df, schema = table(args)
    work = Workload(encode(df, schema).codes, schema.sizes)
    tiers = budget.PAIR_FACTOR_TIERS
    print(f"{args.table}: {len(df):,} rows × {len(schema.columns)} columns, {args.seeds} paired seeds, δ = {args.delta:g};"
          " 2-way / 3-way TVD")
    for eps in args.eps:
        runs: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        info = ""
        for on in (True, False):
            budget.PAIR_FACTOR_TIERS = tiers if on else ()
            try:
                for s in range(args.seeds):
                    rel = release(df, schema, epsilon=eps, delta=args.delta, method="marginals",
                                  rng=np.random.default_rng(2000 + s))
                    runs[on].append(work.tvd(encode(rel.synthetic, schema).codes))
                    if on:
                        cap = rel.result.model.params["capacity"]
                        info = f"signal-to-noise {cap['pair_snr']:.3g}, {cap['pair_factors']} factors"
            finally:
                budget.PAIR_FACTOR_TIERS = tiers
        a, b = np.array(runs[True]), np.array(runs[False])
        d = a - b
        se = d.std(axis=0, ddof=1) / np.sqrt(len(d)) if len(d) > 1 else np.full(2, np.nan)
        print(f"  ε = {eps:g} ({info}): factors {a[:, 0].mean():.4f}/{a[:, 1].mean():.4f}, none"
              f" {b[:, 0].mean():.4f}/{b[:, 1].mean():.4f}, difference {d[:, 0].mean():+.4f}±{se[0]:.4f} /"
              f" {d[:, 1].mean():+.4f}±{se[1]:.4f}", flush=True)


if __name__ == "__main__":
    main()
