"""Streams of randomness derived from a release's generator (one place for all of them).

The DP noise is drawn from the release's generator itself (a ChaCha20 CSPRNG in real
releases, :mod:`dpsynth.noise`). Everything else random in a release is derived from it here,
always with a fixed number of draws, so the generator's later state never depends on the data:

- :func:`child_rng`: an independent ChaCha20 generator keyed by 256 bits of the parent
  (contribution bounding, the sparse path's streams);
- :func:`post_processing_seed` and :func:`fast_rng`: the seed of all post-processing (synthetic
  rows) and the fast SFC64 stream of each chunk under it. Post-processing depends on the data
  only through released values, so its randomness needs no cryptographic strength; a secure
  release's rows still cannot be predicted without its key;
- :func:`systematic_points` / :func:`systematic_uniforms`: the evenly spread points at which the
  synthetic rows invert a model's CDFs (controlled rounding, post-processing).
"""

from __future__ import annotations

import numpy as np

#: Stream key under the post-processing seed: (1, i) serves chunk i's cells and values.
CHUNK_KEY = 1
#: Stream key under the post-processing seed: (2, i) serves chunk i of a model's ancestral sampling.
MODEL_KEY = 2


def child_rng(rng: np.random.Generator) -> np.random.Generator:
    """An independent ChaCha20 (20 rounds) generator keyed by 256 bits drawn from ``rng``."""
    from randomgen import ChaCha

    return np.random.Generator(ChaCha(key=int.from_bytes(rng.bytes(32), "little"), rounds=20))


def post_processing_seed(rng: np.random.Generator) -> int:
    """256 bits drawn from the release's generator: the seed of all post-processing randomness.

    Always the same number of draws, so ``rng`` ends in a state that does not depend on what is sampled.
    """
    return int.from_bytes(rng.bytes(32), "little")


def fast_rng(seed: int, *key: int) -> np.random.Generator:
    """The SFC64 generator of stream ``key`` under ``seed`` (distinct keys: independent streams).

    ``SeedSequence`` hashes the 256-bit seed with the spawn key, so each chunk's stream is fixed
    by (seed, chunk index) alone, whatever the order in which threads use them.
    """
    return np.random.Generator(np.random.SFC64(np.random.SeedSequence(seed, spawn_key=key)))


#: The golden-ratio conjugate: the points frac(j·φ) of consecutive j are spread evenly (Weyl 1916).
_PHI = (5 ** 0.5 - 1) / 2


def _weyl_ranks(g: np.ndarray, group: np.ndarray, j: np.ndarray) -> np.ndarray:
    """For each row (its group and 0 ≤ j < g[group]), the rank of frac(j·φ) among frac(0·φ), …,
    frac((g − 1)·φ): per group size a permutation of 0 … g − 1 whose consecutive values are spread
    evenly. One table per distinct size; their lengths add up to at most the number of rows."""
    sizes, which = np.unique(np.maximum(g, 1), return_inverse=True)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    table = np.empty(int(sizes.sum()), dtype=np.int64)
    for start, m in zip(starts.tolist(), sizes.tolist(), strict=True):
        r = np.empty(m, dtype=np.int64)
        r[np.argsort((np.arange(m) * _PHI) % 1.0, kind="stable")] = np.arange(m)
        table[start:start + m] = r
    return table[starts[which][group] + j]


def systematic_uniforms(groups: np.ndarray, n_groups: int, *, rng: np.random.Generator,
                        strata: np.ndarray | None = None) -> np.ndarray:
    """One point u ∈ [0, 1) per row, spread evenly inside each group of rows (systematic sampling).

    ``groups``: int64 group ids in [0, n_groups) (< 2^31). The g rows of a group get the points
    (σ_j + U)/g, j = 0 … g − 1, with one uniform U per group, so inverting a CDF at them gives
    counts within one of their expectation (the controlled rounding of Private-PGM's sampler).
    Without ``strata`` the rows of a group are put in uniformly random order and σ_j = j.

    ``strata`` (int64 in [0, 2^20), one per row; used while n_groups < 2^23) spreads each group's
    points over the strata too: the group's rows are ordered by stratum (ties in random order)
    and cyclically shifted by a uniform random offset, and the j-th gets the rank σ_j of frac(j·φ)
    among the group's g Weyl points (:func:`_weyl_ranks`). Any run of consecutive rows — one
    stratum's rows — then gets points spread over [0, 1), so the counts inside each stratum also
    come near their expectation. The offset makes each row's rank uniform on 0 … g − 1 whatever
    its stratum, so each row's u is still uniform on [0, 1) and independent of its stratum.
    Callers relabel strata at random, so no stratum is systematically first.
    """
    order, _, u = systematic_points(groups, n_groups, rng=rng, strata=strata)
    out = np.empty(len(u), dtype=np.float64)
    out[order] = u
    return out


def systematic_points(groups: np.ndarray, n_groups: int, *, rng: np.random.Generator,
                      strata: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`systematic_uniforms` in the rows' grouped order: (order, groups[order], u[order]),
    the same draws. Inverting CDFs in this order reads each group's CDF in one run (cache-friendly)."""
    groups = np.asarray(groups, dtype=np.int64)
    n = len(groups)
    if n_groups >= 1 << 23:  # the composite sort key below holds groups in 23 bits
        strata = None
    if strata is None:
        # The sort key's high bits are the group, its low 32 bits random (integer keys: a float key
        # k + u could round up into group k + 1).
        order = np.argsort((groups << 32) | rng.integers(0, 1 << 32, size=n, dtype=np.int64))
    else:
        key = (groups << 40) | (np.asarray(strata, dtype=np.int64) << 20) | rng.integers(0, 1 << 20, size=n, dtype=np.int64)
        order = np.argsort(key)
    sg = groups[order]
    g = np.bincount(sg, minlength=n_groups)
    starts = np.cumsum(g) - g
    rank = np.arange(n) - starts[sg]
    gs = np.maximum(g[sg], 1)
    if strata is not None:
        shift = rng.integers(0, 1 << 62, size=n_groups, dtype=np.int64)[sg] % gs
        rank = _weyl_ranks(g, sg, (rank + shift) % gs)
    return order, sg, (rank + rng.random(n_groups)[sg]) / gs
