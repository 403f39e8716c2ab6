"""KS distance of raw numeric values, table by table and column by column, on any folder of tables (issue 14:
mean KS ≤ 0.03 at ε = 1 on tables the benchmarks did not tune on).

Every ``NAME.csv`` with ``NAME_schema.json`` beside it in ``--data`` is released whole
(``release(method="marginals")``, δ = 1e-9, seeds 2000, 2001, …) and each numeric column's synthetic values are
compared with the real ones (two-sample Kolmogorov–Smirnov statistic, as ``bench_marginals.value_figures``).
Beside it, the same statistic for a bootstrap resample of the real rows (the sampling floor, not private).
Prints each table's mean over its numeric columns and seeds, how many tables exceed ``--target``, and the
columns furthest above their floor with what they look like (distinct values, the share of the most common
one, the grid the value model chose): the columns of few repeated values stored with many digits
(``6.1000001``, ``0.707106781186547``) are where the excess is.

    python benchmarks/tables/fetch_rdatasets.py --out /tmp/rdatasets
    python benchmarks/bench_ks_tables.py --data /tmp/rdatasets --eps 1 --seeds 2
    python benchmarks/bench_ks_tables.py --data /tmp/rdatasets --tables Yogurt,vote92 --seeds 4 --set 'dpsynth.value_model.PRECISION_Z=1.0'

``--set`` overrides module constants before releasing, as ``peers/aim_suite.py`` does. Seeds are for the
benchmark only; releases use a secure generator. The mean is also printed over the tables of 7 to 16 columns
(the width of the tables issue 14 is judged on).

One seed leaves about ±0.001 on the mean over 51 tables, as large as most changes worth making. To compare two
settings (or two trees) on the same seeds, save one run's columns and read them back beside another's: a line per
column that moved, and the mean paired difference over tables with its standard error.

    python benchmarks/bench_ks_tables.py --data /tmp/rdatasets --seeds 2 --save /tmp/ks_main.csv
    python benchmarks/bench_ks_tables.py --data /tmp/rdatasets --seeds 2 --against /tmp/ks_main.csv --set 'dpsynth.value_model.SMOOTH_Z=3.0'
"""

from __future__ import annotations

import sys
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE / "peers"))

SEED0 = 2000


def _columns(job: tuple[str, int, float, str]) -> list[dict]:
    """One release of one table: a record per numeric column."""
    path, seed, eps, settings = job
    warnings.filterwarnings("ignore")  # scipy's note that the exact KS p-value fell back to the asymptotic one
    from aim_suite import apply_settings
    from scipy import stats

    from dpsynth.release import release
    from dpsynth.schema import NumericColumn, load_schema

    apply_settings(settings)
    p = Path(path)
    schema = load_schema(p.with_name(f"{p.stem}_schema.json"))
    df = pd.read_csv(p, dtype=str, keep_default_na=False)
    numeric = [c for c in schema.columns if isinstance(c, NumericColumn)]
    if not numeric:
        return []
    rel = release(df, schema, epsilon=eps, delta=1e-9, method="marginals", accept_data_derived=True, neighbours="add-remove",
                  rng=np.random.default_rng(SEED0 + seed))
    grids = (rel.card.get("value_model") or {}).get("stage", {}).get("columns", {})
    boot = np.random.default_rng(12345 + seed).integers(0, len(df), len(df))
    out = []
    for c in numeric:
        real = pd.to_numeric(df[c.name], errors="coerce")
        r = real.dropna().to_numpy(np.float64)
        s = pd.to_numeric(rel.synthetic[c.name], errors="coerce").dropna().to_numpy(np.float64)
        b = real.iloc[boot].dropna().to_numpy(np.float64)
        if len(r) == 0 or len(s) == 0:
            continue
        counts = pd.Series(r).value_counts()
        out.append({"table": p.stem, "column": c.name, "rows": len(r),
                    "ks": stats.ks_2samp(r, s).statistic, "floor": stats.ks_2samp(r, b).statistic,
                    "distinct": len(counts), "top": counts.iloc[0] / len(r),
                    "grid": str(grids.get(c.name, {}).get("grid", "declared or none")).split(" (")[0],
                    "width": len(schema.columns)})
    return out


def compare(cols: pd.DataFrame, before: pd.DataFrame, worst: int) -> None:
    """Print this run's KS against ``before`` (another run's ``--save``): the columns that moved most either way, and
    the mean over tables of the paired difference (this − before) with its standard error over tables."""
    both = cols[["ks"]].join(before[["ks"]].rename(columns={"ks": "ks_before"}), how="inner")
    if both.empty:
        raise SystemExit("--against: no table and column in common with this run")
    both["change"] = both.ks - both.ks_before
    moved = both[both.change.abs() > 1e-12].sort_values("change")
    print(f"\nagainst the saved run: {len(moved)} of {len(both)} columns moved")
    for (t, c), r in pd.concat([moved.head(worst), moved.tail(worst)]).drop_duplicates().iterrows():
        print(f"  {t + '.' + c:>30}  KS {r['ks_before']:.4f} → {r['ks']:.4f}  ({r['change']:+.4f})")
    per_table = both.groupby(level=0).change.mean()
    se = f"{per_table.std(ddof=1) / np.sqrt(len(per_table)):.4f}" if len(per_table) > 1 else "n/a (one table)"
    print(f"mean over {len(per_table)} tables: {both.groupby(level=0).ks_before.mean().mean():.4f} →"
          f" {both.groupby(level=0).ks.mean().mean():.4f} ({per_table.mean():+.4f} ± {se})")


def main(argv: list[str] | None = None) -> None:
    from folder_cli import folder_parser, folder_tables

    ap = folder_parser(__doc__, 1.0)
    ap.add_argument("--target", type=float, default=0.03)
    ap.add_argument("--worst", type=int, default=15, help="columns to list, furthest above their floor first")
    ap.add_argument("--save", default="", help="write the per-column means (CSV) for a later --against")
    ap.add_argument("--against", default="", help="a --save file of another run (same tables and seeds) to compare with")
    args = ap.parse_args(argv)
    data = Path(args.data)
    names = folder_tables(args)
    jobs = [(str(data / f"{t}.csv"), s, args.eps, args.set) for t in names for s in range(args.seeds)]
    with ProcessPoolExecutor(args.workers) as pool:
        rows = [r for rs in pool.map(_columns, jobs) for r in rs]
    if not rows:
        raise SystemExit("no numeric columns in these tables")
    cols = pd.DataFrame(rows).groupby(["table", "column"], sort=False).agg(
        rows=("rows", "first"), ks=("ks", "mean"), floor=("floor", "mean"), distinct=("distinct", "first"),
        top=("top", "first"), grid=("grid", "first"), width=("width", "first"))
    if args.save:
        cols.assign(seeds=args.seeds, eps=args.eps).to_csv(args.save)
    tables = cols.groupby(level=0, sort=False).agg(rows=("rows", "max"), ks=("ks", "mean"), floor=("floor", "mean"),
                                                   columns=("ks", "size"), width=("width", "first")
                                                   ).sort_values("ks", ascending=False)
    print(f"ε = {args.eps:g}, δ = 1e-9, {args.seeds} seeds; mean KS of raw numeric values per table"
          + (f"; {args.set}" if args.set else ""))
    for t, r in tables.iterrows():
        print(f"{t:>22} {int(r['rows']):>7} rows {int(r['columns']):>3} numeric   KS {r['ks']:.4f}   floor {r['floor']:.4f}"
              + ("   over" if r["ks"] > args.target else ""))
    over = int((tables.ks > args.target).sum())
    print(f"{over} of {len(tables)} tables over {args.target:g}; mean over tables {tables.ks.mean():.4f}"
          f" (geometric {np.exp(np.log(tables.ks).mean()):.4f})")
    judged = tables[(tables.width >= 7) & (tables.width <= 16)]
    if len(judged):
        print(f"tables of 7 to 16 columns: {int((judged.ks > args.target).sum())} of {len(judged)} over {args.target:g};"
              f" mean {judged.ks.mean():.4f}")
    cols["excess"] = cols.ks - cols.floor
    print(f"\ncolumns furthest above their floor ({args.worst}):")
    for (t, c), r in cols.sort_values("excess", ascending=False).head(args.worst).iterrows():
        print(f"  {t + '.' + c:>30}  KS {r['ks']:.4f}  floor {r['floor']:.4f}  {int(r['distinct']):>6} distinct,"
              f" top {r['top']:.0%}, grid {r['grid']}")
    if args.against:
        before = pd.read_csv(args.against, index_col=["table", "column"])
        if {"seeds", "eps"} <= set(before.columns) and (before.seeds.iloc[0] != args.seeds or before.eps.iloc[0] != args.eps):
            raise SystemExit(f"--against: {args.against} was run with {before.seeds.iloc[0]} seeds at ε = {before.eps.iloc[0]:g},"
                             f" this run with {args.seeds} at ε = {args.eps:g}: the seeds would not be paired")
        compare(cols, before, args.worst)


if __name__ == "__main__":
    main()
