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
