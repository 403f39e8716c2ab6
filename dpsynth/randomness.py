"""Streams of randomness derived from a release's generator (one place for all of them).

The DP noise is drawn from the release's generator itself (a ChaCha20 CSPRNG in real
releases, :mod:`dpsynth.noise`). Everything else random in a release is derived from it here,
always with a fixed number of draws, so the generator's later state never depends on the data:

- :func:`child_rng`: an independent ChaCha20 generator keyed by 256 bits of the parent
  (contribution bounding, the sparse path's streams);
- :func:`post_processing_seed` and :func:`fast_rng`: the seed of all post-processing (synthetic
  rows) and the fast SFC64 stream of each chunk under it. Post-processing depends on the data
  only through released values, so its randomness needs no cryptographic strength; a secure
  release's rows still cannot be predicted without its key.
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


def systematic_uniforms(groups: np.ndarray, n_groups: int, *, rng: np.random.Generator) -> np.ndarray:
    """One point u ∈ [0, 1) per row, spread evenly inside each group of rows (systematic sampling).

    ``groups``: int64 group ids in [0, n_groups) (< 2^31). The g rows of a group are put in
    uniformly random order and the j-th gets (j + U)/g, with one uniform U per group. Each row's u
    is still uniform on [0, 1) and independent of anything outside its group, but a group's points
    cover [0, 1) evenly, so inverting a CDF at them gives counts within one of their expectation
    (the controlled rounding of Private-PGM's sampler). Draws ``len(groups)`` 32-bit integers,
    then ``n_groups`` uniforms, from ``rng``.
    """
    groups = np.asarray(groups, dtype=np.int64)
    n = len(groups)
    # The sort key's high bits are the group, its low 32 bits random (integer keys: a float key
    # k + u could round up into group k + 1).
    order = np.argsort((groups << 32) | rng.integers(0, 1 << 32, size=n, dtype=np.int64))
    sg = groups[order]
    g = np.bincount(sg, minlength=n_groups)
    starts = np.cumsum(g) - g
    u = np.empty(n, dtype=np.float64)
    u[order] = (np.arange(n) - starts[sg] + rng.random(n_groups)[sg]) / np.maximum(g[sg], 1)
    return u
