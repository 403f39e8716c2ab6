"""The value model's share of the budget: what KS it buys and what joint accuracy it costs (issue 14).

Whole releases (``release(method="marginals", value_share=s)``, δ = 1e-9) for each share ``s``,
paired by seed against the first share given: the 2-/3-way TVD after binning by the schema (all
pairs, a fixed sample of 300 triples), its paired difference with its standard error, and the mean
Kolmogorov–Smirnov distance of the numeric columns' raw values. Tables: Adult or Titanic (optionally
a seeded sample of ``--rows`` rows, ``--columns``), or the generated mixed table of
``bench_value_ks.py`` (``--rows`` its size).

    python benchmarks/bench_value_share.py --table titanic --seeds 24 --shares 0.06 0.12 0.16
    python benchmarks/bench_value_share.py --table mixed --rows 5000 --seeds 16
    python benchmarks/bench_value_share.py --table adult --eps 10 --seeds 4

Measured at 2407860, 2-/3-way TVD difference against 0.06 ± s.e., then the mean KS (ε = 1 unless said):

- Titanic, 2,207 rows (24 seeds): KS 0.059 at 0.06; 0.12: −0.0007 ± 0.0016 / −0.0002 ± 0.0021, KS 0.044;
  0.16: +0.0017 ± 0.0020 / +0.0040 ± 0.0030, KS 0.040.
- mixed, 5,000 rows (16 seeds): KS 0.040 at 0.06; 0.12: +0.0018 ± 0.0010 / +0.0029 ± 0.0013, KS 0.032;
  0.16: +0.0026 ± 0.0014 / +0.0039 ± 0.0021, KS 0.030.
- mixed, 10,000 rows (12 seeds): KS 0.025 at 0.06; 0.12: +0.0007 ± 0.0007 / +0.0012 ± 0.0009, KS 0.021;
  0.16: +0.0015 ± 0.0007 / +0.0021 ± 0.0011, KS 0.017.
- Adult, 5,000 rows (16 seeds): KS 0.031 at 0.06; 0.12: +0.0013 ± 0.0016 / +0.0017 ± 0.0022, KS 0.028;
  0.16: +0.0021 ± 0.0012 / +0.0026 ± 0.0017, KS 0.029.
- Adult, all rows (6 seeds): KS 0.0070 at 0.06; 0.10: +0.0003 ± 0.0001 / +0.0005 ± 0.0004, KS 0.0056;
  0.14: +0.0004 ± 0.0002 / +0.0004 ± 0.0004, KS 0.0053. At ε = 10 (4 seeds) 0.10 and 0.14 cost nothing
  (−0.0001 / −0.0001, −0.0002 / −0.0001).

Doubling the share buys a fifth to a quarter of the KS on tables of a few thousand rows and costs
them up to 5–8% of their TVD (mixed); the default stays 6% (see the closing note of the thirteenth
session: a share that grows as the table shrinks would need a noisy row count before the split).

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

from bench_factors import table  # noqa: E402
from bench_marginals import Workload  # noqa: E402
from bench_value_ks import ks  # noqa: E402

from dpsynth.binning import encode  # noqa: E402
from dpsynth.release import release  # noqa: E402
from dpsynth.schema import NumericColumn  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(ROOT / ".." / "shared" / "data"), help="folder with adult.csv etc.")
    ap.add_argument("--table", choices=["adult", "titanic", "mixed", "lab"], default="titanic")
    ap.add_argument("--columns", default=None, help="comma-separated columns (adult, titanic)")
    ap.add_argument("--rows", type=int, default=None, help="a seeded sample of this many rows (mixed: its size)")
    ap.add_argument("--eps", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-9)
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--shares", type=float, nargs="+", default=[0.06, 0.12, 0.16])
    args = ap.parse_args(argv)
    df, schema = table(args)
    work = Workload(encode(df, schema).codes, schema.sizes)
    numeric = [c.name for c in schema.columns if isinstance(c, NumericColumn)]
    real = {c: pd.to_numeric(df[c], errors="coerce").to_numpy(np.float64) for c in numeric}
    print(f"{args.table}: {len(df):,} rows × {len(schema.columns)} columns, ε = {args.eps:g}, δ = {args.delta:g},"
          f" {args.seeds} paired seeds; 2-way / 3-way TVD")
    base: np.ndarray | None = None
    for share in args.shares:
        tvd, kss = [], []
        for s in range(args.seeds):
            rel = release(df, schema, epsilon=args.eps, delta=args.delta, method="marginals", accept_data_derived=True, value_share=share,
                          rng=np.random.default_rng(3000 + s))
            tvd.append(work.tvd(encode(rel.synthetic, schema).codes))
            syn = rel.synthetic
            kss.append(np.mean([ks(real[c], pd.to_numeric(syn[c], errors="coerce").to_numpy(np.float64))
                                for c in numeric]) if numeric else np.nan)
        t = np.array(tvd)
        base = t if base is None else base
        d = t - base
        se = d.std(axis=0, ddof=1) / np.sqrt(len(d)) if len(d) > 1 else np.full(2, np.nan)
        print(f"  share {share:g}: TVD {t[:, 0].mean():.4f} / {t[:, 1].mean():.4f}, difference"
              f" {d[:, 0].mean():+.4f} ± {se[0]:.4f} / {d[:, 1].mean():+.4f} ± {se[1]:.4f}; KS {np.mean(kss):.4f}",
              flush=True)


if __name__ == "__main__":
    main()
