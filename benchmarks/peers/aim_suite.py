"""dpsynth against AIM on every table that has AIM runs in ``results.jsonl``, at ε = 1.

Issue 14 asks for 2-way and 3-way TVD ≤ 0.9 × AIM at ε = 1 on tables of 7–16 columns. AIM takes
20–35 minutes per release on most of them, so its runs are kept in ``results.jsonl`` (``run_peers.py``)
and this script only releases with this tree: it prints each table's mean TVD over ``--seeds``
releases (seeds 2000, 2001, …, as ``bench_paired.py``), its ratio to AIM's mean over AIM's seeds,
and the geometric mean of the ratios. ``--save`` keeps the per-seed TVDs; ``--base`` pairs this run
with a saved one (same seeds) and prints the per-table difference with its standard error.

    python benchmarks/peers/aim_suite.py --write /tmp/aimsuite          # fetches and writes the 14 tables
    python benchmarks/peers/aim_suite.py --data /tmp/aimsuite --seeds 12 --save /tmp/base.json
    python benchmarks/peers/aim_suite.py --data /tmp/aimsuite --seeds 12 --base /tmp/base.json \\
        --set 'dpsynth.marginals.select.NOISE_PENALTY=0.6'

``--set MODULE.NAME=VALUE;...`` overrides module constants before releasing: a way to try a setting
on the whole suite without editing the library (the value is read with ``ast.literal_eval``).

The tables: ``Wages`` and ``mdvis`` (Rdatasets, ``tables/fetch_rdatasets.py``), ``fair``, ``randhie``
and ``anes96`` (statsmodels, ``tables/fetch_tables.py``), ``census``, ``hospital``, ``likert``,
``panel`` and ``weak`` (``tables/generated.py``), ``lab``, ``survey`` and ``claims``
(``bench_value_ks.py``), Titanic (2,207 rows) and a seeded 891-row subsample of it (``titanic891``).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

SEED0 = 2000
TABLES = ("Wages", "anes96", "census", "claims", "fair", "hospital", "lab", "likert", "mdvis", "panel",
          "randhie", "survey", "titanic", "titanic891")


def aim_reference(results: Path = HERE / "results.jsonl", epsilon: float = 1.0) -> dict[str, np.ndarray]:
    """AIM's (mbi 2.0) mean 2-/3-way TVD per table over its recorded seeds."""
    runs: dict[str, list[tuple[float, float]]] = {}
    for line in results.read_text().splitlines():
        r = json.loads(line)
        if r["peer"] == "aim-mbi2" and r.get("epsilon") == epsilon and r.get("tvd2") is not None:
            runs.setdefault(r["dataset"], []).append((r["tvd2"], r["tvd3"]))
    return {k: np.mean(v, axis=0) for k, v in runs.items()}


def write_tables(out: Path) -> None:
    """Fetch and write the 14 tables with their schemas into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    tables = ROOT / "benchmarks" / "tables"
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, str(tables / "fetch_rdatasets.py"), "--out", tmp], check=True)
        for name in ("Wages", "mdvis"):
            for suffix in (".csv", "_schema.json"):
                (out / f"{name}{suffix}").write_bytes((Path(tmp) / f"{name}{suffix}").read_bytes())
    subprocess.run([sys.executable, str(tables / "fetch_tables.py"), "--out", str(out)], check=True)
    for name in ("fair", "randhie", "anes96"):
        (out / f"{name}_schema.json").write_bytes((tables / f"{name}_schema.json").read_bytes())
    subprocess.run([sys.executable, str(tables / "generated.py"), "--write", str(out)], check=True)
    from bench_value_ks import claims_table, lab_table, survey_table

    for name, make, n in (("lab", lab_table, 6_497), ("survey", survey_table, 10_000), ("claims", claims_table, 8_000)):
        df, schema = make(n)
        df.to_csv(out / f"{name}.csv", index=False)
        (out / f"{name}_schema.json").write_text(schema.to_json())
    titanic = pd.read_csv(ROOT.parent / "shared" / "data" / "titanic.csv", dtype=str, keep_default_na=False)
    schema = (ROOT / "benchmarks" / "titanic_schema.json").read_bytes()
    titanic.to_csv(out / "titanic.csv", index=False)
    titanic.sample(n=891, random_state=7).to_csv(out / "titanic891.csv", index=False)
    for name in ("titanic", "titanic891"):
        (out / f"{name}_schema.json").write_bytes(schema)
    print(f"wrote {len(TABLES)} tables to {out}")


def apply_settings(settings: str) -> None:
    """Set ``module.NAME = value`` for each ``module.NAME=value`` in a ``;``-separated list."""
    for item in filter(None, (s.strip() for s in settings.split(";"))):
        target, value = item.split("=", 1)
        module, name = target.strip().rsplit(".", 1)
        mod = importlib.import_module(module)
        if not hasattr(mod, name):
            raise SystemExit(f"{module} has no {name}")
        setattr(mod, name, ast.literal_eval(value.strip()))


def _release(job: tuple[str, str, int, float, float, str]) -> tuple[str, int, float, float]:
    data, table, seed, eps, delta, settings = job
    apply_settings(settings)
    from bench_marginals import Workload

    from dpsynth.binning import encode
    from dpsynth.release import release
    from dpsynth.schema import load_schema

    schema = load_schema(Path(data) / f"{table}_schema.json")
    df = pd.read_csv(Path(data) / f"{table}.csv", dtype=str, keep_default_na=False)
    work = Workload(encode(df, schema).codes, schema.sizes)
    rel = release(df, schema, epsilon=eps, delta=delta, method="marginals", accept_data_derived=True, neighbours="add-remove",
                  rng=np.random.default_rng(SEED0 + seed))
    two, three = work.tvd(encode(rel.synthetic, schema).codes)
    return table, seed, two, three


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", help="fetch and write the 14 tables into this folder, then stop")
    ap.add_argument("--data", help="folder holding NAME.csv and NAME_schema.json for the 14 tables")
    ap.add_argument("--tables", nargs="+", default=list(TABLES), choices=TABLES)
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--eps", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-9)
    ap.add_argument("--set", default="", help="module constants to override: 'pkg.mod.NAME=value;...'")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--save", help="write the per-seed TVDs here (JSON)")
    ap.add_argument("--base", help="a file --save wrote with the same seeds: print the paired differences")
    args = ap.parse_args(argv)
    if args.write:
        write_tables(Path(args.write))
        return
    if not args.data:
        ap.error("--data DIR is required (write it with --write DIR)")
    apply_settings(args.set)  # fail early on a misspelt name
    aim = aim_reference(epsilon=args.eps)
    jobs = [(args.data, t, s, args.eps, args.delta, args.set) for t in args.tables for s in range(args.seeds)]
    with ProcessPoolExecutor(args.workers) as pool:
        done = list(pool.map(_release, jobs))
    ours = {t: np.array([[a, b] for tt, _, a, b in sorted(done) if tt == t]) for t in args.tables}
    base = {t: np.array(v) for t, v in json.loads(Path(args.base).read_text()).items()} if args.base else {}
    print(f"ε = {args.eps:g}, δ = {args.delta:g}, {args.seeds} seeds; 2-way / 3-way TVD" + (f"; {args.set}" if args.set else ""))
    logs = []
    for t in args.tables:
        m = ours[t].mean(axis=0)
        line = f"{t:>11}  {m[0]:.4f} / {m[1]:.4f}"
        if t in aim:
            r = m / aim[t]
            logs.append(np.log(r))
            line += f"   ÷ AIM {r[0]:.3f} / {r[1]:.3f}"
        if t in base:
            d = ours[t] - base[t][: len(ours[t])]
            se = d.std(axis=0, ddof=1) / np.sqrt(len(d))
            line += f"   vs base {d[:, 0].mean():+.4f}±{se[0]:.4f} / {d[:, 1].mean():+.4f}±{se[1]:.4f}"
        print(line)
    if logs:
        g = np.exp(np.mean(logs, axis=0))
        print(f"geometric mean ÷ AIM over {len(logs)} tables: {g[0]:.3f} / {g[1]:.3f}")
    if base:
        common = [t for t in args.tables if t in base]
        g = np.exp(np.mean([np.log(ours[t].mean(axis=0) / base[t][: len(ours[t])].mean(axis=0)) for t in common], axis=0))
        print(f"geometric mean ÷ base over {len(common)} tables: {g[0]:.4f} / {g[1]:.4f}")
    if args.save:
        Path(args.save).write_text(json.dumps({t: v.tolist() for t, v in ours.items()}))


if __name__ == "__main__":
    main()
