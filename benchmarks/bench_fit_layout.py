"""The marginal fit with its size-ordered column layout against the table's own column order.

``dpsynth.marginals.fit.layout`` holds the columns fewest cells first, so every clique table's
last (contiguous) axis is its largest column; numpy runs broadcast products and reductions along
the last axis. This times whole fits (``fit_marginal_model``) on Adult's binned codes with the
layout and with the identity order (the columns as the table gives them: Adult ends with a
two-cell column), alternating in one process, and prints the ratio of the medians — the machine
is shared, so the ratio, not the seconds, is the figure. Both orders give models of the same
law (the seeded draws differ because the candidates are listed in another order).

    python benchmarks/bench_fit_layout.py --data ../shared/data --eps 1 10 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dpsynth.binning import encode  # noqa: E402
from dpsynth.marginals import fit as marginals_fit  # noqa: E402
from dpsynth.schema import load_schema  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data"), help="folder with adult.csv")
    ap.add_argument("--eps", type=float, nargs="+", default=[1.0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    data = Path(args.data)
    schema = load_schema(data / "adult_schema.json")
    df = pd.read_csv(data / "adult.csv", dtype=str, keep_default_na=False)
    codes, sizes = encode(df, schema).codes, schema.sizes
    layout = marginals_fit.layout
    orders = {"layout": layout, "table order": lambda s: tuple(range(len(s)))}
    print(f"Adult: {len(codes):,} rows, column sizes {sizes}; layout {layout(sizes)}")
    for eps in args.eps:
        times: dict[str, list[float]] = {k: [] for k in orders}
        for r in range(args.repeats):
            for name, order in orders.items():
                marginals_fit.layout = order
                try:
                    t = time.perf_counter()
                    marginals_fit.fit_marginal_model(codes, sizes, epsilon=eps, delta=1e-9, neighbours="add-remove",
                                                     rng=np.random.default_rng(100 + r))
                    times[name].append(time.perf_counter() - t)
                finally:
                    marginals_fit.layout = layout
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"ε = {eps:g}: layout {med['layout']:.2f} s, table order {med['table order']:.2f} s;"
              f" table order ÷ layout = {med['table order'] / med['layout']:.2f}")


if __name__ == "__main__":
    main()
