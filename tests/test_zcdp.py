"""zCDP accounting: exact calibration/composition values and the CKS20 conversion."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import special

from dpsynth import zcdp
from dpsynth.errors import InputError


def _grid_delta(rho: float, eps: float) -> float:
    """Independent evaluation of CKS20 Cor. 13 on a dense α grid (an upper bound on the infimum)."""
    a = np.exp(np.linspace(np.log(1.0 + 1e-6), np.log(1e7), 400_000))
    logd = (a - 1) * (a * rho - eps) + a * np.log1p(-1.0 / a) - np.log(a - 1)
    return float(np.exp(logd.min()))


def _gaussian_delta(rho: float, eps: float) -> float:
    """Exact δ(ε) of the continuous Gaussian mechanism with Δ/σ = sqrt(2ρ) (Balle & Wang 2018)."""
    r = math.sqrt(2 * rho)  # Δ/σ
    return float(special.ndtr(r / 2 - eps / r) - math.exp(eps) * special.ndtr(-r / 2 - eps / r))


@pytest.mark.parametrize("rho,eps", [(0.01, 1.0), (0.015, 1.0), (0.1, 2.0), (0.5, 4.0), (1.0, 3.0), (0.001, 0.3)])
def test_delta_matches_independent_grid(rho: float, eps: float) -> None:
    """The bisection optimum agrees with a brute-force grid and is never above it."""
    d = zcdp.delta_from_rho(rho, eps)
    g = _grid_delta(rho, eps)
    assert d <= g * (1 + 1e-9)
    assert d == pytest.approx(g, rel=1e-5)


@pytest.mark.parametrize("rho,eps", [(0.01, 1.0), (0.1, 2.0), (0.5, 4.0), (0.0015, 0.3)])
def test_conversion_is_valid_and_tighter_than_classic(rho: float, eps: float) -> None:
    """δ_CKS is at least the Gaussian mechanism's exact δ (the Gaussian is ρ-zCDP, so a valid
    conversion cannot promise less), and ε_CKS beats the classic ρ + 2√(ρ ln 1/δ)."""
    assert zcdp.delta_from_rho(rho, eps) >= _gaussian_delta(rho, eps)
    delta = 1e-9
    assert zcdp.epsilon_from_rho(rho, delta) < rho + 2 * math.sqrt(rho * math.log(1 / delta))


def test_known_values() -> None:
    """ρ for ε = 1, δ = 1e-9 (the benchmark setting) and the round trip ρ → ε → ρ."""
    rho = zcdp.rho_from_epsilon(1.0, 1e-9)
    assert rho == pytest.approx(0.0149730577, rel=1e-8)
    assert zcdp.delta_from_rho(rho, 1.0) <= 1e-9
    assert zcdp.delta_from_rho(rho * (1 + 1e-6), 1.0) > 1e-9
    assert zcdp.epsilon_from_rho(rho, 1e-9) == pytest.approx(1.0, rel=1e-9)
    assert zcdp.epsilon_from_rho(rho, 1e-9) >= 1.0 - 1e-12


def test_monotone() -> None:
    rhos = [zcdp.rho_from_epsilon(e, 1e-6) for e in (0.1, 0.5, 1, 2, 5)]
    assert rhos == sorted(rhos) and rhos[0] > 0
    assert zcdp.delta_from_rho(0.1, 1.0) > zcdp.delta_from_rho(0.1, 2.0) > zcdp.delta_from_rho(0.05, 2.0)


def test_exact_calibration_and_composition() -> None:
    """Fractions in, exact Fractions out: Gaussian ρ = Δ²/(2σ²), EM ρ = ε²/8, sums."""
    assert zcdp.gaussian_rho(Fraction(100), 1) == Fraction(1, 200)
    assert zcdp.gaussian_rho(Fraction(100), 2) == Fraction(1, 100)  # replace-one: Δ₂² = 2
    assert zcdp.gaussian_sigma2(Fraction(1, 200), 1) == Fraction(100)
    assert zcdp.exponential_mechanism_rho(Fraction(1, 10)) == Fraction(1, 800)
    assert zcdp.pure_dp_rho(Fraction(1, 2)) == Fraction(1, 8)
    total = zcdp.compose([zcdp.gaussian_rho(Fraction(100), 1), zcdp.exponential_mechanism_rho(Fraction(1, 10))])
    assert total == Fraction(1, 200) + Fraction(1, 800) == Fraction(1, 160)
    assert zcdp.exponential_mechanism_epsilon(1 / 800) == pytest.approx(0.1, rel=1e-12)


def test_bad_input() -> None:
    with pytest.raises(InputError):
        zcdp.rho_from_epsilon(1.0, 0.0)
    with pytest.raises(InputError):
        zcdp.rho_from_epsilon(-1.0, 1e-6)
    with pytest.raises(InputError):
        zcdp.compose([0.1, -0.2])
    with pytest.raises(InputError):
        zcdp.gaussian_sigma2(0.0, 1)


def _full_bisection(test, lo: float, hi: float, iters: int) -> tuple[float, float]:
    """Every one of ``iters`` halvings, with no early stop (the reference for the conversions)."""
    for _ in range(iters):
        mid = (lo + hi) / 2.0
        if test(mid):
            lo = mid
        else:
            hi = mid
    return lo, hi


def _reference_delta(rho: float, eps: float) -> float:
    def log_delta(a: float) -> float:
        return (a - 1) * (a * rho - eps) + a * math.log1p(-1.0 / a) - math.log(a - 1)

    def rising(a: float) -> bool:
        return (2 * a - 1) * rho - eps + math.log1p(-1.0 / a) < 0

    hi = max(2.0, (eps + 1.0) / (2.0 * rho) + 2.0)
    while rising(hi):
        hi *= 2.0
    lo, hi = _full_bisection(rising, 1.0 + 1e-12, hi, 200)
    best = min(log_delta(hi), log_delta(lo))
    return min(1.0, math.exp(best)) if best < 700 else 1.0


def test_bisections_stop_early_with_the_answer_of_every_step() -> None:
    """The conversions stop once a halving changes nothing more (a fixed point): bit for bit the
    answer of all 200 halvings, from 4 to 40 times faster (a release converts hundreds of times)."""
    rng = np.random.default_rng(7)
    for _ in range(60):
        rho, eps = 10 ** rng.uniform(-7, 2), 10 ** rng.uniform(-3, 1.6)
        assert zcdp.delta_from_rho(rho, eps) == _reference_delta(rho, eps)
    for _ in range(12):
        rho, eps, delta = 10 ** rng.uniform(-5, 1), 10 ** rng.uniform(-2, 1.3), 10 ** rng.uniform(-12, -3)
        hi = rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta)) + 1.0
        while _reference_delta(rho, hi) > delta:
            hi *= 2.0
        assert zcdp.epsilon_from_rho(rho, delta) == _full_bisection(
            lambda e, rho=rho, delta=delta: _reference_delta(rho, e) > delta, 0.0, hi, 200)[1]
        hi = eps + 1.0
        while _reference_delta(hi, eps) <= delta:
            hi *= 2.0
        assert zcdp.rho_from_epsilon(eps, delta) == _full_bisection(
            lambda r, eps=eps, delta=delta: _reference_delta(r, eps) <= delta, 0.0, hi, 200)[0]
