"""Zero-concentrated DP (zCDP) accounting: calibration, composition and conversion to (ε, δ).

Facts used (all for a fixed neighbouring relation, see :mod:`dpsynth.neighbours`):

- *Gaussian measurement* [BS16, Prop. 1.6; CKS20, Thm. 4 for the discrete Gaussian]: adding
  discrete Gaussian noise of variance parameter σ² to an integer query of squared L2
  sensitivity Δ₂² is ρ-zCDP with ρ = Δ₂² / (2σ²).
- *Exponential mechanism* [Cesar & Rogers 2021, "Bounding, concentrating, and truncating",
  Lemma 3.2 via bounded range]: the ε-DP exponential mechanism is ε²/8-zCDP.
- *Pure DP* [BS16, Prop. 1.4]: ε-DP implies ε²/2-zCDP.
- *Composition* [BS16, Lemma 2.3]: ρ adds up, also adaptively.
- *Conversion* [CKS20, §2.3, Corollary 13 — Canonne, Kamath & Steinke 2020, "The Discrete
  Gaussian for Differential Privacy", arXiv:2004.00010]: ρ-zCDP implies (ε, δ)-DP with

      δ = inf_{α>1} exp((α−1)(αρ−ε)) / (α−1) · (1 − 1/α)^α.

  This is tighter than the classic ε = ρ + 2·sqrt(ρ·ln(1/δ)) [BS16, Prop. 1.3]; we use CKS20,
  not the (slightly tighter, numerically harder) conversion of Asoodeh et al. 2021.

[BS16] Bun & Steinke, "Concentrated Differential Privacy: Simplifications, Extensions, and
Lower Bounds", TCC 2016.

Floats: the conversions are monotone bisections; every answer errs on the safe side (a
returned ρ for a target (ε, δ) gives a δ at or below the target; a returned ε is at or above
the true infimum, up to the bisection tolerance).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from fractions import Fraction

from dpsynth.errors import InputError

Number = float | Fraction | int

_ITERS = 200


def _check_positive(name: str, value: float, *, allow_zero: bool = False) -> float:
    v = float(value)
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        raise InputError(f"{name} must be a positive finite number, got {value!r}.")
    return v


def _bisect(raise_lo: Callable[[float], bool], lo: float, hi: float) -> tuple[float, float]:
    """[lo, hi] halved up to :data:`_ITERS` times, lo moving to the midpoint where ``raise_lo`` holds there,
    else hi. Each halving is a function of (lo, hi) alone, so once one changes neither end the rest would
    change nothing: stopping there gives the answer of every halving, bit for bit."""
    for _ in range(_ITERS):
        mid = (lo + hi) / 2.0
        before = (lo, hi)
        if raise_lo(mid):
            lo = mid
        else:
            hi = mid
        if (lo, hi) == before:
            break
    return lo, hi


def delta_from_rho(rho: float, epsilon: float) -> float:
    """Smallest δ such that ρ-zCDP implies (ε, δ)-DP by [CKS20, Corollary 13].

    The exponent ``(α−1)(αρ−ε) + α·log(1−1/α) − log(α−1)`` is convex in α with derivative
    ``(2α−1)ρ − ε + log(1−1/α)``; we bisect for its root.
    """
    rho = _check_positive("rho", rho, allow_zero=True)
    eps = _check_positive("epsilon", epsilon, allow_zero=True)
    if rho == 0:
        return 0.0

    def log_delta(a: float) -> float:
        return (a - 1) * (a * rho - eps) + a * math.log1p(-1.0 / a) - math.log(a - 1)

    lo, hi = 1.0 + 1e-12, max(2.0, (eps + 1.0) / (2.0 * rho) + 2.0)
    # At (ε+1)/(2ρ)+2 the derivative is already positive; widen only defensively.
    while (2 * hi - 1) * rho - eps + math.log1p(-1.0 / hi) < 0:
        hi *= 2.0
    lo, hi = _bisect(lambda a: (2 * a - 1) * rho - eps + math.log1p(-1.0 / a) < 0, lo, hi)
    # Any α > 1 gives a valid bound, so the value at the bracket's end is safe.
    best = min(log_delta(hi), log_delta(lo))
    return min(1.0, math.exp(best)) if best < 700 else 1.0


def epsilon_from_rho(rho: float, delta: float) -> float:
    """Smallest ε (up to tolerance, rounded up) with ρ-zCDP ⇒ (ε, δ)-DP [CKS20, Corollary 13]."""
    rho = _check_positive("rho", rho, allow_zero=True)
    if not 0 < float(delta) < 1:
        raise InputError(f"delta must be strictly between 0 and 1 for a zCDP conversion, got {delta!r}.")
    if rho == 0:
        return 0.0
    lo, hi = 0.0, rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta)) + 1.0  # [BS16, Prop. 1.3] is an upper bound
    while delta_from_rho(rho, hi) > delta:
        hi *= 2.0
    return _bisect(lambda e: delta_from_rho(rho, e) > delta, lo, hi)[1]


def rho_from_epsilon(epsilon: float, delta: float) -> float:
    """Largest ρ (rounded down) such that ρ-zCDP implies (ε, δ)-DP [CKS20, Corollary 13]."""
    eps = _check_positive("epsilon", epsilon)
    if not 0 < float(delta) < 1:
        raise InputError(f"delta must be strictly between 0 and 1 for a zCDP conversion, got {delta!r}.")
    lo, hi = 0.0, eps + 1.0  # δ(ρ ≥ ε, ε) is large; widen defensively below
    while delta_from_rho(hi, eps) <= delta:
        hi *= 2.0
    return _bisect(lambda r: delta_from_rho(r, eps) <= delta, lo, hi)[0]


def gaussian_rho(sigma2: Number, l2_sensitivity_squared: Number) -> Number:
    """ρ = Δ₂²/(2σ²) of a (discrete) Gaussian measurement; exact for Fractions/ints [CKS20, Thm. 4]."""
    if sigma2 <= 0:
        raise InputError(f"The noise variance must be positive, got {sigma2!r}.")
    if isinstance(sigma2, Fraction | int) and isinstance(l2_sensitivity_squared, Fraction | int):
        return Fraction(l2_sensitivity_squared) / (2 * Fraction(sigma2))
    return float(l2_sensitivity_squared) / (2.0 * float(sigma2))


def gaussian_sigma2(rho: Number, l2_sensitivity_squared: Number) -> Number:
    """σ² = Δ₂²/(2ρ): the variance that makes a Gaussian measurement exactly ρ-zCDP."""
    if rho <= 0:
        raise InputError(f"rho must be positive, got {rho!r}.")
    if isinstance(rho, Fraction | int) and isinstance(l2_sensitivity_squared, Fraction | int):
        return Fraction(l2_sensitivity_squared) / (2 * Fraction(rho))
    return float(l2_sensitivity_squared) / (2.0 * float(rho))


def exponential_mechanism_rho(epsilon: Number) -> Number:
    """ρ = ε²/8 of the ε-DP exponential mechanism (bounded range) [Cesar & Rogers 2021]."""
    if epsilon < 0:
        raise InputError(f"epsilon must be non-negative, got {epsilon!r}.")
    if isinstance(epsilon, Fraction | int):
        return Fraction(epsilon) ** 2 / 8
    return float(epsilon) ** 2 / 8.0


def exponential_mechanism_epsilon(rho: float) -> float:
    """The ε whose exponential mechanism costs exactly ρ: ε = sqrt(8ρ)."""
    return math.sqrt(8.0 * _check_positive("rho", rho, allow_zero=True))


def pure_dp_rho(epsilon: Number) -> Number:
    """ρ = ε²/2 of any ε-DP mechanism [BS16, Prop. 1.4]."""
    if isinstance(epsilon, Fraction | int):
        return Fraction(epsilon) ** 2 / 2
    return float(epsilon) ** 2 / 2.0


def compose(rhos: Iterable[Number]) -> Number:
    """ρ of the adaptive composition: the sum [BS16, Lemma 2.3] (exact for Fractions)."""
    total: Number = 0
    for r in rhos:
        if r < 0:
            raise InputError(f"A zCDP cost cannot be negative, got {r!r}.")
        total = total + r
    return total
