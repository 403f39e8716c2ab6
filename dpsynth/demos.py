"""Simulations behind the "How the noise works" page: many draws of each mechanism on made-up inputs.

Nothing here reads a dataset or spends budget. The randomness is a demo generator
(:func:`demo_rng`: seeded, the same picture in every process until the curator asks for new
numbers), never a release's. The mechanisms are the library's own (:mod:`dpsynth.mechanisms`), so
the page shows exactly the noise a release adds.
"""

from __future__ import annotations

import zlib

import numpy as np

from dpsynth.mechanisms import (
    DiscreteGaussian,
    DiscreteLaplace,
    exponential_mechanism,
    randomized_response,
    randomized_response_estimate,
)
from dpsynth.noise import seeded_rng


def demo_rng(demo: str, draw: int = 0) -> np.random.Generator:
    """The generator of demo ``demo`` at redraw ``draw``: stable across processes (CRC-32, not
    Python's salted ``hash``). For demonstrations only, never for releases."""
    return seeded_rng(zlib.crc32(f"{demo}:{int(draw)}".encode()))


def neighbour_outputs(mech: DiscreteLaplace | DiscreteGaussian, count: int, draws: int, *,
                      rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``draws`` noisy answers of ``mech`` on a count and on the count of a neighbour (one person
    more): the two distributions the DP guarantee says are close."""
    return mech(np.full(draws, int(count)), rng=rng), mech(np.full(draws, int(count) + 1), rng=rng)


def randomized_response_surveys(share: float, people: int, epsilon: float, surveys: int, *,
                                rng: np.random.Generator) -> np.ndarray:
    """The estimated share of 'yes' in ``surveys`` surveys of ``people`` people, a ``share`` of
    whom truly say yes, each answering by randomized response at ``epsilon`` (unbiased estimate)."""
    truth = np.arange(int(people)) < round(share * people)
    return np.array([randomized_response_estimate(randomized_response(truth, epsilon, rng=rng), epsilon)
                     for _ in range(int(surveys))])


def exponential_choice_shares(scores: np.ndarray, epsilon: float, draws: int, *,
                              rng: np.random.Generator) -> np.ndarray:
    """How often each option is chosen in ``draws`` runs of the exponential mechanism on
    ``scores`` (sensitivity 1) at ``epsilon``."""
    picks = np.array([exponential_mechanism(scores, 1.0, epsilon, rng=rng) for _ in range(int(draws))])
    return np.bincount(picks, minlength=len(scores)) / max(len(picks), 1)
