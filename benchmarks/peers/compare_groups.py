"""Where a peer's synthetic rows beat dpsynth's: mean TVD of marginals grouped by their columns' sizes.

The issue-14 yardstick averages the TVD of all 2-way and 3-way marginals, so a gap to AIM says how far
behind dpsynth is, not where. This script splits the same averages by the sizes of the columns a
marginal holds, e.g. on Wages (eight yes/no columns and four of ten bins) "(2, 2)" is the 28 pairs of
two yes/no columns, "(2, 10)" the 32 pairs of a yes/no and a 10-bin column. For every group it prints
dpsynth's mean over ``--seeds`` releases, each peer file's (the CSVs ``run_peers.py --keep DIR``
keeps) and the sampling floor (rows resampled from the real table). For dpsynth it also splits the
pairs of two yes/no columns by whether the release measured them directly, inside a measured triple or
not at all (the model's own tables, ``MarginalModel.measurements``), and gives the same for the raw
noisy tables: how much the fit adds to a measurement, and how far the pairs it never measured are.

    python benchmarks/peers/compare_groups.py --data DIR/Wages.csv --schema DIR/Wages_schema.json \
        --eps 1 --seeds 8 --peer KEEP/aim-mbi2_e1_s2.csv

Seeds are for the benchmark only (reproducible comparison); releases use a secure generator.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_marginals import marginal as flat_marginal  # noqa: E402

from dpsynth.binning import encode  # noqa: E402
from dpsynth.release import release  # noqa: E402
from dpsynth.schema import load_schema  # noqa: E402

SEED0 = 2000


def marginal(codes: np.ndarray, sizes: tuple[int, ...], cols: tuple[int, ...]) -> np.ndarray:
    """Proportions of ``codes`` on ``cols``, one axis per column (the yardstick's marginal, reshaped)."""
    return flat_marginal(codes, sizes, cols).reshape([sizes[c] for c in cols])


def tvd(a: np.ndarray, b: np.ndarray) -> float:
    return 0.5 * float(np.abs(a - b).sum())


def by_group(real: np.ndarray, synths: list[np.ndarray], sizes: tuple[int, ...]) -> dict[tuple, list[float]]:
    """Mean TVD over ``synths`` of every 1-, 2- and 3-way marginal, grouped by (k, sorted column sizes)."""
    out: dict[tuple, list[float]] = defaultdict(list)
    for k in (1, 2, 3):
        for cols in combinations(range(real.shape[1]), k):
            r = marginal(real, sizes, cols)
            out[(k, tuple(sorted(sizes[c] for c in cols)))].append(
                float(np.mean([tvd(r, marginal(s, sizes, cols)) for s in synths])))
    return out


def _on_pair(cols: tuple[int, ...], y: np.ndarray, sizes: tuple[int, ...], i: int, j: int) -> np.ndarray:
    """A measured table on ``cols`` summed onto (i, j), axes in that order, clamped at 0 and normalised."""
    t = y.reshape([sizes[c] for c in cols])
    t = t.sum(axis=tuple(k for k, c in enumerate(cols) if c not in (i, j)))
    t = np.maximum(t if [c for c in cols if c in (i, j)] == [i, j] else t.T, 0.0)
    return t / max(float(t.sum()), 1e-300)


def yes_no_pairs(real: np.ndarray, synth: np.ndarray, sizes: tuple[int, ...], model) -> dict[str, list[float]]:
    """TVD of each pair of two 2-category columns in ``synth``, by how ``model`` measured it, and of the
    noisy table itself where it did."""
    tables = [(tuple(int(c) for c in cols), np.asarray(y, dtype=np.float64)) for cols, y in model.measurements]
    out: dict[str, list[float]] = defaultdict(list)
    for i, j in combinations(range(real.shape[1]), 2):
        if sizes[i] != 2 or sizes[j] != 2:
            continue
        r = marginal(real, sizes, (i, j))
        got = tvd(r, marginal(synth, sizes, (i, j)))
        direct = [(cols, y) for cols, y in tables if set(cols) == {i, j}]
        triple = [(cols, y) for cols, y in tables if len(cols) == 3 and {i, j} <= set(cols)]
        how = "measured as a pair" if direct else "measured in a triple" if triple else "never measured"
        out[how].append(got)
        if direct or triple:
            out[how + ": its noisy table"].append(tvd(r, _on_pair(*(direct or triple)[-1], sizes, i, j)))
        out["independence (real one-ways)"].append(tvd(r, np.outer(r.sum(1), r.sum(0))))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="the real table (CSV)")
    ap.add_argument("--schema", required=True, help="its public schema (JSON)")
    ap.add_argument("--eps", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-9)
    ap.add_argument("--seeds", type=int, default=4, help="dpsynth releases (seeds 2000, 2001, …)")
    ap.add_argument("--peer", nargs="*", default=[], help="synthetic CSVs of a peer (run_peers.py --keep)")
    args = ap.parse_args()

    schema = load_schema(args.schema)
    df = pd.read_csv(args.data, dtype=str, keep_default_na=False)
    sizes = tuple(schema.sizes)
    real = encode(df, schema).codes
    ours, pairs = [], defaultdict(list)
    for s in range(args.seeds):
        rel = release(df, schema, epsilon=args.eps, delta=args.delta, method="marginals", accept_data_derived=True,
                      rng=np.random.default_rng(SEED0 + s))
        ours.append(encode(rel.synthetic, schema).codes)
        for k, v in yes_no_pairs(real, ours[-1], sizes, rel.model).items():
            pairs[k].extend(v)
    g = np.random.default_rng(0)
    groups = {"dpsynth": by_group(real, ours, sizes),
              "floor": by_group(real, [real[g.integers(0, len(real), len(real))] for _ in range(2)], sizes)}
    if args.peer:
        groups["peer"] = by_group(real, [encode(pd.read_csv(f, dtype=str, keep_default_na=False), schema).codes
                                         for f in args.peer], sizes)
    names = list(groups)
    print(f"{'group (k, sizes)':28s} {'count':>5s} " + " ".join(f"{n:>8s}" for n in names))
    for key in sorted(groups["dpsynth"]):
        print(f"{str(key):28s} {len(groups['dpsynth'][key]):5d} "
              + " ".join(f"{np.mean(groups[n][key]):8.4f}" for n in names))
    for k in (2, 3):
        print(f"{'all ' + str(k) + '-way':28s} {'':5s} "
              + " ".join(f"{np.mean([v for key, vs in groups[n].items() if key[0] == k for v in vs]):8.4f}"
                         for n in names))
    if pairs:
        print("\npairs of two yes/no columns in dpsynth's releases (TVD; count over all releases):")
        for k, v in pairs.items():
            print(f"  {k:40s} {len(v):4d} {np.mean(v):.4f}")


if __name__ == "__main__":
    main()
