"""KS distance of raw numeric values on smaller tables (issue 14: mean KS ≤ 0.03 at ε = 1).

Whole releases (``release(method="marginals")``, δ = 1e-9 by default) of: Titanic (the benchmark's
schema, which declares no precision), seeded subsamples of Adult (the shared schema, no declared
precision either), and a generated table of nine columns whose numeric columns are whole numbers,
one-decimal measurements, money with cents (35% zeros) and negative temperatures, none declared
(:func:`mixed_table`), and a generated survey extract whose incomes lie in the bottom 2% of generous public
bounds (:func:`survey_table`). Prints, averaged over seeds, per numeric column and overall: the mean
Kolmogorov–Smirnov distance between real and synthetic raw values; beside it two non-private
yardsticks computed in the same run — a bootstrap resample of the real rows (the sampling floor)
and "bins only": the synthetic rows' bins with real values drawn inside them, i.e. the part of the
KS that the main model's one-way error leaves before the value model adds its own.

    python benchmarks/bench_value_ks.py                           # ε = 1, 4 seeds, Adult at 5k/10k/20k rows
    python benchmarks/bench_value_ks.py --rows 10000 --seeds 8 --eps 1 3
    python benchmarks/bench_value_ks.py --only mixed --delta 0    # pure DP (Laplace), as the dashboard's default
    python benchmarks/bench_value_ks.py --only lab --rows 6497 20000   # eleven smooth lab-panel columns (lab_table)
    python benchmarks/bench_value_ks.py --alone --branching 24 64 --seeds 20   # the value model alone
    python benchmarks/bench_value_ks.py --only titanic --alone --decimals fare=4  # a curator declares a fine grid
    python benchmarks/bench_value_ks.py --only survey --rows 3000 10000 --seeds 24   # incomes under wide bounds
    python benchmarks/bench_value_ks.py --only claims --rows 8000 --alone --seeds 20  # amounts with cents, wide bounds
    python benchmarks/bench_value_ks.py --only claims --rows 8000 --alone --seeds 20 --set 'dpsynth.value_model.ROUNDING_GAP_WEAK_Z=1.0'

``--alone`` measures what the value model adds by itself: value models fitted with the budget the
release gives them (its ε_v or ρ_v), the real rows' bins with their exact shares, and inside each bin
the released distribution; the KS distance to the real raw values is computed exactly (no sampling),
so 20 seeds take seconds and settle differences of a few thousandths.

Seeds are for the benchmark only (reproducible comparison); releases use a secure generator.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dpsynth.release import release  # noqa: E402
from dpsynth.schema import CategoricalColumn, NumericColumn, Schema, load_schema  # noqa: E402
from dpsynth.utility import value_model_ks  # noqa: E402
from dpsynth.value_model import MAX_BRANCHING, fit_value_model, value_columns  # noqa: E402


def mixed_table(n: int, seed: int = 1) -> tuple[pd.DataFrame, Schema]:
    """A generated table with numeric columns of several precisions, none declared in its schema."""
    g = np.random.default_rng(seed)
    sex = g.choice(["f", "m"], n)
    grp = g.choice(list("abcd"), n, p=[0.4, 0.3, 0.2, 0.1])
    df = pd.DataFrame({
        "sex": sex,
        "grp": grp,
        "age": np.clip(np.rint(g.normal(45, 15, n)), 18, 95),
        "bmi": np.round(np.clip(g.normal(27, 5, n) + (sex == "m") * 1.5, 12, 60), 1),
        "visits": np.minimum(g.poisson(np.where(grp == "a", 1, 3)), 30),
        "spend": np.minimum(np.round(np.where(g.random(n) < 0.35, 0, g.lognormal(4, 1.2, n)), 2), 5000),
        "temp": np.clip(np.round(g.normal(-2, 8, n), 1), -40, 40),
        "glucose": np.round(np.clip(g.normal(5.5, 1.2, n), 2, 20), 1),
        "outcome": g.choice(["0", "1"], n, p=[0.8, 0.2]),
    })
    schema = Schema((
        CategoricalColumn(name="sex", categories=("f", "m")),
        CategoricalColumn(name="grp", categories=tuple("abcd")),
        NumericColumn(name="age", lower=0, upper=100, bins=10),
        NumericColumn(name="bmi", lower=10, upper=60, bins=10),
        NumericColumn(name="visits", lower=0, upper=30, bins=6),
        NumericColumn(name="spend", lower=0, upper=5000, bins=10),
        NumericColumn(name="temp", lower=-40, upper=40, bins=8),
        NumericColumn(name="glucose", lower=0, upper=20, bins=10),
        CategoricalColumn(name="outcome", categories=("0", "1")),
    ))
    return df, schema


def lab_table(n: int, seed: int = 7) -> tuple[pd.DataFrame, Schema]:
    """A generated table shaped like a laboratory panel (the UCI wine-quality table's kind): eleven smooth
    numeric columns with one to five decimals, none declared, in a curator's coarse bins, and one category."""
    g = np.random.default_rng(seed)
    red = g.random(n) < 0.25
    q = np.clip(np.round(g.normal(5.8, 0.9, n)), 3, 9)
    cols = {
        "fixed_acidity": (np.round(g.normal(7.2 + 1.1 * red, 1.2, n), 1), 0, 20, 10),
        "volatile_acidity": (np.round(np.abs(g.normal(0.3 + 0.2 * red, 0.15, n)), 3), 0, 2, 8),
        "citric_acid": (np.round(np.abs(g.normal(0.32, 0.14, n)), 2), 0, 2, 8),
        "residual_sugar": (np.round(g.lognormal(1.2 - 0.6 * red, 0.9, n), 1), 0, 70, 7),
        "chlorides": (np.round(g.lognormal(-3.0 + 0.4 * red, 0.4, n), 3), 0, 1, 10),
        "free_sulfur_dioxide": (np.round(g.gamma(3, 10, n) * (1 - 0.5 * red)), 0, 300, 6),
        "density": (np.round(g.normal(0.9947, 0.003, n), 5), 0.98, 1.04, 6),
        "pH": (np.round(g.normal(3.22, 0.16, n), 2), 2.5, 4.5, 8),
        "sulphates": (np.round(g.lognormal(-0.7 + 0.1 * red, 0.25, n), 2), 0, 2.5, 5),
        "alcohol": (np.round(g.normal(10.5 + 0.3 * (q - 5.8), 1.1, n), 1), 7, 16, 9),
        "quality": (q, 0, 10, 5),
    }
    df = pd.DataFrame({k: np.clip(v, lo, hi) for k, (v, lo, hi, _) in cols.items()})
    df["color"] = np.where(red, "red", "white")
    schema = Schema(tuple(NumericColumn(name=k, lower=lo, upper=hi, bins=b) for k, (_, lo, hi, b) in cols.items())
                    + (CategoricalColumn(name="color", categories=("red", "white")),))
    return df, schema


def survey_table(n: int, seed: int = 3) -> tuple[pd.DataFrame, Schema]:
    """A generated survey extract: whole-dollar incomes (30% zeros, 15% missing) under generous public
    bounds [0, 10,000,000], so the data fill the bottom 2% of the range and the automatic grid (steps of
    10,000) rounds them far; a constant, signed changes with two decimals, a continuous ratio, counts
    and scores, none with a declared precision."""
    g = np.random.default_rng(seed)
    income = np.where(g.random(n) < 0.3, 0, np.rint(g.lognormal(10.5, 0.8, n))).astype(float)
    income[g.random(n) < 0.15] = np.nan
    df = pd.DataFrame({
        "sex": g.choice(["f", "m"], n),
        "region": g.choice(list("nsew"), n),
        "income": income,
        "const": np.full(n, 5.0),
        "delta": np.round(g.normal(0, 3, n), 2),
        "ratio": g.beta(2, 5, n),
        "kids": np.minimum(g.poisson(1.2, n), 12).astype(float),
        "score": np.round(g.normal(600, 80, n)).clip(300, 850),
        "y": g.choice(["0", "1"], n),
    })
    schema = Schema((
        CategoricalColumn(name="sex", categories=("f", "m")),
        CategoricalColumn(name="region", categories=tuple("nsew")),
        NumericColumn(name="income", lower=0, upper=10_000_000, bins=10, missing=True),
        NumericColumn(name="const", lower=0, upper=10, bins=5),
        NumericColumn(name="delta", lower=-20, upper=20, bins=8),
        NumericColumn(name="ratio", lower=0, upper=1, bins=10),
        NumericColumn(name="kids", lower=0, upper=20, bins=5),
        NumericColumn(name="score", lower=300, upper=850, bins=11),
        CategoricalColumn(name="y", categories=("0", "1")),
    ))
    return df, schema


def claims_table(n: int, seed: int = 5) -> tuple[pd.DataFrame, Schema]:
    """A generated claims extract: three amounts in currency with cents (60% zeros, the rest log-normal
    around 3,000) under generous public bounds [0, 1,000,000] in 3, 13 and 2 bins, an age and a category,
    none with a declared precision: the automatic grid of the amounts has steps of 1,000."""
    g = np.random.default_rng(seed)
    amounts = {f"amount{j}": np.where(g.random(n) < 0.6, 0, np.round(g.lognormal(8, 1.5, n), 2)).clip(0, 1e6)
               for j in range(3)}
    df = pd.DataFrame({**amounts, "age": np.round(np.abs(g.normal(40, 12, n))).clip(0, 120),
                       "kind": g.choice(list("abcd"), n)})
    schema = Schema(tuple(NumericColumn(name=k, lower=0, upper=1_000_000, bins=b) for k, b in zip(amounts, (3, 13, 2), strict=True))
                    + (NumericColumn(name="age", lower=0, upper=120, bins=12, integer=True),
                       CategoricalColumn(name="kind", categories=tuple("abcd"))))
    return df, schema


def tables(data: Path, rows: list[int], only: str | None) -> Iterator[tuple[str, pd.DataFrame, Schema]]:
    if only in (None, "titanic") and (data / "titanic.csv").is_file():
        yield ("titanic", pd.read_csv(data / "titanic.csv", dtype=str, keep_default_na=False),
               load_schema(ROOT / "benchmarks" / "titanic_schema.json"))
    if only in (None, "adult") and (data / "adult.csv").is_file():
        full = pd.read_csv(data / "adult.csv", dtype=str, keep_default_na=False)
        schema = load_schema(data / "adult_schema.json")
        for n in rows:
            yield f"adult {n:,} rows", full.sample(min(n, len(full)), random_state=1).reset_index(drop=True), schema
    if only in (None, "mixed"):
        for n in rows:
            df, schema = mixed_table(n)
            yield f"mixed {n:,} rows", df, schema
    if only in (None, "survey"):
        for n in rows:
            df, schema = survey_table(n)
            yield f"survey {n:,} rows", df, schema
    if only == "claims":
        for n in rows:
            df, schema = claims_table(n)
            yield f"claims {n:,} rows", df, schema
    if only == "lab":  # not in the default run: eleven numeric columns, far from the target at ε = 1
        for n in rows:
            df, schema = lab_table(n)
            yield f"lab {n:,} rows", df, schema
    for name in ("fair", "randhie", "anes96"):  # benchmarks/tables/fetch_tables.py writes them
        if only in (None, name) and (data / f"{name}.csv").is_file():
            yield (name, pd.read_csv(data / f"{name}.csv", dtype=str, keep_default_na=False),
                   load_schema(ROOT / "benchmarks" / "tables" / f"{name}_schema.json"))


def ks(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    return float(stats.ks_2samp(a, b).statistic) if len(a) and len(b) else float("nan")


def bins_only(real: np.ndarray, syn: np.ndarray, col: NumericColumn, rng: np.random.Generator) -> np.ndarray:
    """The synthetic values' bins, each value replaced by a real value drawn from the same bin."""
    e = col.edges()
    nb = len(e) - 1

    def bin_of(v: np.ndarray) -> np.ndarray:
        return np.clip(np.searchsorted(e, v, side="right") - 1, 0, nb - 1)

    r = real[~np.isnan(real)]
    s = syn[~np.isnan(syn)]
    rb, sb = bin_of(r), bin_of(s)
    order = np.argsort(rb, kind="stable")
    start = np.searchsorted(rb[order], np.arange(nb))
    count = np.bincount(rb, minlength=nb)
    out = rng.uniform(e[sb], e[sb + 1])  # a bin with no real value: uniform inside it
    has = count[sb] > 0
    pick = start[sb[has]] + (rng.random(int(has.sum())) * count[sb[has]]).astype(np.int64)
    out[has] = r[order][pick]
    return out


def run_alone(name: str, df: pd.DataFrame, schema: Schema, args: argparse.Namespace) -> None:
    """``--alone``: the value model's own KS per branching limit, with the budget a release gives it."""
    cols = value_columns(schema)
    real = {c.name: pd.to_numeric(df[c.name], errors="coerce").to_numpy(np.float64) for c in cols}
    for eps in args.eps:
        vm = release(df, schema, epsilon=eps, delta=args.delta, method="marginals", accept_data_derived=True,
                     rng=np.random.default_rng(1)).values
        budget = {"rho": vm.rho} if vm.rho else {"epsilon": vm.epsilon}
        for b in args.branching:
            per: dict[str, list[float]] = {c.name: [] for c in cols}
            for s in range(args.seeds):
                model = fit_value_model(df, schema, rng=np.random.default_rng(100 + s), max_branching=b, **budget)
                for c in cols:
                    if model.trees[c.name].nodes:
                        per[c.name].append(value_model_ks(real[c.name], c, model))
            per = {k: v for k, v in per.items() if v}
            text = ", ".join(f"{k} {np.mean(v):.3f}" for k, v in per.items())
            print(f"{name}: ε = {eps:g}, δ = {args.delta:g}, branching ≤ {b}: value model alone, mean KS "
                  f"{np.mean([np.mean(v) for v in per.values()]):.4f}; {text}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    shared = ROOT / ".." / "shared" / "data"
    ap.add_argument("--data", default=str(shared), help="folder with adult.csv, adult_schema.json, titanic.csv")
    ap.add_argument("--rows", type=int, nargs="+", default=[5000, 10000, 20000])
    ap.add_argument("--eps", type=float, nargs="+", default=[1.0])
    ap.add_argument("--delta", type=float, default=1e-9)
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--only", choices=["titanic", "adult", "mixed", "fair", "randhie", "anes96", "lab", "survey", "claims"], default=None)
    ap.add_argument("--alone", action="store_true", help="the value model alone (exact bin shares, exact KS)")
    ap.add_argument("--branching", type=int, nargs="+", default=[MAX_BRANCHING], help="with --alone")
    ap.add_argument("--decimals", nargs="+", default=[], metavar="COLUMN=D",
                    help="declare these numeric columns' decimals in the schema (as a curator would)")
    ap.add_argument("--set", default="", metavar="MODULE.NAME=VALUE;…",
                    help="override module constants before releasing, as peers/aim_suite.py does")
    args = ap.parse_args(argv)
    if args.set:
        sys.path.insert(0, str(ROOT / "benchmarks" / "peers"))
        from aim_suite import apply_settings

        apply_settings(args.set)
    declared = {k: int(v) for k, v in (a.split("=", 1) for a in args.decimals)}

    for name, df, schema in tables(Path(args.data), args.rows, args.only):
        if declared:
            schema = Schema(tuple(dataclasses.replace(c, decimals=declared[c.name]) if c.name in declared else c
                                  for c in schema.columns))
            name = f"{name}, declared {', '.join(args.decimals)}"
        if args.alone:
            run_alone(name, df, schema, args)
            continue
        numeric = [c for c in schema.columns if isinstance(c, NumericColumn)]
        real = {c.name: pd.to_numeric(df[c.name], errors="coerce").to_numpy(np.float64) for c in numeric}
        boot = df.iloc[np.random.default_rng(12345).integers(0, len(df), len(df))]
        floor = np.mean([ks(real[c.name], pd.to_numeric(boot[c.name], errors="coerce").to_numpy(np.float64))
                         for c in numeric])
        print(f"\n== {name}: {len(df):,} rows, {len(numeric)} numeric columns; floor (resample) mean KS {floor:.4f}")
        for eps in args.eps:
            per: dict[str, list[float]] = {c.name: [] for c in numeric}
            binned: list[float] = []
            for s in range(args.seeds):
                rel = release(df, schema, epsilon=eps, delta=args.delta, method="marginals", accept_data_derived=True,
                              rng=np.random.default_rng(1000 + s))
                g = np.random.default_rng(7 + s)
                parts = []
                for c in numeric:
                    syn = pd.to_numeric(rel.synthetic[c.name], errors="coerce").to_numpy(np.float64)
                    per[c.name].append(ks(real[c.name], syn))
                    parts.append(ks(real[c.name], bins_only(real[c.name], syn, c, g)))
                binned.append(float(np.mean(parts)))
            overall = np.mean([np.mean(v) for v in per.values()])
            cols = ", ".join(f"{k} {np.mean(v):.3f}" for k, v in per.items())
            print(f"ε = {eps:g}, δ = {args.delta:g}: mean KS {overall:.4f} (bins only {np.mean(binned):.4f}); {cols}")


if __name__ == "__main__":
    main()
