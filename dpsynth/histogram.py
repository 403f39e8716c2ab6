"""The full multivariate histogram: counting rows into cells, and its released table form.

Counting is the only step that reads the (encoded) data; its output, the exact counts, never
leaves the library: a mechanism from :mod:`dpsynth.mechanisms` turns them into noisy counts
first. Every cell of the declared domain is counted and noised, empty ones included.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpsynth.errors import InputError
from dpsynth.schema import Schema

#: Largest dense histogram we allocate (int64 counts: 80 MB); larger domains are refused
#: before allocation (use the marginals method for many columns).
MAX_DENSE_CELLS = 10_000_000


def check_domain(schema: Schema, max_cells: int = MAX_DENSE_CELLS) -> int:
    """Number of cells, or an :class:`InputError` before anything is allocated if it is too large."""
    n = schema.n_cells
    if n > max_cells:
        sizes = " × ".join(str(s) for s in schema.sizes)
        raise InputError(
            f"The full histogram would have {n:,} cells ({sizes}), more than the {max_cells:,} that fit"
            " in memory. Use fewer columns or bins, or the marginals method for many columns."
        )
    return n


def cell_index(codes: np.ndarray, sizes: tuple[int, ...]) -> np.ndarray:
    """Flat (row-major) cell index of each row."""
    if codes.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    return np.ravel_multi_index(tuple(codes.T), sizes).astype(np.int64)


def count_cells(codes: np.ndarray, schema: Schema) -> np.ndarray:
    """Exact count of rows in every cell of the schema's domain (dense, int64)."""
    n_cells = check_domain(schema)
    return np.bincount(cell_index(codes, schema.sizes), minlength=n_cells).astype(np.int64)


def histogram_frame(counts: np.ndarray, schema: Schema, column: str = "count") -> pd.DataFrame:
    """One row per cell (all cells, row-major), its label in each column, and ``count``."""
    sizes = schema.sizes
    idx = np.unravel_index(np.arange(len(counts)), sizes)
    data: dict[str, object] = {}
    for j, col in enumerate(schema.columns):
        data[col.name] = pd.Categorical.from_codes(idx[j], categories=col.labels())
    data[column] = np.asarray(counts)
    return pd.DataFrame(data)


def counts_from_frame(frame: pd.DataFrame, schema: Schema, column: str = "count") -> np.ndarray:
    """Inverse of :func:`histogram_frame`: the count vector in cell order, checked against the schema."""
    missing = [c for c in [*schema.names, column] if c not in frame.columns]
    if missing:
        raise InputError(f"The histogram file lacks column(s) {', '.join(map(repr, missing))}.")
    n = check_domain(schema)
    codes = np.empty((len(frame), len(schema.columns)), dtype=np.int64)
    for j, col in enumerate(schema.columns):
        values = frame[col.name].astype("string").to_numpy(dtype=object, na_value=None)
        c = pd.Index(col.labels(), dtype=object).get_indexer(values)
        if (c < 0).any():
            bad = frame[col.name][c < 0].iloc[0]
            raise InputError(f"The histogram's column {col.name!r} has label {bad!r}, which the schema does not have.")
        codes[:, j] = c
    flat = cell_index(codes, schema.sizes)
    if len(flat) != n or len(np.unique(flat)) != n:
        raise InputError(f"The histogram must list each of the schema's {n:,} cells exactly once.")
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=np.float64)
    if np.isnan(values).any():
        raise InputError(f"The histogram's {column!r} column has values that are not numbers.")
    out = np.empty(n, dtype=np.float64)
    out[flat] = values
    return out
