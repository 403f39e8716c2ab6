"""Paired comparison of whole marginals releases between this working tree and another git revision.

Five seeds leave about ±0.0007 on Adult's 2-way TVD at ε = 1, larger than most changes worth
making; releasing with the *same* seeds on both versions and averaging the per-seed differences
removes most of that noise. For each ε this prints both versions' mean 2-/3-way TVD (the
yardstick of ``bench_marginals.py``: all pairs, its 300 triples) and the mean difference
(this tree − the other) with its standard error.

    python benchmarks/bench_paired.py --against e82e07c --eps 1 3 --seeds 12
    python benchmarks/bench_paired.py --against HEAD~3 --table titanic --seeds 30
    python benchmarks/bench_paired.py --against HEAD~1 --data /tmp/rdatasets --all --seeds 6

``--table NAME`` also takes any ``NAME.csv`` in ``--data`` with ``NAME_schema.json`` beside it, and ``--all``
every such table there (``benchmarks/tables/fetch_rdatasets.py`` writes 52): then a line per table and the
geometric mean of the ratios (this tree ÷ the other) over them.

The other revision is checked out with ``git worktree`` into a temporary folder and removed after;
each version runs in its own process (seeds 2000, 2001, …; releases use a secure generator).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SEED0 = 2000


def _worker(repo: str, data: str, tables: list[str], eps: list[float], seeds: int, delta: float) -> None:
    """Release with ``repo``'s dpsynth and print per-table, per-seed TVDs as JSON on stdout."""
    sys.path.insert(0, repo)
    import importlib

    import dpsynth.binning
    import dpsynth.schema

    # (the package exports a function named release; imported before bench_marginals puts this tree on the path)
    do_release = importlib.import_module("dpsynth.release").release
    import inspect

    # the benchmark tables' schemas are drafted from the data; a tree that refuses those by default takes the flag
    drafted = {"accept_data_derived": True} if "accept_data_derived" in inspect.signature(do_release).parameters else {}

    if not Path(dpsynth.__file__).resolve().is_relative_to(Path(repo).resolve()):
        raise SystemExit(f"dpsynth came from {dpsynth.__file__}, not {repo}")
    sys.path.insert(1, str(HERE))
    import pandas as pd
    from bench_marginals import Workload

    out: dict[str, dict[str, list]] = {}
    for table in tables:
        schema = dpsynth.schema.load_schema(_schema_path(data, table))
        df = pd.read_csv(Path(data) / f"{table}.csv", dtype=str, keep_default_na=False)
        work = Workload(dpsynth.binning.encode(df, schema).codes, schema.sizes)
        out[table] = {}
        for e in eps:
            rows = []
            for s in range(seeds):
                rel = do_release(df, schema, epsilon=e, delta=delta, method="marginals", **drafted,
                                 neighbours="add-remove", rng=np.random.default_rng(SEED0 + s))
                rows.append(list(work.tvd(dpsynth.binning.encode(rel.synthetic, schema).codes)))
            out[table][str(e)] = rows
    print(json.dumps(out))


def tables_in(data: str | Path) -> list[str]:
    """The tables of a folder: every ``NAME`` with ``NAME.csv`` and ``NAME_schema.json`` there, sorted."""
    return sorted(p.name[: -len("_schema.json")] for p in Path(data).glob("*_schema.json")
                  if (p.parent / (p.name[: -len("_schema.json")] + ".csv")).is_file())


def _schema_path(data: str, table: str) -> Path:
    return HERE / "titanic_schema.json" if table == "titanic" else Path(data) / f"{table}_schema.json"


def _run(repo: Path, args: argparse.Namespace, tables: list[str]) -> dict[str, dict[str, np.ndarray]]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", str(repo), "--data", args.data,
           "--table", *tables, "--seeds", str(args.seeds), "--delta", str(args.delta),
           "--eps", *map(str, args.eps)]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise SystemExit(f"{repo}: {res.stderr.strip().splitlines()[-1] if res.stderr.strip() else res.returncode}")
    got = json.loads(res.stdout.strip().splitlines()[-1])
    return {t: {k: np.array(v) for k, v in per.items()} for t, per in got.items()}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", help="git revision to compare with (required unless --worker)")
    ap.add_argument("--data", default=str(ROOT / ".." / "shared" / "data"), help="folder with adult.csv etc.")
    ap.add_argument("--table", nargs="+", default=["adult"],
                    help="adult, titanic, or NAME for NAME.csv and NAME_schema.json in --data")
    ap.add_argument("--all", action="store_true", help="every NAME.csv with NAME_schema.json in --data")
    ap.add_argument("--eps", type=float, nargs="+", default=[1.0])
    ap.add_argument("--delta", type=float, default=1e-9)
    ap.add_argument("--seeds", type=int, default=12)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        _worker(args.worker, args.data, args.table, args.eps, args.seeds, args.delta)
        return
    if not args.against:
        ap.error("--against REV is required")
    tables = tables_in(args.data) if args.all else args.table
    for t in tables:
        if not (Path(args.data) / f"{t}.csv").is_file() or not _schema_path(args.data, t).is_file():
            ap.error(f"no {t}.csv with its schema in {args.data}")
    with tempfile.TemporaryDirectory() as tmp:
        other = Path(tmp) / "other"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(other), args.against],
                       check=True, capture_output=True)
        try:
            base = _run(other, args, tables)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(other)], check=False,
                           capture_output=True)
    ours = _run(ROOT, args, tables)
    print(f"{args.seeds} paired seeds, δ = {args.delta:g}; 2-way / 3-way TVD")
    print(f"{'table':>22} {'ε':>5}  {args.against:>14}  {'this tree':>14}  {'difference ± s.e.':>30}")
    logs: dict[str, list[np.ndarray]] = {e: [] for e in map(str, args.eps)}
    for t in tables:
        for e in map(str, args.eps):
            a, b = base[t][e], ours[t][e]
            d = b - a
            se = d.std(axis=0, ddof=1) / np.sqrt(len(d)) if len(d) > 1 else np.full(2, np.nan)
            logs[e].append(np.log(b.mean(axis=0) / a.mean(axis=0)))
            print(f"{t:>22} {float(e):>5g}  {a[:, 0].mean():.4f}/{a[:, 1].mean():.4f}  {b[:, 0].mean():.4f}/"
                  f"{b[:, 1].mean():.4f}  {d[:, 0].mean():+.4f}±{se[0]:.4f} / {d[:, 1].mean():+.4f}±{se[1]:.4f}")
    if len(tables) > 1:
        for e, ls in logs.items():
            g = np.exp(np.mean(ls, axis=0))
            print(f"ε = {float(e):g}: geometric mean over {len(tables)} tables of this tree ÷ {args.against}: "
                  f"{g[0]:.4f} / {g[1]:.4f}")


if __name__ == "__main__":
    main()
