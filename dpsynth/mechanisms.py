"""Mechanisms: calibration (pure, exact) and application (draws from ``dpsynth.noise``).

Every mechanism states its guarantee for a query of given sensitivity; sensitivities come
from :mod:`dpsynth.neighbours`.

- :class:`DiscreteLaplace` — ε-DP for an integer vector query of L1 sensitivity Δ₁, scale
  Δ₁/ε (geometric mechanism, Ghosh–Roughgarden–Sundararajan 2009; Canonne–Kamath–Steinke
  2020 §2). Seed 000 writes it as Laplace(ε/2) for the replace-one histogram (Δ₁ = 2).
- :class:`DiscreteGaussian` — (ε, δ)-DP for an integer vector query of L2 sensitivity Δ₂, with σ
  chosen by binary search on the *exact* privacy profile of the discrete Gaussian for the
  worst-case neighbouring shift (CKS20 Thm 7 and its two-coordinate analogue; see
  :func:`discrete_gaussian_delta`); also ρ-zCDP with ρ = Δ₂²/(2σ²) (CKS20 Thm 4).
- :func:`analytic_gaussian_sigma` — Balle & Wang (2018) exact calibration of the continuous
  Gaussian; used for comparisons and previews.
- :func:`exponential_mechanism` — ε-DP selection, P(r) ∝ exp(ε·u(r)/(2Δu)) (the Algorithmic Foundations of DP slides; McSherry
  & Talwar 2007).
- :func:`randomized_response` — ε-local-DP for one bit (the Algorithmic Foundations of DP slides; Warner 1965).
- :func:`laplace_accuracy` — Thm 3.8 of the Algorithmic Foundations of DP slides and the exact discrete-Laplace tail.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpsynth import noise
from dpsynth.errors import InputError
from dpsynth.neighbours import (
    Neighbours,
    histogram_l1_sensitivity,
    histogram_l2_sensitivity,
    histogram_l2_sensitivity_squared,
)
from dpsynth.zcdp import delta_from_rho, epsilon_from_rho


def check_epsilon(epsilon: float) -> float:
    """ε must be a finite positive number (ε = ∞ is not a privacy guarantee)."""
    try:
        e = float(epsilon)
    except (TypeError, ValueError):
        raise InputError(f"ε must be a number, got {epsilon!r}.") from None
    if not math.isfinite(e) or e <= 0:
        raise InputError(f"ε must be a finite number greater than 0, got {epsilon!r}.")
    return e


def exact_epsilon(epsilon: float) -> Fraction:
    """ε as the decimal the curator typed (0.3 → 3/10), not its binary float (0.29999…).

    The two differ by less than one part in 10¹⁵; the decimal gives noise scales with small
    numerators (1/0.3 → 10/3), which the exact samplers draw several times faster.
    """
    return Fraction(repr(check_epsilon(epsilon)))


def laplace_scale(l1_sensitivity: float, epsilon: float) -> Fraction:
    """Scale Δ₁/ε of the discrete Laplace mechanism, as a rational rounded up (never less noise)."""
    return noise.rational_at_least(Fraction(l1_sensitivity) / exact_epsilon(epsilon))


def check_delta(delta: float) -> float:
    """δ must be in [0, 1)."""
    try:
        d = float(delta)
    except (TypeError, ValueError):
        raise InputError(f"δ must be a number, got {delta!r}.") from None
    if not 0.0 <= d < 1.0 or math.isnan(d):
        raise InputError(f"δ must be at least 0 and below 1, got {delta!r}.")
    return d


def discrete_laplace_std(scale: Fraction | float) -> float:
    """Standard deviation of the discrete Laplace of ``scale`` t: √(2p)/(1 − p), p = e^(−1/t)."""
    if scale == 0:
        return 0.0
    p = math.exp(-1.0 / float(scale))
    return math.sqrt(2.0 * p) / (1.0 - p)


@dataclass(frozen=True)
class DiscreteLaplace:
    """Add exact discrete Laplace noise, P(Z=z) ∝ exp(−|z|/scale), to integer counts.

    Guarantee: ε-DP for a query of L1 sensitivity ``l1_sensitivity`` when ``scale ≥ Δ₁/ε``;
    the scale is Δ₁/ε rounded *up* to a rational (more noise, never less).
    """

    epsilon: float
    l1_sensitivity: int
    scale: Fraction

    @classmethod
    def calibrate(cls, epsilon: float, neighbours: Neighbours | str, max_contributions: int = 1) -> DiscreteLaplace:
        """Mechanism for a histogram under the relation (Δ₁ from :mod:`dpsynth.neighbours`)."""
        eps = check_epsilon(epsilon)
        l1 = histogram_l1_sensitivity(neighbours, max_contributions)
        return cls(epsilon=eps, l1_sensitivity=l1, scale=laplace_scale(l1, eps))

    def __call__(self, counts: np.ndarray, *, rng: np.random.Generator) -> np.ndarray:
        """Noisy counts (int64), one independent draw per entry, empty cells included."""
        c = np.asarray(counts, dtype=np.int64)
        return c + noise.discrete_laplace(self.scale, c.shape, rng=rng)

    def noise_std(self) -> float:
        """Standard deviation of one draw: sqrt(2p)/(1−p), p = exp(−1/scale)."""
        return discrete_laplace_std(self.scale)

    def tail(self, a: float) -> float:
        """P(|Z| ≥ a) for integer-valued Z: 2pᵗ/(1+p) with t = ⌈a⌉ ≥ 1."""
        t = max(1, math.ceil(a))
        if self.scale == 0:
            return 0.0
        p = math.exp(-1.0 / float(self.scale))
        return min(1.0, 2.0 * p**t / (1.0 + p))

    def upper_tail_mean(self, t: int) -> float:
        """E[Z·1(Z ≥ t)] for an integer t ≥ 1: pᵗ(t(1−p) + p) / ((1+p)(1−p)), summing the geometric tail
        of P(Z = z) = (1−p)/(1+p)·p^|z|."""
        t = max(1, int(t))
        if self.scale == 0:
            return 0.0
        p = math.exp(-1.0 / float(self.scale))
        return p**t * (t * (1.0 - p) + p) / ((1.0 + p) * (1.0 - p))

    def describe(self) -> dict[str, Any]:
        """Release-card entry."""
        return {
            "mechanism": "discrete Laplace (geometric)",
            "guarantee": f"{self.epsilon:g}-DP (pure)",
            "epsilon": self.epsilon,
            "delta": 0.0,
            "l1_sensitivity": self.l1_sensitivity,
            "scale": str(self.scale),
            "noise_std": self.noise_std(),
            "sampler": "exact integer sampler (Canonne, Kamath & Steinke 2020, Alg. 2)",
        }


#: From this σ on, the discrete Gaussian's moments and tails come from the normal law instead of a sum over its pmf,
#: whose 80σ terms would take gigabytes (σ = 10⁷ at ε = 10⁻⁴ with a thousand rows per person); at σ = 10⁴ the
#: midpoint rule's relative error is about 10⁻⁹.
PMF_SUM_MAX_SIGMA = 1e4


@dataclass(frozen=True)
class DiscreteGaussian:
    """Add exact discrete Gaussian noise, P(Z=z) ∝ exp(−z²/(2σ²)), to integer counts.

    Guarantee: (ε, δ)-DP for a histogram under the relation, with σ² the smallest (up to a
    rational rounding upward) such that the exact privacy profile at the worst-case shift is ≤ δ
    (:func:`discrete_gaussian_delta`); and ρ-zCDP with ρ = Δ₂²/(2σ²).
    """

    epsilon: float
    delta: float
    l2_sensitivity: float
    sigma2: Fraction
    neighbours: Neighbours
    #: ``profile``: σ² from the exact privacy profile at (ε, δ); ``zcdp``: σ² = Δ₂²/(2ρ) for a share ρ of
    #: a zCDP budget (:meth:`from_rho`), ε then the CKS20 conversion of that ρ alone
    calibration: str = "profile"

    @classmethod
    def from_rho(cls, rho: float, delta: float, neighbours: Neighbours | str, max_contributions: int = 1
                 ) -> DiscreteGaussian:
        """The discrete Gaussian that is (at most) ρ-zCDP: σ² = Δ₂²/(2ρ), rounded up to a rational.

        Used when the release composes this measurement with others in zCDP; ``epsilon`` is the
        (ε, δ) it gives alone by CKS20 Cor. 13.
        """
        dlt = check_delta(delta)
        if dlt <= 0:
            raise InputError("The Gaussian mechanism needs δ > 0; use the Laplace mechanism for δ = 0.")
        r = float(rho)
        if not (math.isfinite(r) and r > 0):
            raise InputError(f"ρ must be a positive number, got {rho!r}.")
        rel = Neighbours.parse(neighbours)
        d2 = histogram_l2_sensitivity_squared(rel, max_contributions)
        sigma2 = noise.rational_at_least(Fraction(d2) / (2 * Fraction(r)))
        eps = epsilon_from_rho(d2 / (2.0 * float(sigma2)), dlt)
        return cls(epsilon=eps, delta=dlt, l2_sensitivity=histogram_l2_sensitivity(rel, max_contributions),
                   sigma2=sigma2, neighbours=rel, calibration="zcdp")

    @classmethod
    def calibrate(
        cls, epsilon: float, delta: float, neighbours: Neighbours | str, max_contributions: int = 1
    ) -> DiscreteGaussian:
        """Search σ so that the exact discrete-Gaussian profile meets (ε, δ)."""
        eps, dlt = check_epsilon(epsilon), check_delta(delta)
        if dlt <= 0:
            raise InputError("The Gaussian mechanism needs δ > 0; use the Laplace mechanism for δ = 0.")
        rel = Neighbours.parse(neighbours)
        k = max_contributions
        l2 = histogram_l2_sensitivity(rel, k)
        if k == 1:
            prof = lambda s2: discrete_gaussian_delta(eps, s2, rel)  # noqa: E731
        else:
            # several rows per person: the worst shift is not a unit vector; use the zCDP bound (rigorous).
            d2 = histogram_l2_sensitivity_squared(rel, k)
            prof = lambda s2: delta_from_rho(d2 / (2.0 * s2), eps)  # noqa: E731
        lo = 1e-6
        hi = max(1.0, analytic_gaussian_sigma(eps, dlt, l2) ** 2 * 4)
        while prof(hi) > dlt:
            hi *= 2.0
        for _ in range(80):
            mid = math.sqrt(lo * hi)
            if prof(mid) > dlt:
                lo = mid
            else:
                hi = mid
            if hi / lo < 1 + 1e-9:
                break
        sigma2 = noise.rational_at_least(hi)
        return cls(epsilon=eps, delta=dlt, l2_sensitivity=l2, sigma2=sigma2, neighbours=rel)

    @property
    def rho(self) -> float:
        """zCDP parameter ρ = Δ₂²/(2σ²)."""
        return self.l2_sensitivity**2 / (2.0 * float(self.sigma2))

    def __call__(self, counts: np.ndarray, *, rng: np.random.Generator) -> np.ndarray:
        """Noisy counts (int64), one independent draw per entry, empty cells included."""
        c = np.asarray(counts, dtype=np.int64)
        return c + noise.discrete_gaussian(self.sigma2, c.shape, rng=rng)

    def noise_std(self) -> float:
        """Standard deviation of one draw (≤ σ, CKS20 Prop. 19; computed from the pmf, and σ itself from
        :data:`PMF_SUM_MAX_SIGMA` on, where the two differ by a relative e^(−2π²σ²))."""
        s = math.sqrt(float(self.sigma2))
        if s > PMF_SUM_MAX_SIGMA:
            return s
        z = np.arange(-math.ceil(12 * s + 12), math.ceil(12 * s + 12) + 1)
        w = np.exp(-(z.astype(float) ** 2) / (2 * float(self.sigma2)))
        return float(math.sqrt((w * z**2).sum() / w.sum()))

    def tail(self, a: float) -> float:
        """P(|Z| ≥ a), summed from the exact pmf (from :data:`PMF_SUM_MAX_SIGMA` on, the normal tail beyond
        ⌈a⌉ − ½: the sum's midpoint rule, relative error O(σ⁻²))."""
        s = math.sqrt(float(self.sigma2))
        if s > PMF_SUM_MAX_SIGMA:
            k = math.ceil(a)
            return 1.0 if k <= 0 else math.erfc((k - 0.5) / (s * math.sqrt(2.0)))
        z = np.arange(-math.ceil(40 * s + 40), math.ceil(40 * s + 40) + 1)
        w = np.exp(-(z.astype(float) ** 2) / (2 * float(self.sigma2)))
        return float(w[np.abs(z) >= math.ceil(a)].sum() / w.sum())

    def upper_tail_mean(self, t: int) -> float:
        """E[Z·1(Z ≥ t)] for an integer t ≥ 1, summed from the exact pmf (from :data:`PMF_SUM_MAX_SIGMA` on, the
        normal integral beyond t − ½, σ·φ((t − ½)/σ): the sum's midpoint rule)."""
        s = math.sqrt(float(self.sigma2))
        if s > PMF_SUM_MAX_SIGMA:
            x = (max(1, int(t)) - 0.5) / s
            return s * math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
        z = np.arange(-math.ceil(40 * s + 40), math.ceil(40 * s + 40) + 1)
        w = np.exp(-(z.astype(float) ** 2) / (2 * float(self.sigma2)))
        return float((w * z)[z >= max(1, int(t))].sum() / w.sum())

    def describe(self) -> dict[str, Any]:
        """Release-card entry."""
        return {
            "mechanism": "discrete Gaussian",
            "guarantee": f"({self.epsilon:g}, {self.delta:g})-DP; also {self.rho:.6g}-zCDP",
            "epsilon": self.epsilon,
            "delta": self.delta,
            "l2_sensitivity": self.l2_sensitivity,
            "sigma": math.sqrt(float(self.sigma2)),
            "sigma2": str(self.sigma2),
            "noise_std": self.noise_std(),
            "calibration": ("exact discrete-Gaussian privacy profile (Canonne, Kamath & Steinke 2020, Thm 7)"
                            if self.calibration == "profile" else
                            "σ² = Δ₂²/(2ρ) for its share ρ of the release's zCDP budget (Canonne, Kamath & Steinke"
                            " 2020, Thm 4); ε from ρ by their Corollary 13"),
            "sampler": "exact integer sampler (Canonne, Kamath & Steinke 2020, Alg. 3)",
        }


Mechanism = DiscreteLaplace | DiscreteGaussian


def calibrate(
    epsilon: float, delta: float, neighbours: Neighbours | str, max_contributions: int = 1, kind: str = "auto"
) -> Mechanism:
    """Pick the histogram mechanism: Laplace for δ = 0 (or asked), Gaussian for δ > 0 when asked."""
    d = check_delta(delta)
    kind = (kind or "auto").lower()
    if kind not in {"auto", "laplace", "gaussian"}:
        raise InputError(f"Unknown mechanism {kind!r}; use laplace, gaussian or auto.")
    if kind == "gaussian" or (kind == "auto" and d > 0):
        return DiscreteGaussian.calibrate(epsilon, d, neighbours, max_contributions)
    return DiscreteLaplace.calibrate(epsilon, neighbours, max_contributions)


def _dg_pmf(sigma2: float, extra: int = 0) -> tuple[np.ndarray, np.ndarray]:
    s = math.sqrt(sigma2)
    half = math.ceil(14 * s + 14) + extra
    z = np.arange(-half, half + 1)
    logw = -(z.astype(np.float64) ** 2) / (2.0 * sigma2)
    w = np.exp(logw - logw.max())
    return z, w / w.sum()


def discrete_gaussian_delta(epsilon: float, sigma2: float, neighbours: Neighbours | str) -> float:
    """Exact δ(ε) of the discrete Gaussian on a histogram with one row per person.

    add-remove: one cell moves by 1, so δ = Σ_z max(0, g(z) − e^ε g(z−1)) (CKS20 Thm 7).
    replace-one: one cell +1 and another −1; the likelihood ratio depends on w = z₂ − z₁ only,
    whose law is g * g, so δ = Σ_w (g*g)(w) · max(0, 1 − e^{ε − (1 + w)/σ²}).
    The truncation at ±(14σ+14) leaves mass < 1e-40, added to δ to stay conservative.
    """
    rel = Neighbours.parse(neighbours)
    z, g = _dg_pmf(float(sigma2))
    tail_slack = 1e-40
    if rel is Neighbours.ADD_REMOVE:
        loss = (1.0 - 2.0 * z) / (2.0 * sigma2)  # ln g(z)/g(z−1); both directions give the same δ
        return float(np.sum(g * np.maximum(0.0, 1.0 - np.exp(np.minimum(epsilon - loss, 50.0))))) + tail_slack
    gg = np.convolve(g, g)
    w = np.arange(-2 * z[-1], 2 * z[-1] + 1)
    loss = (1.0 + w) / sigma2
    return float(np.sum(gg * np.maximum(0.0, 1.0 - np.exp(np.minimum(epsilon - loss, 50.0))))) + tail_slack


def analytic_gaussian_sigma(epsilon: float, delta: float, l2_sensitivity: float) -> float:
    """Smallest σ for which the continuous Gaussian mechanism is (ε, δ)-DP (Balle & Wang 2018, Thm 8).

    δ(σ) = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ) is decreasing in σ; solved by bisection.
    """
    eps, dlt = check_epsilon(epsilon), check_delta(delta)
    if dlt <= 0:
        raise InputError("The Gaussian mechanism needs δ > 0.")
    d = float(l2_sensitivity)
    from scipy import special  # imported here: the CLI's release path never needs scipy

    def prof(s: float) -> float:
        a, b = d / (2 * s), eps * s / d
        # e^ε Φ(−a−b) in logs: e^ε alone overflows a float above ε ≈ 709, the product never exceeds 1
        return float(special.ndtr(a - b) - math.exp(min(eps + float(special.log_ndtr(-a - b)), 0.0)))

    lo, hi = 1e-8 * d, d
    while prof(hi) > dlt:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if prof(mid) > dlt:
            lo = mid
        else:
            hi = mid
    return hi


def exponential_mechanism(
    scores: np.ndarray, sensitivity: float, epsilon: float, *, rng: np.random.Generator,
    log_base_measure: np.ndarray | None = None,
) -> int:
    """Index r with probability ∝ μ(r)·exp(ε·u(r)/(2Δu)): ε-DP selection (the Algorithmic Foundations of DP slides, McSherry–Talwar).

    ``log_base_measure`` adds ln μ(r) (e.g. interval lengths for a quantile). Probabilities are
    computed in floating point (log-sum-exp); the floating-point caveat of Ilvento (2020) applies
    to this selection step and is stated on release cards that use it.
    """
    eps = check_epsilon(epsilon)
    u = np.asarray(scores, dtype=np.float64)
    logits = eps * u / (2.0 * sensitivity)
    if log_base_measure is not None:
        logits = logits + np.asarray(log_base_measure, dtype=np.float64)
    logits = logits - np.max(logits[np.isfinite(logits)])
    p = np.exp(logits)
    p /= p.sum()
    return int(rng.choice(len(p), p=p))


def randomized_response(bits: np.ndarray, epsilon: float, *, rng: np.random.Generator) -> np.ndarray:
    """Each bit kept with probability e^ε/(1+e^ε), flipped otherwise: ε-local-DP per person (the Algorithmic Foundations of DP slides)."""
    eps = check_epsilon(epsilon)
    b = np.asarray(bits, dtype=bool)
    keep = rng.random(b.shape) < 1.0 / (1.0 + math.exp(-eps))
    return np.where(keep, b, ~b)


def randomized_response_estimate(responses: np.ndarray, epsilon: float) -> float:
    """Unbiased estimate of the true fraction of 1s from randomized responses (post-processing)."""
    p = 1.0 / (1.0 + math.exp(-check_epsilon(epsilon)))
    return float((np.mean(responses) - (1 - p)) / (2 * p - 1))


def laplace_accuracy(n_cells: int, epsilon: float, l1_sensitivity: float, beta: float) -> float:
    """Seed 002, Thm 3.8: with probability ≥ 1 − β no cell is off by more than ln(k/β)·Δ/ε."""
    if not 0 < beta < 1:
        raise InputError(f"β must be in (0, 1), got {beta!r}.")
    return math.log(n_cells / beta) * l1_sensitivity / check_epsilon(epsilon)


def cell_error_bound(mechanism: Mechanism, n_cells: int, beta: float) -> float:
    """Smallest whole a with P(some of n_cells cells off by ≥ a+1) ≤ β (union bound, exact tails)."""
    if not 0 < beta < 1:
        raise InputError(f"β must be in (0, 1), got {beta!r}.")
    a = 0
    step = max(1, int(mechanism.noise_std()))
    while n_cells * mechanism.tail(a + 1) > beta:
        a += step
    while a > 0 and n_cells * mechanism.tail(a) <= beta:
        a -= 1
    return float(a)


def gaussian_sigma2_for(l2_sensitivity_squared: int, epsilon: float, delta: float) -> Fraction:
    """σ² of discrete Gaussian noise making an integer query of squared L2 sensitivity Δ₂² (ε, δ)-DP.

    Through zCDP, for any integer vector query (no assumption on the shape of the worst shift):
    noise N_Z(0, σ²) per entry is ρ-zCDP with ρ = Δ₂²/(2σ²) (Canonne, Kamath & Steinke 2020, Thm 4),
    and ρ-zCDP implies (ε, δ)-DP (CKS20, Corollary 13; :func:`dpsynth.zcdp.rho_from_epsilon`). σ² is
    rounded up to a whole number (more noise, never less; it is large here). Looser than :class:`DiscreteGaussian`'s exact
    profile, which holds for histograms only.
    """
    from dpsynth.zcdp import rho_from_epsilon

    eps, dlt = check_epsilon(epsilon), check_delta(delta)
    if dlt <= 0:
        raise InputError("The Gaussian mechanism needs δ > 0; use the Laplace mechanism for δ = 0.")
    if int(l2_sensitivity_squared) != l2_sensitivity_squared or l2_sensitivity_squared < 1:
        raise InputError(f"The squared L2 sensitivity must be a whole number ≥ 1, got {l2_sensitivity_squared!r}.")
    rho = Fraction(rho_from_epsilon(eps, dlt))  # rounded down by the bisection: σ² errs upward
    return Fraction(math.ceil(Fraction(int(l2_sensitivity_squared)) / (2 * rho)))
