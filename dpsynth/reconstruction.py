"""Reconstruction attacks: why answers to many counting queries need noise of order √n.

The Algorithmic Foundations of Differential Privacy slides ("Reconstruction attacks", after
Dinur & Nissim 2003): a population of ``n`` people holds one secret bit each, ``d ∈ {0,1}ⁿ``. An
analyst asks ``m`` random subset counts ``q_j·d`` (how many secrets are 1 among a random half of
the people) and gets answers off by noise. If every answer is within ``o(√n)`` of the truth and
``m`` is a few times ``n``, solving the linear system and rounding recovers all but ``o(n)`` of the
secrets (Theorem 2: "blatant non-privacy"); noise far above √n leaves the analyst at chance.

This module simulates that game (a demonstration: no real data, seeded generators are fine):

- :func:`secret_bits`, :func:`subset_queries` — the population and the random queries;
- :func:`bounded_noise` — the slides' setting, noise uniform on ``[−E, E]``;
- :func:`dp_mechanism` — the noise our mechanisms would add at ε: exact discrete Laplace with the
  L1 sensitivity of the ``m`` counts from :func:`dpsynth.neighbours.subset_counts_l1_sensitivity`
  (``m`` when ε is the total for all queries by basic composition; ``1`` per query otherwise);
- :func:`reconstruct` — least squares (one QR/SVD shared by every noise level), rounded at ½;
  or the L1 linear program of the slides' weeding phase (``method='lp'``; slow, small n only);
- :func:`attack` and :func:`sweep` — the share of secrets recovered, against the noise size.

Noise sizes are compared on one axis: bounded noise of bound ``E`` has standard deviation
``E/√3``; DP noise is placed at the bound ``E = √3·sd`` of bounded noise with the same spread.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from dpsynth.errors import InputError
from dpsynth.mechanisms import DiscreteLaplace, check_epsilon, laplace_scale
from dpsynth.neighbours import Neighbours, subset_counts_l1_sensitivity

Accounting = Literal["total", "per-query"]
Method = Literal["lstsq", "lp"]

#: Largest population and number of queries the demonstration accepts (keeps one point under ~2 s).
MAX_PEOPLE = 2_000
MAX_QUERIES = 10_000
#: The LP decoder is exact but slow (HiGHS took 10-30 s at n = 500, m = 2000 on 2 cores).
MAX_LP_CELLS = 200_000


@dataclass(frozen=True)
class Point:
    """One attack: the noise, its size on the common axis, and the share of secrets recovered."""

    noise: str
    size: float
    noise_std: float
    recovered: float


@dataclass(frozen=True)
class Sweep:
    """Share recovered against bounded-noise size, and where DP noise at ε falls on that axis."""

    n: int
    m: int
    points: list[Point]
    dp: Point | None
    epsilon: float | None
    accounting: Accounting
    dp_scale: float | None

    def at(self, bound: float) -> Point:
        """The bounded-noise point of bound E (one of the swept sizes)."""
        for p in self.points:
            if p.size == float(bound):
                return p
        raise InputError(f"The noise size {bound!r} was not part of this sweep.")

    @property
    def sqrt_n(self) -> float:
        """√n, the order of noise below which reconstruction succeeds (the slides' Theorem 2)."""
        return math.sqrt(self.n)


def secret_bits(n: int, *, rng: np.random.Generator) -> np.ndarray:
    """n independent fair secret bits (int8)."""
    return rng.integers(0, 2, _check_n(n), dtype=np.int8)


def subset_queries(n: int, m: int, *, rng: np.random.Generator) -> np.ndarray:
    """m random subsets of the n people as a 0/1 matrix (m × n, int8): each person in each with probability ½."""
    return rng.integers(0, 2, (_check_m(m), _check_n(n)), dtype=np.int8)


def bounded_noise(bound: float, size: int | tuple[int, ...], *, rng: np.random.Generator) -> np.ndarray:
    """Noise uniform on [−E, E]: every answer within E of the truth (the slides' bounded-error setting)."""
    e = _check_size(bound)
    return rng.uniform(-e, e, size) if e > 0 else np.zeros(size)


def dp_mechanism(
    epsilon: float, m: int, *, accounting: Accounting = "total", neighbours: Neighbours | str = Neighbours.REPLACE_ONE
) -> DiscreteLaplace:
    """The discrete Laplace mechanism our releases would use to answer the m counts.

    ``accounting='total'``: all m answers together are ε-DP (basic composition, each at ε/m), so the
    L1 sensitivity is m and the scale m/ε. ``'per-query'``: each answer alone is ε-DP (scale 1/ε),
    and the m answers together are only mε-DP. Guarantee and sampler: :class:`DiscreteLaplace`.
    """
    eps = check_epsilon(epsilon)
    queries = _check_m(m) if _accounting(accounting) == "total" else 1
    l1 = subset_counts_l1_sensitivity(neighbours, n_queries=queries)
    return DiscreteLaplace(epsilon=eps, l1_sensitivity=l1, scale=laplace_scale(l1, eps))


def reconstruct(queries: np.ndarray, answers: np.ndarray, *, method: Method = "lstsq") -> np.ndarray:
    """The attacker's guess of the secrets from noisy answers: solve ``queries · c ≈ answers``, round at ½.

    ``answers`` may be a matrix (m × k): k noise levels decoded with one factorisation (least squares).
    ``method='lp'`` minimises Σ_j |q_j·c − a_j| over 0 ≤ c ≤ 1 (the slides' weeding LP, with the unknown
    error bound replaced by the total error), one column at a time.
    """
    a = np.asarray(queries, dtype=np.float64)
    y = np.asarray(answers, dtype=np.float64)
    if y.shape[0] != a.shape[0]:
        raise InputError(f"{a.shape[0]} queries but {y.shape[0]} answers.")
    if method == "lstsq":
        c = _least_squares(a, y)
    elif method == "lp":
        c = np.column_stack([_l1_decode(a, col) for col in y.reshape(len(y), -1).T]).reshape((a.shape[1],) + y.shape[1:])
    else:
        raise InputError(f"Unknown reconstruction method {method!r}; use lstsq or lp.")
    return (c > 0.5).astype(np.int8)


def attack(
    n: int, m: int, *, bound: float | None = None, epsilon: float | None = None, accounting: Accounting = "total",
    method: Method = "lstsq", rng: np.random.Generator,
) -> Point:
    """One reconstruction attack with bounded noise of bound ``E`` or with DP noise at ``epsilon`` (exactly one)."""
    if (bound is None) == (epsilon is None):
        raise InputError("Give either a noise bound E or an ε, not both.")
    _check_method(method, n, m)
    secrets = secret_bits(n, rng=rng)
    q = subset_queries(n, m, rng=rng)
    truth = q.astype(np.int64) @ secrets
    if bound is not None:
        noisy, point = truth + bounded_noise(bound, m, rng=rng), _bounded_point(bound, 0.0)
    else:
        mech = dp_mechanism(epsilon, m, accounting=accounting)  # type: ignore[arg-type]
        noisy, point = mech(truth, rng=rng), _dp_point(mech, 0.0)
    share = float(np.mean(reconstruct(q, noisy, method=method) == secrets))
    return Point(point.noise, point.size, point.noise_std, share)


def default_sizes(n: int, count: int = 7) -> np.ndarray:
    """A handful of bounds E spread evenly on a log scale from √n/20 to 20·√n."""
    s = math.sqrt(_check_n(n))
    return np.geomspace(s / 20.0, 20.0 * s, int(count))


def sweep(
    n: int, m: int, sizes: np.ndarray | list[float] | None = None, *, epsilon: float | None = None,
    accounting: Accounting = "total", method: Method = "lstsq", rng: np.random.Generator,
) -> Sweep:
    """The share of secrets recovered at each bounded-noise size, and with DP noise at ``epsilon``.

    One population and one set of queries; each noise level is a fresh draw, and all are decoded
    with one least-squares factorisation, so a sweep costs about one attack.
    """
    _check_method(method, n, m)
    bounds = [_check_size(e) for e in (default_sizes(n) if sizes is None else sizes)]
    secrets = secret_bits(n, rng=rng)
    q = subset_queries(n, m, rng=rng)
    truth = q.astype(np.int64) @ secrets
    columns = [truth + bounded_noise(e, m, rng=rng) for e in bounds]
    mech = None
    if epsilon is not None:
        mech = dp_mechanism(epsilon, m, accounting=accounting)
        columns.append(mech(truth, rng=rng).astype(np.float64))
    guesses = reconstruct(q, np.column_stack(columns), method=method)
    shares = np.mean(guesses == secrets[:, None], axis=0)
    points = [_bounded_point(e, float(s)) for e, s in zip(bounds, shares[: len(bounds)], strict=True)]
    dp = _dp_point(mech, float(shares[-1])) if mech is not None else None
    return Sweep(n=int(n), m=int(m), points=points, dp=dp, epsilon=None if epsilon is None else float(epsilon),
                 accounting=_accounting(accounting), dp_scale=None if mech is None else float(mech.scale))


def _bounded_point(bound: float, share: float) -> Point:
    return Point("bounded", float(bound), float(bound) / math.sqrt(3.0), share)


def _dp_point(mech: DiscreteLaplace, share: float) -> Point:
    sd = mech.noise_std()
    return Point("discrete Laplace", math.sqrt(3.0) * sd, sd, share)


def _least_squares(a: np.ndarray, y: np.ndarray) -> np.ndarray:
    """argmin ‖a·c − y‖₂ by the normal equations (Cholesky of aᵀa; several right-hand sides at once).

    A random 0/1 query matrix with m ≥ n is well conditioned (aᵀa ≈ (m/4)(I + 11ᵀ), condition
    number about n + 1), so the normal equations lose nothing and cost one matrix product; an
    under-determined system (m < n, or a singular aᵀa) falls back to the minimum-norm solution.
    """
    from scipy import linalg

    gram = a.T @ a
    try:
        return linalg.cho_solve(linalg.cho_factor(gram, check_finite=False), a.T @ y, check_finite=False)
    except linalg.LinAlgError:
        return np.linalg.lstsq(a, y, rcond=None)[0]


def _l1_decode(a: np.ndarray, y: np.ndarray) -> np.ndarray:
    from scipy import sparse
    from scipy.optimize import linprog

    m, n = a.shape
    eye = sparse.identity(m, format="csr")
    qs = sparse.csr_matrix(a)
    a_ub = sparse.vstack([sparse.hstack([qs, -eye]), sparse.hstack([-qs, -eye])]).tocsr()
    cost = np.concatenate([np.zeros(n), np.ones(m)])
    bounds = [(0.0, 1.0)] * n + [(0.0, None)] * m
    res = linprog(cost, A_ub=a_ub, b_ub=np.concatenate([y, -y]), bounds=bounds, method="highs")
    if res.status != 0:  # pragma: no cover - the LP is always feasible (t large enough)
        raise InputError(f"The reconstruction LP failed: {res.message}")
    return res.x[:n]


def _check_n(n: int) -> int:
    if isinstance(n, bool) or int(n) != n or not 2 <= n <= MAX_PEOPLE:
        raise InputError(f"The population must be a whole number of people from 2 to {MAX_PEOPLE:,}, got {n!r}.")
    return int(n)


def _check_m(m: int) -> int:
    if isinstance(m, bool) or int(m) != m or not 1 <= m <= MAX_QUERIES:
        raise InputError(f"The number of queries must be a whole number from 1 to {MAX_QUERIES:,}, got {m!r}.")
    return int(m)


def _check_size(bound: float) -> float:
    try:
        e = float(bound)
    except (TypeError, ValueError):
        raise InputError(f"The noise size must be a number, got {bound!r}.") from None
    if not math.isfinite(e) or e < 0:
        raise InputError(f"The noise size must be a finite number ≥ 0, got {bound!r}.")
    return e


def _check_method(method: str, n: int, m: int) -> None:
    _check_n(n)
    _check_m(m)
    if method not in ("lstsq", "lp"):
        raise InputError(f"Unknown reconstruction method {method!r}; use lstsq or lp.")
    if method == "lp" and n * m > MAX_LP_CELLS:
        raise InputError(f"The LP attack is slow: keep people × queries at most {MAX_LP_CELLS:,} (got {n * m:,}),"
                         " or use least squares.")


def _accounting(accounting: str) -> Accounting:
    if accounting not in ("total", "per-query"):
        raise InputError(f"Unknown accounting {accounting!r}; use 'total' (ε for all queries) or 'per-query'.")
    return accounting  # type: ignore[return-value]
