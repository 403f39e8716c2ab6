"""Whole releases against independent noisy one-ways at the same ε, on any folder of tables: the least a
model of the joint structure must beat (issue 14: "never worse … than independent noisy one-column
marginals at the same ε", stated for wide tables, checked here on narrow ones).

Every ``NAME.csv`` with ``NAME_schema.json`` beside it in ``--data`` is released whole
(``release(method="marginals")``, δ = 1e-9 unless ``--delta``, seeds 2000, 2001, …) and binned by its schema. The baseline
spends the release's whole budget (the ρ of (ε, δ), or ε under pure DP) on the one-ways, split equally over
the columns (the library's own discrete mechanism, ``Plan.preview``), projects each noisy one-way onto the
simplex (``project_simplex``) and draws as many rows as the table has, as the release's sampler does (each
column's counts within one of n·p, by largest remainders, the columns shuffled independently: the
synthetic data an independent-columns release would give). Prints each table's mean 1-/2-/3-way TVD (all
pairs, up to 300 triples) for both, the ratio on 2-way TVD, and the tables where the release is worse.

    python benchmarks/tables/fetch_rdatasets.py --out /tmp/rdatasets
    python benchmarks/bench_independent.py --data /tmp/rdatasets --eps 1 --seeds 2
    python benchmarks/bench_independent.py --data /tmp/rdatasets --tables BudgetUK --seeds 12 --set 'dpsynth.marginals.fit.ROUND_ITERS=24'

``--set`` overrides module constants before releasing, as ``peers/aim_suite.py`` does. Seeds are for the
benchmark only; releases use a secure generator.
"""

from __future__ import annotations

import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "peers"))

SEED0 = 2000


def _table(job: tuple[str, str, float, int, str, float]) -> tuple[str, int, int, np.ndarray, np.ndarray]:
    """One table: mean (1-, 2-, 3-way TVD) of the releases and of the independent baseline over the seeds."""
    data, name, eps, seeds, settings, delta = job
    from aim_suite import apply_settings
    from bench_marginals import Workload, marginal

    apply_settings(settings)
    from dpsynth.binning import encode
    from dpsynth.marginals.budget import Plan
    from dpsynth.marginals.estimation import project_simplex
    from dpsynth.neighbours import Neighbours
    from dpsynth.release import release
    from dpsynth.schema import load_schema

    schema = load_schema(Path(data) / f"{name}_schema.json")
    df = pd.read_csv(Path(data) / f"{name}.csv", dtype=str, keep_default_na=False)
    codes = encode(df, schema).codes
    sizes = tuple(schema.sizes)
    n, d = codes.shape
    work = Workload(codes, sizes)
    real1 = [marginal(codes, sizes, (j,)) for j in range(d)]

    def one_way(m: list[np.ndarray]) -> float:
        return float(np.mean([0.5 * np.abs(m[j] - real1[j]).sum() for j in range(d)]))

    def rows_of(p: np.ndarray, g: np.random.Generator) -> np.ndarray:
        """n values with counts within one of n·p (largest remainders), in random order."""
        want = n * p
        counts = np.floor(want).astype(np.int64)
        counts[np.argsort(counts - want, kind="stable")[: n - int(counts.sum())]] += 1
        return g.permutation(np.repeat(np.arange(len(p)), counts))

    plan = Plan(eps, delta, Neighbours.parse("add-remove"), 1)
    mech = plan.preview(plan.total / d)
    ours, base = [], []
    for s in range(seeds):
        rel = release(df, schema, epsilon=eps, delta=delta, method="marginals", accept_data_derived=True, neighbours="add-remove",
                      rng=np.random.default_rng(SEED0 + s))
        syn = encode(rel.synthetic, schema).codes
        ours.append((one_way([marginal(syn, sizes, (j,)) for j in range(d)]), *work.tvd(syn)))
        g = np.random.default_rng(12345 + s)  # the baseline's own noise: the release's draws must not move it
        p = []
        for j in range(d):
            y = mech(np.bincount(codes[:, j], minlength=sizes[j]), rng=g)
            q = project_simplex(np.asarray(y, dtype=np.float64), max(float(y.sum()), 1.0))
            p.append(q / q.sum() if q.sum() > 0 else np.full(sizes[j], 1.0 / sizes[j]))
        indep = np.column_stack([rows_of(pj, g) for pj in p])
        base.append((one_way([marginal(indep, sizes, (j,)) for j in range(d)]), *work.tvd(indep)))
    return name, n, d, np.mean(ours, axis=0), np.mean(base, axis=0)


def main(argv: list[str] | None = None) -> None:
    from folder_cli import folder_parser, folder_tables

    ap = folder_parser(__doc__, 1.0)
    ap.add_argument("--delta", type=float, default=1e-9, help="0: pure DP (Laplace noise), as the dashboard's default")
    args = ap.parse_args(argv)
    data = Path(args.data)
    names = folder_tables(args)
    print(f"ε = {args.eps:g}, δ = {args.delta:g}, {args.seeds} seeds; 1-/2-/3-way TVD, release against independent noisy"
          " one-ways spending the whole budget" + (f"; {args.set}" if args.set else ""))
    worse, ratios = [], []
    with ProcessPoolExecutor(args.workers) as pool:
        for name, n, d, o, b in pool.map(_table, [(str(data), t, args.eps, args.seeds, args.set, args.delta) for t in names]):
            if d < 2:
                continue
            ratios.append(o[1] / b[1])
            if o[1] > b[1]:
                worse.append(name)
            print(f"{name:>22} {n:>7} × {d:<3} release {o[0]:.4f} / {o[1]:.4f} / {o[2]:.4f}   independent"
                  f" {b[0]:.4f} / {b[1]:.4f} / {b[2]:.4f}   2-way ÷ independent {o[1] / b[1]:.2f}"
                  + ("   worse" if o[1] > b[1] else ""), flush=True)
    print(f"2-way TVD worse than independent on {len(worse)} of {len(ratios)} tables"
          + (f" ({', '.join(worse)})" if worse else "")
          + f"; geometric mean ÷ independent {np.exp(np.mean(np.log(ratios))):.3f}")


if __name__ == "__main__":
    main()
