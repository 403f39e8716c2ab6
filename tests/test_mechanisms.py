"""Calibration (exact values) and the noise each mechanism adds (statistical, seeded)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpsynth.errors import InputError
from dpsynth.mechanisms import (
    DiscreteGaussian,
    DiscreteLaplace,
    analytic_gaussian_sigma,
    calibrate,
    cell_error_bound,
    discrete_gaussian_delta,
    exponential_mechanism,
    laplace_accuracy,
    randomized_response,
    randomized_response_estimate,
)
from dpsynth.neighbours import (
    Neighbours,
    count_sensitivity,
    histogram_l1_sensitivity,
    histogram_l2_sensitivity,
)


def test_sensitivities_follow_the_relation():
    assert histogram_l1_sensitivity("add-remove") == 1
    assert histogram_l1_sensitivity("replace-one") == 2
    assert histogram_l1_sensitivity("add-remove", 3) == 3
    assert histogram_l1_sensitivity("replace-one", 3) == 6
    assert histogram_l2_sensitivity("replace-one") == pytest.approx(math.sqrt(2))
    assert count_sensitivity("replace-one") == 0
    with pytest.raises(InputError, match="Unknown neighbouring relation"):
        Neighbours.parse("swap")


def test_laplace_scale_is_sensitivity_over_epsilon_rounded_up():
    m = DiscreteLaplace.calibrate(1.0, "add-remove")
    assert m.scale == Fraction(1)
    r = DiscreteLaplace.calibrate(1.0, "replace-one")  # lecture notes on DP, ch. 6: Laplace(ε/2) rate, scale 2/ε
    assert r.scale == Fraction(2)
    t = DiscreteLaplace.calibrate(0.3, "add-remove")
    assert t.scale == Fraction(10, 3)  # ε read as the decimal 0.3 that was typed
    assert DiscreteLaplace.calibrate(1 / 7, "add-remove").scale >= Fraction(1) / Fraction(repr(1 / 7))


@pytest.mark.parametrize("eps", [0, -1, float("inf"), float("nan"), "x"])
def test_bad_epsilon_is_refused(eps):
    with pytest.raises(InputError):
        DiscreteLaplace.calibrate(eps, "add-remove")


def test_noise_is_off_at_scale_zero_equivalent_and_shapes_kept():
    m = DiscreteLaplace(epsilon=1.0, l1_sensitivity=1, scale=Fraction(0))
    c = np.array([[0, 5], [7, 0]])
    assert (m(c, rng=np.random.default_rng(0)) == c).all()


def test_laplace_noise_matches_discrete_laplace_pmf():
    m = DiscreteLaplace.calibrate(0.5, "add-remove")  # scale 2
    z = m(np.zeros(200_000, dtype=np.int64), rng=np.random.default_rng(11))
    p = math.exp(-1 / 2)
    support = np.arange(-12, 13)
    pmf = (1 - p) / (1 + p) * p ** np.abs(support)
    observed = np.array([(z == k).sum() for k in support])
    observed = np.append(observed, len(z) - observed.sum())
    expected = np.append(pmf, 1 - pmf.sum()) * len(z)
    assert stats.chisquare(observed, expected).pvalue > 1e-4
    assert np.std(z) == pytest.approx(m.noise_std(), rel=0.02)


def test_gaussian_calibration_matches_analytic_gaussian():
    g = DiscreteGaussian.calibrate(1.0, 1e-6, "add-remove")
    a = analytic_gaussian_sigma(1.0, 1e-6, 1.0)
    assert math.sqrt(g.sigma2) == pytest.approx(a, rel=0.01)
    assert discrete_gaussian_delta(1.0, float(g.sigma2), "add-remove") <= 1e-6
    # tighter than the classical sqrt(2 ln(1.25/δ))/ε bound
    assert math.sqrt(g.sigma2) < math.sqrt(2 * math.log(1.25 / 1e-6))
    r = DiscreteGaussian.calibrate(1.0, 1e-6, "replace-one")
    assert math.sqrt(r.sigma2) == pytest.approx(analytic_gaussian_sigma(1.0, 1e-6, math.sqrt(2)), rel=0.01)


def test_analytic_gaussian_known_value():
    # Balle & Wang (2018): δ(σ) at the returned σ equals the target
    s = analytic_gaussian_sigma(1.0, 1e-5, 1.0)
    a, b = 1 / (2 * s), s
    d = stats.norm.cdf(a - b) - math.e * stats.norm.cdf(-a - b)
    assert d == pytest.approx(1e-5, rel=1e-6)


def test_several_rows_per_person_needs_more_noise():
    one = DiscreteGaussian.calibrate(1.0, 1e-6, "add-remove", 1)
    three = DiscreteGaussian.calibrate(1.0, 1e-6, "add-remove", 3)
    assert three.sigma2 > 8 * one.sigma2


def test_calibrate_picks_mechanism():
    assert isinstance(calibrate(1.0, 0.0, "add-remove"), DiscreteLaplace)
    assert isinstance(calibrate(1.0, 1e-6, "add-remove"), DiscreteGaussian)
    assert isinstance(calibrate(1.0, 1e-6, "add-remove", kind="laplace"), DiscreteLaplace)
    with pytest.raises(InputError, match="needs δ > 0"):
        calibrate(1.0, 0.0, "add-remove", kind="gaussian")


def test_cell_error_bound_holds_empirically():
    m = DiscreteLaplace.calibrate(1.0, "add-remove")
    bound = cell_error_bound(m, 100, 0.05)
    assert bound <= laplace_accuracy(100, 1.0, 1, 0.05) + 1
    rng = np.random.default_rng(3)
    z = m(np.zeros((2000, 100), dtype=np.int64), rng=rng)
    fail = (np.abs(z).max(axis=1) > bound).mean()
    assert fail <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 2000)


def test_exponential_mechanism_distribution():
    scores = np.array([0.0, 1.0, 2.0])
    rng = np.random.default_rng(5)
    draws = np.array([exponential_mechanism(scores, 1.0, 2.0, rng=rng) for _ in range(20_000)])
    w = np.exp(2.0 * scores / 2)
    expected = w / w.sum() * len(draws)
    observed = np.bincount(draws, minlength=3)
    assert stats.chisquare(observed, expected).pvalue > 1e-4


def test_randomized_response_is_unbiased_after_correction():
    rng = np.random.default_rng(9)
    truth = rng.random(100_000) < 0.3
    noisy = randomized_response(truth, 1.0, rng=rng)
    p = math.e / (1 + math.e)
    assert noisy.mean() == pytest.approx(0.3 * p + 0.7 * (1 - p), abs=0.01)
    assert randomized_response_estimate(noisy, 1.0) == pytest.approx(0.3, abs=0.015)


@pytest.mark.parametrize("neighbours", ["add-remove", "replace-one"])
def test_gaussian_calibration_at_a_very_large_epsilon(neighbours):
    """e^ε overflows past ε ≈ 709: the profile is computed in logs, and σ keeps falling with ε."""
    sig = [analytic_gaussian_sigma(e, 1e-9, 1.0) for e in (100.0, 1000.0, 1e6)]
    assert all(math.isfinite(s) and s > 0 for s in sig) and sig[0] > sig[1] > sig[2]
    assert DiscreteGaussian.calibrate(1000.0, 1e-9, neighbours).sigma2 < DiscreteGaussian.calibrate(10.0, 1e-9,
                                                                                                   neighbours).sigma2
