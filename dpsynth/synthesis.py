"""Synthetic microdata from noisy counts: pure post-processing, free under DP.

Steps (the DP lecture notes' (ch. 6) "histogram as a density"): clamp negative noisy counts to 0, normalise to
cell probabilities, draw the cells of ``m`` rows from the multinomial distribution
(O(cells + rows)), put them in random order, then decode each cell into values
(:func:`dpsynth.binning.decode`). ``m`` defaults to the noisy total, never the exact n.

Randomness. The DP guarantee comes from the exact noise on the counts, drawn from the release's
generator (a ChaCha20 CSPRNG in real releases, :mod:`dpsynth.noise`). Everything here is a
function of the released counts and of randomness independent of the data, so it is
post-processing whatever generator draws it. It is drawn from a fast numpy generator (SFC64)
seeded with 256 bits taken once from the release's generator (:func:`post_processing_seed`):
a seeded release stays reproducible, and a secure release's synthetic rows cannot be predicted
without its key.

Rows are produced in chunks of at most ``chunk_rows`` (:class:`RowSampler`), chunk i from its
own generator (seed, i). With whole-number weights (noisy counts, the release paths) each row's
cell is drawn i.i.d. by the integer inverse transform: u uniform on [0, total) (numpy's bounded
integers are exact), the cell whose running count first exceeds u, found through a guide table
— exactly P(cell) = count / total, O(1) expected per row, O(chunk) per chunk whatever the number
of cells. Other weights (probabilities) draw the chunk's per-cell counts as
Multinomial(chunk size, probabilities), expanded and shuffled. Either way the concatenated chunks
are ``m`` i.i.d. rows in uniformly random order — the law of one multinomial draw of all ``m``
rows followed by a shuffle — with no sequential step between chunks: any chunk can be made on any
thread, and the result does not depend on how many threads make them. Memory is O(cells + chunk),
never O(m).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dpsynth.binning import decode_with, unravel
from dpsynth.errors import InputError
from dpsynth.randomness import CHUNK_KEY, fast_rng, post_processing_seed
from dpsynth.schema import Schema

#: Most synthetic rows one call will draw.
MAX_SYNTHETIC_ROWS = 50_000_000
#: Rows per chunk: a few tens of MB of arrays and text per chunk in flight.
CHUNK_ROWS = 1_000_000
#: Most entries of a sampler's guide table (int64): O(support) memory, at most 32 MB.
GUIDE_SIZE = 1 << 22
#: How the post-processing generator is described on the release card.
POST_PROCESSING_RANDOMNESS = (
    "synthetic rows (cells, their order, values inside bins) drawn with numpy's SFC64 generator seeded by"
    " 256 bits of the release's generator: independent of the data, so post-processing"
)


def noisy_total(noisy_counts: np.ndarray) -> int:
    """The released estimate of the row count: the sum of the noisy counts, at least 0.

    The sum of unclamped counts is unbiased for n (the noise has mean 0); it depends on the data
    only through the noisy counts.
    """
    return max(0, int(round(float(np.sum(noisy_counts)))))


def check_rows(rows: int) -> None:
    """Refuse a negative or unreasonably large number of synthetic rows."""
    if rows < 0 or rows > MAX_SYNTHETIC_ROWS:
        raise InputError(f"The number of synthetic rows must be between 0 and {MAX_SYNTHETIC_ROWS:,}, got {rows:,}.")


class Chunked:
    """Rows served in chunks of ``chunk_rows`` (the last one the remainder); needs ``rows`` and ``chunk_rows``."""

    rows: int
    chunk_rows: int

    @property
    def n_chunks(self) -> int:
        """Number of chunks (0 when there are no rows)."""
        return -(-self.rows // self.chunk_rows)

    def chunk_sizes(self) -> list[int]:
        """Rows of each chunk: ``chunk_rows`` each, the last one the remainder."""
        return [min(self.chunk_rows, self.rows - start) for start in range(0, self.rows, self.chunk_rows)]


@dataclass(frozen=True)
class RowSampler(Chunked):
    """The cells of ``rows`` synthetic rows, i.i.d. from ``weights`` over ``support``, served in chunks.

    ``support`` holds flat cell indices (row-major over the schema's sizes) and ``weights`` their
    non-negative weights; with ``weights`` None (or all zero) the rows are uniform over all
    ``n_cells`` cells. Guarantee: the concatenated chunks are i.i.d. draws from the normalised
    weights in uniformly random order — the law of :func:`sample_cells` — and they are a function
    of (weights, rows, seed, chunk_rows) only, not of the order or threads in which chunks are made.
    """

    support: np.ndarray
    weights: np.ndarray | None
    n_cells: int
    rows: int
    seed: int
    chunk_rows: int = CHUNK_ROWS
    #: Whole-number weights (noisy counts): their running sum and a guide table into it, for exact
    #: i.i.d. draws in O(1) expected time per row (inverse transform on integers).
    cdf: np.ndarray | None = None
    guide: np.ndarray | None = None
    bucket: int = 1

    @classmethod
    def dense(cls, noisy_counts: np.ndarray, rows: int, *, seed: int, chunk_rows: int = CHUNK_ROWS) -> RowSampler:
        """Rows from a full noisy histogram (negative counts clamped to 0)."""
        w = np.clip(np.asarray(noisy_counts, dtype=np.float64), 0.0, None)
        return cls.from_weights(np.arange(len(w), dtype=np.int64), w, len(w), rows, seed=seed, chunk_rows=chunk_rows)

    @classmethod
    def from_weights(cls, support: np.ndarray, weights: np.ndarray, n_cells: int, rows: int, *, seed: int,
                     chunk_rows: int = CHUNK_ROWS) -> RowSampler:
        """Rows from the listed cells' weights; none positive: uniform over all ``n_cells`` cells."""
        check_rows(int(rows))
        if chunk_rows < 1:
            raise InputError(f"chunk_rows must be at least 1, got {chunk_rows!r}.")
        w = np.asarray(weights, dtype=np.float64)
        s = np.asarray(support, dtype=np.int64)
        if len(w) == 0 or not w.sum() > 0:
            return cls(np.zeros(0, dtype=np.int64), None, int(n_cells), int(rows), seed, int(chunk_rows))
        keep = w > 0  # zero-weight cells never appear: drop them so every per-chunk pass is shorter
        s, w = s[keep], w[keep]
        if np.all(np.floor(w) == w) and w.sum() < 2.0**62:
            # whole numbers (noisy counts): exact integer inverse transform; the guide table gives,
            # for each of G equal slices of [0, total), the first cell whose running sum passes it
            cdf = np.cumsum(w.astype(np.int64))
            total, g = int(cdf[-1]), min(4 * len(cdf), GUIDE_SIZE)  # ~1/4 boundary per slice on average
            bucket = -(-total // g)
            guide = np.searchsorted(cdf, np.arange(g, dtype=np.int64) * bucket, side="right")
            return cls(s, None, int(n_cells), int(rows), seed, int(chunk_rows), cdf, guide, bucket)
        return cls(s, w / w.sum(), int(n_cells), int(rows), seed, int(chunk_rows))

    def chunk_cells(self, index: int) -> tuple[np.ndarray, np.random.Generator]:
        """Flat cells of chunk ``index`` in random order, and that chunk's generator for decoding its values.

        Whole-number weights: i.i.d. draws by the integer inverse transform, O(size). Otherwise the
        chunk's cell counts are Multinomial(size, weights) from its own stream, expanded and
        shuffled, O(support + size): chunks of i.i.d. rows are independent multinomials, so their
        concatenation has the law of all rows drawn at once. Any chunk on any thread.
        """
        g = fast_rng(self.seed, CHUNK_KEY, index)
        size = self.chunk_sizes()[index]
        if self.cdf is not None:
            return self.support[self._inverse(g.integers(0, int(self.cdf[-1]), size=size, dtype=np.int64))], g
        if self.weights is None:
            return g.integers(0, self.n_cells, size=size, dtype=np.int64), g
        cells = np.repeat(self.support, g.multinomial(size, self.weights))
        g.shuffle(cells)  # int64 shuffles faster than narrower types in numpy
        return cells, g

    def _inverse(self, u: np.ndarray) -> np.ndarray:
        """For each u in [0, total): the first index i with cdf[i] > u, so P(i) = weight_i / total exactly."""
        assert self.cdf is not None and self.guide is not None
        cdf = self.cdf
        i = self.guide[u // self.bucket]  # ≤ the answer: cdf[guide[b]] > b·bucket is the first such
        for _ in range(3):  # a slice of [0, total) usually holds about one cell boundary
            step = np.flatnonzero(cdf[i] <= u)
            if len(step) == 0:
                return i
            i[step] += 1
        rest = np.flatnonzero(cdf[i] <= u)  # the rare slices crowded with small cells
        i[rest] = np.searchsorted(cdf, u[rest], side="right")
        return i

    def chunks(self) -> Iterator[tuple[np.ndarray, np.random.Generator]]:
        """All chunks in order (single-threaded convenience)."""
        for i in range(self.n_chunks):
            yield self.chunk_cells(i)

    def cells(self) -> np.ndarray:
        """All ``rows`` cells concatenated (O(rows) memory: for small samples and tests)."""
        parts = [c for c, _ in self.chunks()]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def frame(self, schema: Schema, values: Any = None) -> pd.DataFrame:
        """The synthetic rows as a DataFrame: the same values :func:`dpsynth.writer.write_synthetic_csv` writes.

        ``values``: a released :class:`dpsynth.value_model.ValueModel` to draw numeric values from (None: uniform in bins).
        """
        if self.rows == 0:
            return decode_with(np.zeros((0, len(schema.columns)), dtype=np.int64), schema,
                               fast_rng(self.seed, CHUNK_KEY, 0), values)
        frames = [decode_with(np.stack(unravel(cells, schema.sizes), axis=1), schema, g, values)
                  for cells, g in self.chunks()]
        return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def sample_cells(probabilities: np.ndarray, rows: int, *, rng: np.random.Generator) -> np.ndarray:
    """Flat cell index of ``rows`` rows drawn i.i.d. from ``probabilities``, in random order.

    Draws 256 bits from ``rng`` (:func:`post_processing_seed`); O(rows) memory — a release
    streams :class:`RowSampler` chunks instead.
    """
    check_rows(int(rows))
    p = np.asarray(probabilities, dtype=np.float64)
    sampler = RowSampler.from_weights(np.arange(len(p), dtype=np.int64), p, len(p), rows, seed=post_processing_seed(rng))
    return sampler.cells()


def synthesize(noisy_counts: np.ndarray, schema: Schema, rows: int, *, rng: np.random.Generator,
               values: Any = None) -> pd.DataFrame:
    """Synthetic table of ``rows`` rows sampled from the noisy histogram over ``schema``.

    Draws 256 bits from ``rng``; the rows equal those :func:`dpsynth.writer.write_synthetic_csv`
    writes for ``RowSampler.dense(noisy_counts, rows, seed=...)`` with the same seed. ``values``: a
    released value model to draw numeric values inside bins from (:mod:`dpsynth.value_model`).
    """
    return RowSampler.dense(noisy_counts, rows, seed=post_processing_seed(rng)).frame(schema, values)
