"""Benchmark of true-to-life values (dpsynth.value_model) on Adult: KS distance, point masses, means, 2-way TVD.

For each ε, releases with the marginals method without a value model (values uniform inside
bins) and with value shares s of ε (the main method gets (1 − s)·ε), and prints, averaged over
seeds: the mean Kolmogorov–Smirnov distance between real and synthetic raw values over the
numeric columns, the largest gap (over numeric columns) in the share of the column's most common
real value, each numeric column's synthetic mean (real in the header), the average 2-way TVD of
the binned table, and the seconds of the whole release. The non-private floor (a bootstrap resample
of the real rows) is printed in the same run.

    python benchmarks/bench_values.py                          # shared Adult schema, ε ∈ {0.3, 1, 3}
    python benchmarks/bench_values.py --schema dpsynth/samples/adult_schema.json --seeds 3
    python benchmarks/bench_values.py --shares 0 0.05 0.1 0.2 --eps 1

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
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_marginals import Workload, value_figures  # noqa: E402

from dpsynth.binning import decode, encode  # noqa: E402
from dpsynth.release import release  # noqa: E402
from dpsynth.schema import NumericColumn, load_schema  # noqa: E402
from dpsynth.value_model import fit_value_model  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    shared = ROOT / ".." / ".." / "shared" / "data"
    if not shared.is_dir():
        shared = ROOT / ".." / "shared" / "data"
    ap.add_argument("--csv", default=str(shared / "adult.csv") if (shared / "adult.csv").is_file()
                    else str(ROOT / "dpsynth" / "samples" / "adult.csv"))
    ap.add_argument("--schema", default=str(shared / "adult_schema.json") if (shared / "adult_schema.json").is_file()
                    else str(ROOT / "dpsynth" / "samples" / "adult_schema.json"))
    ap.add_argument("--eps", type=float, nargs="+", default=[0.3, 1.0, 3.0])
    ap.add_argument("--shares", type=float, nargs="+", default=[0.0, 0.1])
    ap.add_argument("--delta", type=float, default=1e-9)
    ap.add_argument("--seeds", type=int, default=2)
    args = ap.parse_args(argv)

    schema = load_schema(args.schema)
    df = pd.read_csv(args.csv, dtype=str, keep_default_na=False)
    numeric = [c.name for c in schema.columns if isinstance(c, NumericColumn)]
    real_codes = encode(df, schema).codes
    work = Workload(real_codes, schema.sizes)
    means = {c: pd.to_numeric(df[c], errors="coerce").mean() for c in numeric}
    print(f"Adult: {len(df):,} rows; schema {args.schema}; numeric columns {', '.join(numeric)}")
    print("real means: " + ", ".join(f"{c} {m:,.1f}" for c, m in means.items()))
    boot = df.iloc[np.random.default_rng(0).integers(0, len(df), len(df))].reset_index(drop=True)
    f = value_figures(df, boot, numeric)
    print(f"floor (resample real rows, not private): mean KS {f['ks']:.4f}, top-value gap {f['top_gap']:.4f},"
          f" 2-way TVD {work.tvd(encode(boot, schema).codes)[0]:.4f}")
    enc = encode(df, schema)
    t0 = time.perf_counter()
    vm = fit_value_model(enc.raw, schema, epsilon=0.1, rng=np.random.default_rng(0))
    t_fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    decode(enc.codes, schema, rng=np.random.default_rng(0))
    t_uniform = time.perf_counter() - t0
    t0 = time.perf_counter()
    decode(enc.codes, schema, rng=np.random.default_rng(0), values=vm)
    t_values = time.perf_counter() - t0
    print(f"value model alone (ε_v = 0.1): fit {t_fit:.3f} s; decoding {len(df):,} rows {t_values:.3f} s"
          f" vs {t_uniform:.3f} s uniform in bins")
    head = f"{'eps':>5} {'share':>6} {'mean KS':>8} {'max KS':>7} {'top gap':>8} {'2-way TVD':>10} {'seconds':>8}  means"
    print(head)
    for eps in args.eps:
        for share in args.shares:
            rows = []
            for s in range(args.seeds):
                t0 = time.perf_counter()
                rel = release(df, schema, epsilon=eps, delta=args.delta, method="marginals", value_share=share,
                              rng=np.random.default_rng(1000 + s))
                secs = time.perf_counter() - t0
                f = value_figures(df, rel.synthetic, numeric)
                f["tvd2"] = work.tvd(encode(rel.synthetic, schema).codes)[0]
                f["seconds"] = secs
                rows.append(f)
            avg = {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}
            mtxt = ", ".join(f"{c} {avg['mean:' + c]:,.1f}" for c in numeric)
            print(f"{eps:5g} {share:6g} {avg['ks']:8.4f} {avg['ks_max']:7.4f} {avg['top_gap']:8.4f}"
                  f" {avg['tvd2']:10.4f} {avg['seconds']:8.2f}  {mtxt}", flush=True)


if __name__ == "__main__":
    main()
