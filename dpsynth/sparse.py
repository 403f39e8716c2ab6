"""Noisy histograms of huge, sparse domains without materialising every cell.

The dense mechanism adds independent noise Z to every one of N cells (empty ones included) and
synthesis clamps the result at 0. Here the *same* released object — the clamped noisy vector,
optionally with cells below a threshold τ ≥ 1 set to 0 (post-processing) — is produced holding
only the cells whose value survives. With m occupied cells and M = N − m empty ones:

1. occupied cells get count + Z exactly as in the dense path (the mechanism's own sampler);
2. among the empty cells, the noisy values are i.i.d. Z. The ones with Z ≥ τ are the cells a
   clamped, thresholded vector keeps. Their number K is Binomial(M, P(Z ≥ τ)); given K, their
   positions are a uniform K-subset of the empty cells (exchangeability), and their values are
   i.i.d. from the law of Z given Z ≥ τ, independent of the positions;
3. the unclamped noisy total (the dense path's default synthetic row count,
   :func:`dpsynth.synthesis.noisy_total`) also needs the sum of the M − K values below τ; it is
   drawn from its exact law too (``total``). Its noise grows like √N; the release's row count is this
   total, the sum of the listed values or a noisy count of its own, whichever
   :func:`dpsynth.plan.histogram_row_total` expects to be nearest n from the domain size, the mechanism
   and τ (public inputs, the same rule as dense).

So the joint law of (released cells, their values, the total) equals the dense path's: the
release is the dense release, computed in O(m + K) memory. Two ways to draw step 2:

- ``"skip"`` (discrete Laplace, the default for it): K ~ Binomial(M, q) with q = p^τ/(1+p),
  p = e^(−1/scale); positions by exact uniform sampling without replacement in rank space;
  values τ + G where G ~ Z | Z ≥ 0, a geometric law (memorylessness of the discrete Laplace tail,
  P(Z = z) ∝ p^|z|), drawn *exactly* by rejection from :func:`dpsynth.noise.discrete_laplace`
  (acceptance 1/(1+p) ≥ 1/2). The sum of the values below τ is −NegBin(c₀, 1−p) + Σ z·c_z with
  (c₀, c₁, …, c_{τ−1}) ~ Multinomial(M − K, P(Z ≤ 0 | Z < τ), P(Z = z | Z < τ)).
  **Caveat:** K and the counts c are drawn by numpy's binomial/multinomial/negative-binomial
  samplers, which work in float64 with q rounded to double (relative error ~1e-16); every other
  step is exact integer sampling. Time and memory O(m + K).
- ``"stream"`` (any mechanism; the default for the discrete Gaussian): the empty cells' noise is
  drawn in chunks of ``chunk`` cells with the mechanism's own exact sampler, keeping only values
  ≥ τ and a running sum of the rest. Exactly the dense computation, integer arithmetic only;
  time O(N), memory O(chunk + m + K).

Memory grows with the occupied and surviving cells, not with N; but note that with τ = 1 and a
small ε, a constant fraction q of *all* empty cells survive (e.g. 27% at scale 1): the release is
then mostly noise (the UI's warning) and the representation is no longer small. A threshold τ > 1
(post-processing: cells whose noisy count is below τ are reported as 0) keeps it small.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

import numpy as np
import pandas as pd

from dpsynth import noise
from dpsynth.binning import decode
from dpsynth.errors import InputError
from dpsynth.mechanisms import DiscreteLaplace, Mechanism
from dpsynth.randomness import child_rng, post_processing_seed
from dpsynth.schema import Schema
from dpsynth.synthesis import RowSampler, check_rows

SparseMethod = Literal["auto", "skip", "stream"]
DEFAULT_CHUNK = 1 << 20
#: Most cells a sparse release may list on average (noise alone), and most cells the stream method noises.
MAX_LISTED_CELLS = 20_000_000
MAX_STREAM_CELLS = 500_000_000


@dataclass(frozen=True)
class SparseNoisyHistogram:
    """The clamped (and thresholded) noisy histogram: ``cells`` (sorted flat indices) with ``values`` ≥ τ.

    Every other cell of the ``n_cells`` is 0. ``total`` is the sum of the *unclamped* noisy
    vector (same law as the dense path's), used as the default synthetic row count.
    """

    n_cells: int
    cells: np.ndarray
    values: np.ndarray
    total: int
    threshold: int = 1
    method: str = "skip"

    def describe(self) -> dict[str, Any]:
        """Release-card entry."""
        return {
            "representation": "sparse: only cells with a released count ≥ threshold are listed; all others are 0",
            "threshold": self.threshold,
            "listed_cells": int(len(self.cells)),
            "n_cells": int(self.n_cells),
            "empty_cell_noise": (
                "drawn in distribution exactly as noising every cell (binomial count of surviving empty cells,"
                " uniform positions, exact conditional values; float64 binomial caveat)"
                if self.method == "skip"
                else "every cell noised with the exact integer sampler, streamed in chunks"
            ),
        }


def noise_sparse(
    cells: np.ndarray, counts: np.ndarray, n_cells: int, mechanism: Mechanism, *, rng: np.random.Generator,
    threshold: int = 1, method: SparseMethod = "auto", chunk: int = DEFAULT_CHUNK,
) -> SparseNoisyHistogram:
    """Noisy, clamped histogram of a sparse count vector, equal in law to the dense path (module docstring).

    ``cells`` are the distinct flat indices of the occupied cells (any order), ``counts`` their
    exact counts (> 0). Guarantee: the same as ``mechanism`` applied to all ``n_cells`` cells,
    since the output is a post-processing of a vector with exactly that law.
    """
    if int(threshold) != threshold or threshold < 1:
        raise InputError(f"The release threshold must be a whole number ≥ 1, got {threshold!r}.")
    tau = int(threshold)
    n_cells = int(n_cells)
    cells = np.asarray(cells, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    order = np.argsort(cells, kind="stable")
    cells, counts = cells[order], counts[order]
    if len(cells) and (cells[0] < 0 or cells[-1] >= n_cells or np.any(np.diff(cells) == 0)):
        raise InputError("Occupied cells must be distinct indices inside the domain.")
    method = resolve_method(mechanism, method)
    if method == "skip" and not isinstance(mechanism, DiscreteLaplace):
        raise InputError("The 'skip' sparse method needs the discrete Laplace mechanism; use 'stream'.")
    if method not in ("skip", "stream"):
        raise InputError(f"Unknown sparse method {method!r}; use auto, skip or stream.")

    check_feasible(n_cells, mechanism, tau, method)
    # The number of occupied cells is data: their draws come from child streams keyed by a fixed-size
    # draw, so the caller's generator ends in a state that does not depend on it (later draws, e.g.
    # synthetic rows, then depend on the data only through the released histogram).
    occ_rng, empty_rng = child_rng(rng), child_rng(rng)
    noisy_occ = mechanism(counts, rng=occ_rng)
    total = int(noisy_occ.sum())
    empty = n_cells - len(cells)
    if method == "skip":
        ranks, vals, rest = _empty_skip(empty, mechanism, tau, rng=empty_rng)
    else:
        ranks, vals, rest = _empty_stream(empty, mechanism, tau, rng=empty_rng, chunk=chunk)
    total += int(vals.sum()) + rest
    pos = empty_positions(ranks, cells)
    keep = noisy_occ >= tau
    all_cells = np.concatenate([cells[keep], pos])
    all_vals = np.concatenate([noisy_occ[keep], vals])
    o = np.argsort(all_cells, kind="stable")
    return SparseNoisyHistogram(n_cells=n_cells, cells=all_cells[o], values=all_vals[o], total=total,
                                threshold=tau, method=method)


def resolve_method(mechanism: Mechanism, method: str) -> str:
    """'skip' for the discrete Laplace and 'stream' otherwise when ``method`` is 'auto'."""
    if method == "auto":
        return "skip" if isinstance(mechanism, DiscreteLaplace) else "stream"
    return method


def check_feasible(n_cells: int, mechanism: Mechanism, threshold: int = 1, method: str = "auto") -> None:
    """Refuse, from public inputs only and before any budget is spent, a sparse release that cannot be held.

    Noise alone lists about n_cells · P(Z ≥ τ) cells; the message suggests a threshold τ that keeps
    that below a million.
    """
    method = resolve_method(mechanism, method)
    expected = n_cells * mechanism.tail(threshold) / 2.0
    if expected > MAX_LISTED_CELLS:
        tau = threshold
        while n_cells * mechanism.tail(tau) / 2.0 > 1_000_000 and tau < 10**9:
            tau = tau * 2 if tau < 64 else tau + max(1, int(mechanism.noise_std()))
        raise InputError(
            f"With {n_cells:.3g} cells, noise alone would give about {expected:.3g} cells a count of at least"
            f" {threshold}: too many to hold, and the release would be all noise. Use fewer columns or bins,"
            f" the marginals method, a larger ε, or a threshold of about {tau} (post-processing)."
        )
    if method == "stream" and n_cells > MAX_STREAM_CELLS:
        raise InputError(
            f"The discrete Gaussian noises every one of the {n_cells:.3g} cells one by one (exactly), more than"
            f" {MAX_STREAM_CELLS:,}; use δ = 0 (discrete Laplace, which skips empty cells exactly) or fewer cells."
        )


def laplace_p(mechanism: DiscreteLaplace) -> float:
    """p = exp(−1/scale), the ratio of consecutive discrete-Laplace probabilities."""
    return math.exp(-float(Fraction(1) / Fraction(mechanism.scale)))


def laplace_tail_at_least(mechanism: DiscreteLaplace, tau: int) -> float:
    """P(Z ≥ τ) = p^τ / (1 + p) for τ ≥ 1 (sum of the pmf (1−p)/(1+p)·p^z over z ≥ τ)."""
    p = laplace_p(mechanism)
    return p**tau / (1.0 + p)


def laplace_at_least(scale: Fraction, tau: int, size: int, *, rng: np.random.Generator) -> np.ndarray:
    """Exact draws of Z | Z ≥ τ (τ ≥ 0), Z ~ discrete Laplace(scale): τ + (Z | Z ≥ 0).

    The tail z ≥ 0 has pmf ∝ p^z, so shifting it by τ gives the tail z ≥ τ (memorylessness).
    Z | Z ≥ 0 is drawn by rejection from the exact sampler (first accepted of i.i.d. trials).
    """
    out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        need = size - filled
        z = noise.discrete_laplace(scale, 2 * need + 32, rng=rng)
        z = z[z >= 0][:need]
        out[filled : filled + len(z)] = z
        filled += len(z)
    return out + tau


def _empty_skip(empty: int, mech: DiscreteLaplace, tau: int, *, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int]:
    """(ranks among empty cells, values ≥ τ, sum of the other empty cells' values)."""
    if empty == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 0
    p = laplace_p(mech)
    q = p**tau / (1.0 + p)
    k = int(rng.binomial(empty, q))  # float64 caveat: see the module docstring
    ranks = sample_without_replacement(empty, k, rng=rng)
    vals = laplace_at_least(Fraction(mech.scale), tau, k, rng=rng)
    rest = _sum_below(empty - k, p, tau, rng=rng)
    return ranks, vals, rest


def _sum_below(count: int, p: float, tau: int, *, rng: np.random.Generator) -> int:
    """Sum of ``count`` i.i.d. draws of Z | Z < τ (discrete Laplace with ratio p)."""
    if count == 0:
        return 0
    # P(Z ≤ 0) ∝ 1/(1+p); P(Z = z) ∝ (1−p)p^z/(1+p) for 1 ≤ z < τ
    w = np.array([1.0] + [(1.0 - p) * p**z for z in range(1, tau)])
    c = rng.multinomial(count, w / w.sum()) if tau > 1 else np.array([count])
    neg = int(rng.negative_binomial(int(c[0]), 1.0 - p)) if c[0] > 0 else 0  # −Z | Z ≤ 0 is geometric(1−p)
    return -neg + int(sum(z * int(c[z]) for z in range(1, tau)))


def _empty_stream(empty: int, mech: Mechanism, tau: int, *, rng: np.random.Generator, chunk: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Noise every empty cell in chunks with the mechanism's exact sampler; keep values ≥ τ."""
    ranks, vals = [], []
    rest = 0
    for start in range(0, empty, chunk):
        size = min(chunk, empty - start)
        z = mech(np.zeros(size, dtype=np.int64), rng=rng)
        hit = np.flatnonzero(z >= tau)
        ranks.append(hit.astype(np.int64) + start)
        vals.append(z[hit])
        rest += int(z.sum()) - int(z[hit].sum())
    if not ranks:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 0
    return np.concatenate(ranks), np.concatenate(vals), rest


def sample_without_replacement(population: int, k: int, *, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random k-subset of {0, …, population−1}, sorted; memory O(k), exact.

    Draw i.i.d. uniform integers (``Generator.integers`` is unbiased) and keep the distinct ones
    until there are at least k. The resulting set's law is invariant under permutations of the
    population (the stopping rule depends only on its size), so a uniform k-subset of it is a
    uniform k-subset of the population. For k > population/2 the complement is drawn instead.
    """
    population, k = int(population), int(k)
    if not 0 <= k <= population:
        raise InputError(f"Cannot choose {k:,} of {population:,} cells.")
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    if 2 * k > population:
        out = np.ones(population, dtype=bool)
        out[sample_without_replacement(population, population - k, rng=rng)] = False
        return np.flatnonzero(out).astype(np.int64)
    chosen = np.zeros(0, dtype=np.int64)
    while len(chosen) < k:
        need = k - len(chosen)
        chosen = np.union1d(chosen, rng.integers(0, population, size=need + need // 8 + 16, dtype=np.int64))
    if len(chosen) > k:
        chosen = np.sort(rng.choice(chosen, size=k, replace=False))
    return chosen


def empty_positions(ranks: np.ndarray, occupied: np.ndarray) -> np.ndarray:
    """Flat index of the r-th empty cell (0-based) for each rank r, given the sorted occupied cells.

    With adj[i] = occupied[i] − i (empty cells before the i-th occupied one), the r-th empty
    cell is r + #{i : adj[i] ≤ r}.
    """
    ranks = np.asarray(ranks, dtype=np.int64)
    if len(occupied) == 0:
        return ranks
    adj = np.asarray(occupied, dtype=np.int64) - np.arange(len(occupied), dtype=np.int64)
    return ranks + np.searchsorted(adj, ranks, side="right").astype(np.int64)


def sample_cells_sparse(hist: SparseNoisyHistogram, rows: int, *, rng: np.random.Generator) -> np.ndarray:
    """Flat cell index of ``rows`` rows drawn i.i.d. from the normalised clamped histogram, shuffled.

    Same law as :func:`dpsynth.synthesis.sample_cells` on the dense clamped vector (cells with
    value 0 have probability 0); an all-zero histogram gives the uniform distribution on all cells.
    Drawn by :class:`dpsynth.synthesis.RowSampler` (the streaming writer's sampler) from a fast
    generator seeded by 256 bits of ``rng`` (post-processing).
    """
    check_rows(int(rows))
    return RowSampler.from_weights(hist.cells, hist.values, hist.n_cells, rows, seed=post_processing_seed(rng)).cells()


def synthesize_sparse(hist: SparseNoisyHistogram, schema: Schema, rows: int, *, rng: np.random.Generator) -> pd.DataFrame:
    """Synthetic table sampled from a sparse noisy histogram (post-processing)."""
    cells = sample_cells_sparse(hist, rows, rng=rng)
    if rows == 0:
        return decode(np.zeros((0, len(schema.columns)), dtype=np.int64), schema, rng=rng)
    codes = np.stack(np.unravel_index(cells, schema.sizes), axis=1)
    return decode(codes, schema, rng=rng)


def sparse_histogram_frame(hist: SparseNoisyHistogram, schema: Schema, column: str = "count") -> pd.DataFrame:
    """The listed cells (labels in each column) and their released counts; unlisted cells are 0."""
    idx = np.unravel_index(hist.cells, schema.sizes) if len(hist.cells) else [np.zeros(0, dtype=np.int64)] * len(schema.columns)
    data: dict[str, object] = {}
    for j, col in enumerate(schema.columns):
        data[col.name] = pd.Categorical.from_codes(np.asarray(idx[j]), categories=col.labels())
    data[column] = np.asarray(hist.values)
    return pd.DataFrame(data)


def dense_equivalent(hist: SparseNoisyHistogram) -> np.ndarray:
    """The full clamped, thresholded vector (for tests and small domains)."""
    out = np.zeros(hist.n_cells, dtype=np.int64)
    out[hist.cells] = hist.values
    return out

