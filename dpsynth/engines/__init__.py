"""Counting engines: where the one data-touching step of a release (rows → cell counts) runs.

Every engine maps a table onto the schema's cells with exactly the semantics of
:func:`dpsynth.binning.encode` (clamping to the public bounds, the bin edges of
:meth:`dpsynth.schema.NumericColumn.edges` searched with ``side='right'``, empty cells, the
``on_unknown`` policy, the same error messages) and returns the exact counts as a
:class:`CellCounts`: a dense vector when the domain has at most ``max_dense_cells`` cells, else
the (flat cell index, count) pairs of the occupied cells only.

=========  ===========================================  =====================================
engine     data                                         where it runs
=========  ===========================================  =====================================
pandas     a DataFrame, or a file read by ``read_table``  in memory (numpy), the default for uploads
duckdb     a CSV/Parquet path, or a DataFrame           embedded, out of core, streaming the file
spark      a CSV/Parquet path, or a Spark DataFrame     a Spark cluster (local mode in tests)
=========  ===========================================  =====================================

The exact counts never leave the library un-noised; what the engines observe about the data
(clamped, empty, unknown values, dropped rows) goes into the curator-only
:class:`~dpsynth.binning.EncodingReport`.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from dpsynth.binning import EncodingReport
from dpsynth.errors import InputError
from dpsynth.histogram import MAX_DENSE_CELLS
from dpsynth.schema import Schema

Progress = Callable[[float, str], None]
ENGINES: tuple[str, ...] = ("pandas", "duckdb", "spark")

#: Files larger than this go to DuckDB by default (the in-memory reader caps uploads at 200 MB).
DUCKDB_THRESHOLD_BYTES = 50 * 1024 * 1024

#: Largest domain whose flat cell index fits a signed 64-bit integer with room to spare.
MAX_INDEXABLE_CELLS = 2**62


@dataclass
class CellCounts:
    """Exact counts of a table in the cells of ``schema`` (never released as such).

    Exactly one representation is set: ``dense`` (int64, one entry per cell, row-major as in
    :func:`dpsynth.histogram.cell_index`) or ``cells``/``counts`` (sorted flat indices of the
    occupied cells and their positive counts).
    """

    schema: Schema
    report: EncodingReport = field(default_factory=EncodingReport)
    dense: np.ndarray | None = None
    cells: np.ndarray | None = None
    counts: np.ndarray | None = None

    @property
    def n_cells(self) -> int:
        """Cells of the domain (a Python int)."""
        return self.schema.n_cells

    @property
    def is_sparse(self) -> bool:
        """True when only the occupied cells are held."""
        return self.dense is None

    def to_dense(self) -> np.ndarray:
        """The full count vector (refused for a domain larger than :data:`MAX_DENSE_CELLS`)."""
        if self.dense is not None:
            return self.dense
        if self.n_cells > MAX_DENSE_CELLS:
            raise InputError(f"The histogram has {self.n_cells:,} cells, too many to hold densely.")
        out = np.zeros(self.n_cells, dtype=np.int64)
        out[self.cells] = self.counts
        return out

    def occupied(self) -> tuple[np.ndarray, np.ndarray]:
        """(sorted flat indices of cells with a positive count, their counts)."""
        if self.dense is None:
            return self.cells, self.counts
        idx = np.flatnonzero(self.dense)
        return idx.astype(np.int64), self.dense[idx]

    def occupied_codes(self) -> tuple[np.ndarray, np.ndarray]:
        """(cell codes of the occupied cells, one row per cell and one column per schema column; their counts).

        A weighted stand-in for the per-row codes of :func:`dpsynth.binning.encode`: every
        marginal of the table is a projection of these, so one scan serves all marginals.
        """
        idx, cnt = self.occupied()
        if len(idx) == 0:
            return np.zeros((0, len(self.schema.columns)), dtype=np.int64), cnt
        return np.stack(np.unravel_index(idx, self.schema.sizes), axis=1).astype(np.int64), cnt

    def marginal(self, names: list[str]) -> np.ndarray:
        """Exact counts of the marginal on ``names`` (dense, row-major over their cells), from one scan."""
        sub = self.schema.select(names)
        pos = [self.schema.names.index(n) for n in names]
        codes, cnt = self.occupied_codes()
        flat = np.ravel_multi_index(tuple(codes[:, pos].T), sub.sizes) if len(cnt) else np.zeros(0, dtype=np.int64)
        return np.bincount(flat, weights=cnt, minlength=sub.n_cells).astype(np.int64)

    @classmethod
    def from_cell_index(
        cls, flat: np.ndarray, schema: Schema, report: EncodingReport, *,
        weights: np.ndarray | None = None, max_dense_cells: int = MAX_DENSE_CELLS,
    ) -> CellCounts:
        """Aggregate flat cell indices (optionally with integer multiplicities) into counts."""
        n = schema.n_cells
        flat = np.asarray(flat, dtype=np.int64)
        w = None if weights is None else np.asarray(weights, dtype=np.int64)
        if n <= max_dense_cells:
            dense = np.zeros(n, dtype=np.int64)
            if w is None:
                dense += np.bincount(flat, minlength=n).astype(np.int64)
            else:
                np.add.at(dense, flat, w)
            return cls(schema=schema, report=report, dense=dense)
        if w is None:
            cells, counts = np.unique(flat, return_counts=True)
        else:
            cells, inv = np.unique(flat, return_inverse=True)
            counts = np.zeros(len(cells), dtype=np.int64)
            np.add.at(counts, inv, w)
        keep = counts > 0
        return cls(schema=schema, report=report, cells=cells[keep].astype(np.int64), counts=counts[keep].astype(np.int64))


class Engine(ABC):
    """A counting backend. ``count`` is the only method that reads data."""

    name: ClassVar[str]

    @abstractmethod
    def count(
        self, source: Any, schema: Schema, *, max_dense_cells: int = MAX_DENSE_CELLS,
        progress: Progress | None = None,
    ) -> CellCounts:
        """Exact counts of ``source`` (a path or an engine-native table) in the cells of ``schema``."""


def get_engine(name: str, **options: Any) -> Engine:
    """The engine called ``name`` (pandas, duckdb or spark); options go to its constructor."""
    key = (name or "").strip().lower()
    if key == "pandas":
        from dpsynth.engines.pandas_engine import PandasEngine

        return PandasEngine(**options)
    if key == "duckdb":
        from dpsynth.engines.duckdb_engine import DuckDBEngine

        return DuckDBEngine(**options)
    if key == "spark":
        from dpsynth.engines.spark_engine import SparkEngine

        return SparkEngine(**options)
    raise InputError(f"Unknown engine {name!r}; use one of: {', '.join(ENGINES)}.")


def default_engine(path: str | Path, threshold_bytes: int = DUCKDB_THRESHOLD_BYTES) -> str:
    """``duckdb`` for a CSV/Parquet file larger than the threshold (or a directory), else ``pandas``.

    Decided from the file's size on disk, which the curator already knows; it is not released.
    """
    p = Path(path)
    if p.is_dir():
        return "duckdb"
    try:
        size = os.path.getsize(p)
    except OSError:
        return "pandas"
    if p.suffix.lower() in {".xlsx", ".xlsm"}:
        return "pandas"
    return "duckdb" if size > threshold_bytes else "pandas"


def address_space_limit() -> int | None:
    """The process's address-space limit in bytes (``ulimit -v``, RLIMIT_AS), or None.

    Under a limit, glibc's malloc is also capped at two arenas: each thread that allocates
    otherwise reserves its own 64 MB arena of address space (not memory), and DuckDB's and
    the writer's threads then exhaust a 2 GB limit while using a quarter of it.
    """
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):
        return None
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return None
    _cap_malloc_arenas()
    return int(soft)


def _cap_malloc_arenas() -> None:
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(-8, 2)  # M_ARENA_MAX (glibc); elsewhere the call is absent or ignored
    except (OSError, AttributeError):
        pass


def check_indexable(schema: Schema) -> int:
    """The number of cells, or an :class:`InputError` if a flat cell index would not fit in int64."""
    n = schema.n_cells
    if n > MAX_INDEXABLE_CELLS:
        sizes = " × ".join(str(s) for s in schema.sizes)
        raise InputError(
            f"The full histogram would have {n:.3g} cells ({sizes}), more than 2^62 cells can be indexed;"
            " use fewer columns or bins, or the marginals method."
        )
    return n


def strides(schema: Schema) -> list[int]:
    """Row-major strides of the flat cell index (as :func:`numpy.ravel_multi_index`)."""
    out = []
    acc = 1
    for s in reversed(schema.sizes):
        out.append(acc)
        acc *= s
    return out[::-1]


__all__ = ["ENGINES", "CellCounts", "Engine", "get_engine", "default_engine", "check_indexable", "strides"]
