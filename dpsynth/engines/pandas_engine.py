"""pandas/numpy engine: the reference semantics (:func:`dpsynth.binning.encode`), in memory.

The default for uploads. A path is read with :func:`dpsynth.io.read_table` (its size limits
apply; use DuckDB for larger files).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from dpsynth.binning import encode
from dpsynth.engines import CellCounts, Engine, Progress, check_indexable
from dpsynth.errors import InputError
from dpsynth.histogram import MAX_DENSE_CELLS, cell_index
from dpsynth.io import Limits, read_table
from dpsynth.schema import Schema


class PandasEngine(Engine):
    """Counting with :func:`dpsynth.binning.encode` and ``numpy.bincount`` (or ``unique`` when sparse)."""

    name = "pandas"

    def __init__(self, *, limits: Limits = Limits()) -> None:
        self.limits = limits

    def count(
        self, source: Any, schema: Schema, *, max_dense_cells: int = MAX_DENSE_CELLS,
        progress: Progress | None = None,
    ) -> CellCounts:
        """Exact counts of ``source`` (DataFrame or path) in the cells of ``schema``."""
        check_indexable(schema)
        report = progress or (lambda _f, _m: None)
        if isinstance(source, str | Path):
            report(0.0, "Reading the file")
            df = read_table(source, limits=self.limits)
        elif isinstance(source, pd.DataFrame):
            df = source
        else:
            raise InputError(f"The pandas engine counts a DataFrame or a file, not a {type(source).__name__}.")
        report(0.3, "Mapping values to cells")
        enc = encode(df, schema)
        flat = cell_index(enc.codes, schema.sizes)
        out = CellCounts.from_cell_index(flat, schema, enc.report, max_dense_cells=max_dense_cells)
        report(1.0, "Counted")
        return out
