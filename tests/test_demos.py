"""The learning page's simulations (dpsynth.demos): the library's mechanisms, demo randomness only."""

from __future__ import annotations

import numpy as np

from dpsynth.demos import demo_rng, exponential_choice_shares, neighbour_outputs, randomized_response_surveys
from dpsynth.mechanisms import DiscreteLaplace


def test_demo_rng_is_stable_and_redraws() -> None:
    a = demo_rng("laplace", 0).integers(0, 2**31, 4)
    assert (a == demo_rng("laplace", 0).integers(0, 2**31, 4)).all()
    assert not (a == demo_rng("laplace", 1).integers(0, 2**31, 4)).all()
    assert not (a == demo_rng("gaussian", 0).integers(0, 2**31, 4)).all()


def test_neighbour_outputs_centre_on_the_two_counts() -> None:
    mech = DiscreteLaplace.calibrate(1.0, "add-remove")
    a, b = neighbour_outputs(mech, 100, 20_000, rng=demo_rng("t"))
    # discrete Laplace at ε = 1: sd ≈ 1.4, so the mean of 20,000 draws is within ±0.05 (5 sd of the mean)
    assert abs(a.mean() - 100) < 0.05 and abs(b.mean() - 101) < 0.05
    assert a.dtype.kind == "i" and len(b) == 20_000


def test_randomized_response_is_unbiased() -> None:
    est = randomized_response_surveys(0.3, 1000, 1.0, 300, rng=demo_rng("rr"))
    # sd of one estimate at ε = 1, n = 1000: √(q(1−q)/n)/(2q−1) ≈ 0.032; the mean of 300 within ±0.01
    assert len(est) == 300 and abs(est.mean() - 0.3) < 0.01


def test_exponential_mechanism_prefers_higher_scores() -> None:
    shares = exponential_choice_shares(np.array([30.0, 25.0, 20.0, 5.0]), 0.5, 2000, rng=demo_rng("em"))
    assert abs(shares.sum() - 1) < 1e-12
    assert shares[0] > shares[1] > shares[2] > shares[3]
