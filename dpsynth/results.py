"""What a release measured, one typed result per method, behind one interface.

=======================  ==========================================  ==========================
result                   released tables                             rows sampled by
=======================  ==========================================  ==========================
:class:`NoisyHistogram`  ``histogram.csv``: every cell, noisy count  :class:`RowSampler` (dense)
:class:`SparseHistogram` ``histogram.csv``: the listed cells (≥ τ)   :class:`RowSampler` (listed)
:class:`MarginalResult`  ``marginals.csv`` and ``model.json``        :class:`ModelSampler`
=======================  ==========================================  ==========================

Each result is released output of a DP mechanism; everything here is post-processing of it.
Each gives: its noisy total (the default synthetic row count), a sampler of synthetic rows for
(rows, post-processing seed), its released tables as files, and :func:`result_from_files` loads
it back from those files and the card, so a release re-creates its synthetic file byte for byte.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dpsynth.binning import decode_with
from dpsynth.errors import InputError
from dpsynth.histogram import histogram_frame
from dpsynth.io import escape_cell, to_safe_csv
from dpsynth.randomness import CHUNK_KEY, MODEL_KEY, fast_rng
from dpsynth.schema import Schema
from dpsynth.synthesis import CHUNK_ROWS, Chunked, RowSampler, check_rows


@dataclass(frozen=True)
class ModelSampler(Chunked):
    """The rows of a fitted marginal model, in chunks: chunk i is sampled ancestrally from stream (2, i)
    and its values drawn from stream (1, i) under the seed — any chunk on any thread, bytes independent
    of the number of threads (each row has the model's law; counts inside a chunk are controlled, see
    :meth:`dpsynth.marginals.MarginalModel.sample`)."""

    model: Any
    rows: int
    seed: int
    chunk_rows: int = CHUNK_ROWS

    def chunk_cells(self, index: int) -> tuple[np.ndarray, np.random.Generator]:
        """Codes (rows × columns) of chunk ``index`` and that chunk's generator for decoding values."""
        size = self.chunk_sizes()[index]
        codes = self.model.sample(size, rng=fast_rng(self.seed, MODEL_KEY, index))
        return np.asarray(codes, dtype=np.int64), fast_rng(self.seed, CHUNK_KEY, index)


def sampler_frame(sampler: RowSampler | ModelSampler, schema: Schema, values: Any = None) -> pd.DataFrame:
    """All rows of a sampler as a DataFrame (the values the writer writes)."""
    from dpsynth.binning import unravel

    frames = []
    for i in range(sampler.n_chunks):
        cells, g = sampler.chunk_cells(i)
        codes = cells if cells.ndim == 2 else np.stack(unravel(cells, schema.sizes), axis=1)
        frames.append(decode_with(codes, schema, g, values))
    if not frames:
        return decode_with(np.zeros((0, len(schema.columns)), dtype=np.int64), schema, fast_rng(sampler.seed, CHUNK_KEY, 0),
                           values)
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


class _HistogramFile:
    """The released file of both histogram results: their table, written injection-safe."""

    def tables(self) -> dict[str, pd.DataFrame]:
        raise NotImplementedError

    def files(self) -> dict[str, bytes]:
        return {"histogram.csv": to_safe_csv(self.tables()["histogram.csv"])}


@dataclass(frozen=True)
class NoisyHistogram(_HistogramFile):
    """The full noisy histogram: one exact-noise count per cell of the domain (dense, int64).

    ``threshold`` τ > 1 sets counts below τ to 0 before sampling (post-processing)."""

    schema: Schema
    counts: np.ndarray
    threshold: int = 1
    #: the release's own noisy row count, when its plan measured one (:meth:`dpsynth.plan.ReleasePlan.synthetic_rows`)
    counted_rows: int | None = None
    method = "histogram"

    @property
    def noisy_total(self) -> int:
        """Sum of the unclamped noisy counts (unbiased for n), at least 0."""
        return max(0, int(round(float(np.sum(self.counts)))))

    @property
    def listed_total(self) -> int:
        """Sum of the counts of at least the threshold (the ones rows are drawn from)."""
        return int(np.sum(self.counts[self.counts >= max(1, self.threshold)]))

    def sampler(self, rows: int, seed: int) -> RowSampler:
        check_rows(int(rows))
        kept = self.counts if self.threshold == 1 else np.where(self.counts >= self.threshold, self.counts, 0)
        return RowSampler.dense(kept, rows, seed=seed)

    def tables(self) -> dict[str, pd.DataFrame]:
        return {"histogram.csv": histogram_frame(self.counts, self.schema)}

    def card_entry(self) -> dict[str, Any]:
        return {"representation": "every cell of the domain with its noisy count", "threshold": self.threshold,
                **({"noisy_row_count": self.counted_rows} if self.counted_rows is not None else {})}


@dataclass(frozen=True)
class SparseHistogram(_HistogramFile):
    """A huge domain's noisy histogram: the cells whose released count is ≥ τ, all others 0 (:mod:`dpsynth.sparse`)."""

    schema: Schema
    hist: Any  # dpsynth.sparse.SparseNoisyHistogram
    counted_rows: int | None = None
    method = "histogram"

    @property
    def noisy_total(self) -> int:
        """Sum of every cell's unclamped noisy count, listed or not (drawn from its exact law), at least 0."""
        return max(0, int(self.hist.total))

    @property
    def listed_total(self) -> int:
        """Sum of the listed counts (all of at least the threshold)."""
        return int(np.sum(self.hist.values))

    def sampler(self, rows: int, seed: int) -> RowSampler:
        return RowSampler.from_weights(self.hist.cells, self.hist.values, self.hist.n_cells, rows, seed=seed)

    def tables(self) -> dict[str, pd.DataFrame]:
        from dpsynth.sparse import sparse_histogram_frame

        return {"histogram.csv": sparse_histogram_frame(self.hist, self.schema)}

    def card_entry(self) -> dict[str, Any]:
        return {**self.hist.describe(), "noisy_total": int(self.hist.total), "sparse_method": self.hist.method,
                **({"noisy_row_count": self.counted_rows} if self.counted_rows is not None else {})}


@dataclass(frozen=True)
class MarginalResult:
    """A junction-tree model fitted to noisy marginals (:mod:`dpsynth.marginals`)."""

    schema: Schema
    model: Any  # dpsynth.marginals.MarginalModel
    method = "marginals"

    @property
    def noisy_total(self) -> int:
        return max(0, int(round(self.model.noisy_total)))

    def sampler(self, rows: int, seed: int) -> ModelSampler:
        check_rows(int(rows))
        return ModelSampler(self.model, int(rows), seed)

    def marginal_frames(self) -> list[pd.DataFrame]:
        frames = []
        for cols, counts in self.model.measurements:
            sub = self.schema.select([self.schema.columns[j].name for j in cols])
            frames.append(histogram_frame(np.asarray(counts).ravel(), sub))
        return frames

    def tables(self) -> dict[str, pd.DataFrame]:
        frames = []
        for i, frame in enumerate(self.marginal_frames()):
            f = frame.copy()
            f.insert(0, "marginal", i + 1)
            frames.append(f)
        return {"marginals.csv": _stack(frames) if frames else pd.DataFrame()}

    def files(self) -> dict[str, bytes]:
        table = self.tables()["marginals.csv"]
        return {"marginals.csv": to_safe_csv(table) if len(table.columns) else b"",
                "model.json": json.dumps(self.model.to_dict(), ensure_ascii=False).encode("utf-8")}

    def card_entry(self) -> dict[str, Any]:
        return {"representation": "noisy marginals and the model fitted to them"}


Result = NoisyHistogram | SparseHistogram | MarginalResult


def _stack(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """``pd.concat(frames, ignore_index=True)`` for frames of label columns and numeric ones: the columns in
    order of first appearance, a label column missing from a frame empty (NaN) there. The same table as
    the concat, whose alignment of categorical columns with different categories took 0.2 s of an Adult
    release's 77 marginals; here each column is filled once."""
    names: dict[str, None] = {}
    for f in frames:
        names.update(dict.fromkeys(f.columns))
    starts = np.cumsum([0] + [len(f) for f in frames])
    data: dict[str, Any] = {}
    for name in names:
        parts = [f[name] for f in frames if name in f.columns]
        if len(parts) == len(frames) and all(pd.api.types.is_numeric_dtype(p.dtype) for p in parts):
            data[name] = np.concatenate([p.to_numpy() for p in parts])
            continue
        col = np.full(int(starts[-1]), np.nan, dtype=object)
        for f, a, b in zip(frames, starts[:-1], starts[1:], strict=True):
            if name in f.columns:
                col[a:b] = f[name].to_numpy(dtype=object)
        data[name] = col
    return pd.DataFrame(data)


def result_from_files(files: dict[str, bytes], schema: Schema, card: dict[str, Any]) -> Result:
    """Load a release's measured result back from its files (the inverse of ``result.files()``)."""
    method = card.get("method", {}).get("name")
    if method == "marginals" or ("model.json" in files and "histogram.csv" not in files):
        from dpsynth.marginals import MarginalModel

        if "model.json" not in files:
            raise InputError("The release has no model.json to sample from.")
        try:
            model = MarginalModel.from_dict(json.loads(files["model.json"].decode("utf-8")))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"model.json is not valid JSON: {exc}.") from None
        if tuple(model.sizes) != schema.sizes:
            raise InputError("The model does not match the schema (different columns or cells).")
        return MarginalResult(schema, model)
    if "histogram.csv" not in files:
        raise InputError("The release has neither histogram.csv nor model.json.")
    frame = pd.read_csv(io.BytesIO(files["histogram.csv"]), dtype=str, keep_default_na=False)
    frame.columns = [_unescape(str(c)) for c in frame.columns]
    _check_is_histogram(frame, schema)
    tables = card.get("released_tables", {})
    sparse = tables if "listed_cells" in tables else None
    if sparse is None and len(frame) != schema.n_cells:
        sparse = {}  # a listing of some cells only (a sparse release's file): the others are 0
    if sparse is not None:
        from dpsynth.sparse import SparseNoisyHistogram

        cells, values = _listed_cells(frame, schema)
        order = np.argsort(cells, kind="stable")
        hist = SparseNoisyHistogram(n_cells=schema.n_cells, cells=cells[order], values=values[order].astype(np.int64),
                                    total=int(sparse.get("noisy_total", int(np.sum(values)))),
                                    threshold=int(sparse.get("threshold", 1)), method=sparse.get("sparse_method", "skip"))
        return SparseHistogram(schema, hist)
    from dpsynth.histogram import counts_from_frame

    counts = counts_from_frame(_unescape_frame(frame, schema), schema)
    threshold = int(card.get("released_tables", {}).get("threshold", 1))
    return NoisyHistogram(schema, np.rint(counts).astype(np.int64), threshold=threshold)


def _check_is_histogram(frame: pd.DataFrame, schema: Schema) -> None:
    """Name the file a curator gave by mistake (another file of a release) rather than a label it lacks."""
    names = set(schema.names)
    if "marginal" in frame.columns and "marginal" not in names and "count" in frame.columns:
        raise InputError("This CSV is a marginals release's marginals.csv: several noisy tables over a few columns"
                         " each, not one histogram over all of them. Resample from the release zip, or from its"
                         " model.json with --schema.")
    if "count" not in frame.columns and names <= set(frame.columns):
        raise InputError("This CSV has the schema's columns but no 'count' column: it looks like synthetic rows,"
                         " not a released histogram. Give the release zip, its histogram.csv or its model.json.")


def _unescape(text: str) -> str:
    return text[1:] if text.startswith("'") and escape_cell(text[1:]) == text else text


def _unescape_frame(frame: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """Labels as the schema has them: the CSV writer prefixed formula-like labels with ``'``."""
    out = frame.copy()
    for col in schema.columns:
        if col.name in out.columns:
            out[col.name] = out[col.name].map(_unescape)
    return out


def _listed_cells(frame: pd.DataFrame, schema: Schema) -> tuple[np.ndarray, np.ndarray]:
    frame = _unescape_frame(frame, schema)
    missing = [c for c in [*schema.names, "count"] if c not in frame.columns]
    if missing:
        raise InputError(f"The histogram file lacks column(s) {', '.join(map(repr, missing))}.")
    codes = np.empty((len(frame), len(schema.columns)), dtype=np.int64)
    for j, col in enumerate(schema.columns):
        c = pd.Index(col.labels(), dtype=object).get_indexer(frame[col.name].to_numpy(dtype=object))
        if (c < 0).any():
            raise InputError(f"The histogram's column {col.name!r} has a label the schema does not have.")
        codes[:, j] = c
    cells = np.ravel_multi_index(tuple(codes.T), schema.sizes).astype(np.int64) if len(frame) else np.zeros(0, np.int64)
    values = pd.to_numeric(frame["count"], errors="coerce").to_numpy(dtype=np.float64)
    if np.isnan(values).any():
        raise InputError("The histogram's 'count' column has values that are not numbers.")
    return cells, values
