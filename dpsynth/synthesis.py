"""Synthetic microdata from noisy counts: pure post-processing, free under DP.

Steps (seed 000's "histogram as a density"): clamp negative noisy counts to 0, normalise to
cell probabilities, draw the cells of ``m`` rows from the multinomial distribution
(O(cells + rows)), expand and shuffle, then decode each cell into values
(:func:`dpsynth.binning.decode`). ``m`` defaults to the noisy total, never the exact n.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpsynth.binning import decode
from dpsynth.errors import InputError
from dpsynth.schema import Schema

#: Most synthetic rows one call will draw.
MAX_SYNTHETIC_ROWS = 50_000_000


def cell_probabilities(noisy_counts: np.ndarray) -> np.ndarray:
    """Clamp negatives to 0 and normalise; an all-zero histogram gives the uniform distribution."""
    c = np.clip(np.asarray(noisy_counts, dtype=np.float64), 0.0, None)
    total = c.sum()
    if total <= 0:
        return np.full(len(c), 1.0 / len(c))
    return c / total


def noisy_total(noisy_counts: np.ndarray) -> int:
    """The released estimate of the row count: the sum of the noisy counts, at least 0.

    The sum of unclamped counts is unbiased for n (the noise has mean 0); it depends on the data
    only through the noisy counts.
    """
    return max(0, int(round(float(np.sum(noisy_counts)))))


def sample_cells(probabilities: np.ndarray, rows: int, *, rng: np.random.Generator) -> np.ndarray:
    """Flat cell index of ``rows`` rows drawn i.i.d. from ``probabilities``, in random order."""
    if rows < 0 or rows > MAX_SYNTHETIC_ROWS:
        raise InputError(f"The number of synthetic rows must be between 0 and {MAX_SYNTHETIC_ROWS:,}, got {rows:,}.")
    per_cell = rng.multinomial(rows, probabilities)
    cells = np.repeat(np.arange(len(probabilities), dtype=np.int64), per_cell)
    rng.shuffle(cells)
    return cells


def synthesize(noisy_counts: np.ndarray, schema: Schema, rows: int, *, rng: np.random.Generator) -> pd.DataFrame:
    """Synthetic table of ``rows`` rows sampled from the noisy histogram over ``schema``."""
    cells = sample_cells(cell_probabilities(noisy_counts), rows, rng=rng)
    codes = np.stack(np.unravel_index(cells, schema.sizes), axis=1) if rows else np.zeros((0, len(schema.columns)), dtype=np.int64)
    return decode(codes, schema, rng=rng)
