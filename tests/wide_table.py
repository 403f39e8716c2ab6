"""A generated wide table (default 100 columns × 50,000 rows) with some dependence, for tests and benchmarks.

Columns come in chains of ``chain`` columns: the first of a chain is drawn from a skewed
distribution, each next one is a noisy function of the previous (kept with probability 0.6,
otherwise redrawn), so pairs inside a chain are dependent and chains are independent. Domain
sizes cycle through 2–12 cells. Seeded, so a test or benchmark sees the same table every time.
"""

from __future__ import annotations

import numpy as np


def wide_table(n_rows: int = 50_000, n_cols: int = 100, *, chain: int = 5,
               seed: int = 0) -> tuple[np.ndarray, tuple[int, ...]]:
    """Cell codes (rows × columns, int64) and the domain sizes of a generated dependent table."""
    rng = np.random.default_rng(seed)
    size_cycle = (2, 3, 5, 8, 12, 4, 6, 10, 7, 3)
    sizes = tuple(size_cycle[j % len(size_cycle)] for j in range(n_cols))
    out = np.empty((n_rows, n_cols), dtype=np.int64)
    for j, s in enumerate(sizes):
        if j % chain == 0:
            p = rng.dirichlet(np.full(s, 0.7))
            out[:, j] = rng.choice(s, size=n_rows, p=p)
        else:
            prev = out[:, j - 1]
            keep = rng.random(n_rows) < 0.6
            out[:, j] = np.where(keep, (prev * 7 + j) % s, rng.integers(0, s, n_rows))
    return out, sizes
