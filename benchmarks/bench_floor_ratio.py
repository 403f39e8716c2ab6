"""Each table's 2-/3-way TVD as a multiple of its sampling floor, and how many are within 1.3 × (issue 14 at ε = 10).

The floor is the yardstick's TVD between the real rows and a bootstrap resample of as many rows (mean of
``--resamples``); dpsynth's is the mean over ``--seeds`` releases (seeds 2000, 2001, …), both with
``bench_marginals.Workload`` (all pairs, its 300 triples). Every ``NAME.csv`` with ``NAME_schema.json`` in
``--data`` is a table (``tables/fetch_rdatasets.py`` writes 52).

    python benchmarks/bench_floor_ratio.py --data /tmp/rdatasets --eps 10 --seeds 2
    python benchmarks/bench_floor_ratio.py --data /tmp/rdatasets --tables Wages,ability --set 'dpsynth.marginals.fit.ROUNDS_PER_COLUMN=4'

``--set`` overrides module constants before releasing, as ``peers/aim_suite.py`` does.
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


def _ratio(job: tuple[str, str, float, int, int, str]) -> tuple[str, np.ndarray]:
    data, table, eps, seeds, resamples, settings = job
    from bench_marginals import Workload
    from peers.aim_suite import apply_settings

    apply_settings(settings)

    from dpsynth.binning import encode
    from dpsynth.release import release
    from dpsynth.schema import load_schema

    schema = load_schema(Path(data) / f"{table}_schema.json")
    df = pd.read_csv(Path(data) / f"{table}.csv", dtype=str, keep_default_na=False)
    codes = encode(df, schema).codes
    work = Workload(codes, schema.sizes)
    g = np.random.default_rng(0)
    floor = np.mean([work.tvd(codes[g.integers(0, len(codes), len(codes))]) for _ in range(resamples)], axis=0)
    ours = np.mean([work.tvd(encode(release(df, schema, epsilon=eps, delta=1e-9, method="marginals", accept_data_derived=True,
                                            neighbours="add-remove", rng=np.random.default_rng(2000 + s)).synthetic,
                                    schema).codes) for s in range(seeds)], axis=0)
    return table, ours / floor


def main(argv: list[str] | None = None) -> None:
    from folder_cli import folder_parser, folder_tables
    from peers.aim_suite import apply_settings

    ap = folder_parser(__doc__, 10.0)
    ap.add_argument("--resamples", type=int, default=3)
    args = ap.parse_args(argv)
    apply_settings(args.set)  # fail early on a misspelt name
    tables = folder_tables(args)
    with ProcessPoolExecutor(args.workers) as pool:
        done = list(pool.map(_ratio, [(args.data, t, args.eps, args.seeds, args.resamples, args.set)
                                      for t in tables]))
    for t, r in done:
        print(f"{t:>22}  {r[0]:.2f} / {r[1]:.2f}{'' if r.max() <= 1.3 else '   over 1.3'}")
    r = np.array([x for _, x in done])
    print(f"ε = {args.eps:g}: within 1.3 × the floor, 2-way {int((r[:, 0] <= 1.3).sum())} and 3-way "
          f"{int((r[:, 1] <= 1.3).sum())} of {len(r)} tables")


if __name__ == "__main__":
    main()
