"""Exact integer noise for counts: discrete Laplace and discrete Gaussian, and the random source.

Sampling follows Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy"
(NeurIPS 2020, arXiv:2004.00010; "CKS20"): Algorithm 1 (Bernoulli(exp(−γ)) for rational γ),
Algorithm 2 (discrete Laplace) and Algorithm 3 (discrete Gaussian). The sampling path uses only
integer arithmetic on uniform random integers (``Generator.integers``, which is unbiased), so the
output distribution is exactly the stated one: no floating-point attack (Mironov 2012) applies.
Floating point appears only in the pmf helpers used by tests and the dashboard.

Every draw is vectorised: a batch of candidates is pushed through batched rejection rounds, each
round acting on the still-active indices only. Arithmetic stays in int64 where bounds prove it
cannot overflow and moves to Python integers (object arrays) for the rare values that could.

Speed without leaving exact integer arithmetic: random bits are the cost, so uniform integers below
small bounds come from bytes with rejection, and the index K of Algorithm 1 (the first k whose
Bernoulli(γ/k) fails; the outcome is [K odd]) is often decided several steps at once by inversion
of its exact tail P(K > k) = γ^k/k! over a common integer denominator: precomputed tables for
γ = 1 and for the first round of Algorithm 2 when t ≤ 256, one uniform draw otherwise. A draw that
every candidate makes whatever happens may be rejected by discarding its candidate, which leaves
the survivors i.i.d. from the target.

Releases draw from :func:`secure_rng` (ChaCha20 keyed with 256 bits from the OS CSPRNG); seeded
generators (:func:`seeded_rng`) are for tests and demos and :func:`is_secure` tells them apart.
Not hardened against timing side channels (rejection samplers leak through run time; Jin et al.,
S&P 2022); only the curator observes timing here.
"""

from __future__ import annotations

import math
import numbers
import secrets
from fractions import Fraction

import numpy as np
from randomgen import ChaCha

from dpsynth.errors import InputError

__all__ = [
    "discrete_gaussian",
    "discrete_gaussian_pmf",
    "discrete_laplace",
    "discrete_laplace_pmf",
    "is_secure",
    "rational_at_least",
    "secure_rng",
    "seeded_rng",
]

# int64 arithmetic is used only while every intermediate stays at or below this bound.
_I62 = 1 << 62
_I61 = 1 << 61
# Laplace parameters t, s (scale = t/s) above this go through Python integers.
_LAP_INT64_MAX = 1 << 52
# Largest accepted noise parameters: beyond them samples may not fit in int64.
_MAX_LAPLACE_SCALE = 1 << 40
_MAX_GAUSSIAN_SIGMA2 = 1 << 80
# Per-element factor bound in the Gaussian acceptance (keeps j1*j2 well inside int64).
_J_MAX = 1 << 30
# |A| below this makes A² an int64 in the Gaussian acceptance (A² < 2^62).
_INT_GAMMA_MAX_A = 1 << 31
_DEFAULT_MAX_DENOMINATOR = 1 << 20
# Candidates per rejection round: small enough for the working arrays to stay in cache.
_BATCH = 1 << 18


# --------------------------------------------------------------------------- random source


class _SecureGenerator(np.random.Generator):
    """A Generator whose bit generator is ChaCha20 keyed from ``secrets`` (only made by secure_rng)."""


def secure_rng() -> np.random.Generator:
    """A fresh CSPRNG-backed Generator for releases: ChaCha20 (20 rounds), 256-bit key from the OS.

    The key is set directly (``ChaCha(key=...)``) rather than through ``seed=``, which would pass
    the entropy through numpy's SeedSequence (a 128-bit pool, not a cryptographic KDF).
    """
    return _SecureGenerator(ChaCha(key=secrets.randbits(256), rounds=20))


def seeded_rng(seed: int) -> np.random.Generator:
    """A reproducible Generator (ChaCha20 seeded with ``seed``) for tests and demos, never releases."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise InputError(f"A seed must be a whole number ≥ 0, got {seed!r}.")
    return np.random.Generator(ChaCha(seed=int(seed), rounds=20))


def is_secure(rng: np.random.Generator) -> bool:
    """True only for generators made by :func:`secure_rng` (the class is private to this module).

    Deliberately does not read ``bit_generator.state``, which would copy the key into a dict.
    """
    return type(rng) is _SecureGenerator and type(rng.bit_generator) is ChaCha


# --------------------------------------------------------------------------- rationals


def rational_at_least(x: float | Fraction, max_denominator: int = _DEFAULT_MAX_DENOMINATOR) -> Fraction:
    """The smallest rational ≥ x whose denominator is ≤ ``max_denominator``.

    x itself when its exact value already has a small enough denominator; otherwise the right-hand
    neighbour of x in the Farey sequence of that order, read off the continued fraction of x
    (the semiconvergent bracketing, as in ``Fraction.limit_denominator``). Rounding a noise scale
    (or σ²) up only adds noise, so the privacy guarantee of the unrounded value still holds.
    """
    if isinstance(max_denominator, bool) or not isinstance(max_denominator, numbers.Integral) or max_denominator < 1:
        raise InputError(f"max_denominator must be a whole number ≥ 1, got {max_denominator!r}.")
    f = _exact(x, "value")
    n_max = int(max_denominator)
    if f.denominator <= n_max:
        return f
    p0, q0, p1, q1 = 0, 1, 1, 0
    num, den = f.numerator, f.denominator
    while True:
        a = num // den
        q2 = q0 + a * q1
        if q2 > n_max:
            break
        p0, q0, p1, q1 = p1, q1, p0 + a * p1, q2
        num, den = den, num - a * den
    k = (n_max - q0) // q1
    # The two candidates bracket x and are its Farey neighbours of order n_max; take the upper one.
    return max(Fraction(p0 + k * p1, q0 + k * q1), Fraction(p1, q1))


def _exact(x: float | Fraction, what: str) -> Fraction:
    if isinstance(x, bool) or not isinstance(x, (numbers.Rational, float, np.floating)):
        raise InputError(f"The {what} must be a number, got {x!r}.")
    try:
        return Fraction(x)
    except (ValueError, OverflowError):
        raise InputError(f"The {what} must be finite, got {x!r}.") from None


def _parameter(x: float | Fraction, what: str, upper: int) -> Fraction:
    """A noise parameter as an exact rational: Fractions and ints as given, floats rounded up."""
    f = _exact(x, what)
    if f < 0:
        raise InputError(f"The {what} must be ≥ 0, got {x!r}.")
    if f > upper:
        raise InputError(f"The {what} {x!r} is too large (at most {upper}).")
    if not isinstance(x, numbers.Rational):
        f = rational_at_least(f)
    return f


def _gaussian_sigma2(sigma2: float | Fraction) -> Fraction:
    """σ² as a rational; a float is rounded up with a denominator small enough for int64 arithmetic."""
    f = _exact(sigma2, "σ²")
    if f < 0:
        raise InputError(f"σ² must be ≥ 0, got {sigma2!r}.")
    if f > _MAX_GAUSSIAN_SIGMA2:
        raise InputError(f"σ² = {sigma2!r} is too large (at most 2^80).")
    if isinstance(sigma2, numbers.Rational):
        return f
    # The largest denominator (≤ 2^20) that keeps 2·n·d·t² within int64, so that the acceptance
    # test stays an exact int64 ratio (:func:`_gaussian_batch`); σ² only ever rounds up.
    max_den = _DEFAULT_MAX_DENOMINATOR
    while True:
        g = rational_at_least(f, max_den)
        n, d = g.numerator, g.denominator
        t = math.isqrt(n // d) + 1
        if max_den == 1 or n * 2 * d * t * t <= _I62:
            return g
        max_den >>= 1


def _shape(size: int | tuple[int, ...]) -> tuple[int, ...]:
    shape = (size,) if isinstance(size, numbers.Integral) else tuple(size) if isinstance(size, tuple | list) else (size,)
    if any(isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 0 for k in shape):
        raise InputError(f"A sample size must be a whole number ≥ 0 or a tuple of them, got {size!r}.")
    return tuple(int(k) for k in shape)


def _check_rng(rng: np.random.Generator) -> None:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator (use dpsynth.noise.secure_rng()), got {type(rng).__name__}.")


# --------------------------------------------------------------------------- Bernoulli primitives


def _below(high: int | np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """Uniform integers in [0, high) (high a scalar or a per-element array), exactly.

    A scalar high ≤ 256 uses bytes with rejection (:func:`_uniform_byte`); up to 2^62,
    ``Generator.integers`` (Lemire's unbiased method) in the narrowest dtype; beyond, Python
    integers from concatenated 62-bit words, rejecting values ≥ high.
    """
    if isinstance(high, np.ndarray):
        if high.dtype != object:
            return rng.integers(0, high, dtype=np.int64)
        if size == 0 or max(high) <= _I62:
            return rng.integers(0, high.astype(np.int64), dtype=np.int64)
        highs = high
    else:
        if high <= 256:
            return _uniform_byte(high, size, rng)
        if high <= _I62:
            # The narrowest dtype wastes the fewest random bits (the cipher is the bottleneck).
            return rng.integers(0, high, size, dtype=_narrowest(high))
        highs = np.full(size, high, dtype=object)
    if size == 0:
        return np.zeros(0, dtype=object)
    bits = np.array([h.bit_length() for h in highs], dtype=np.int64)
    words = -(-int(bits.max()) // 62)
    out = np.empty(size, dtype=object)
    pending = np.arange(size)
    while pending.size:
        chunks = rng.integers(0, _I62, (pending.size, words), dtype=np.int64).astype(object)
        acc = np.zeros(pending.size, dtype=object)
        for j in range(words):  # over 62-bit words, not over samples
            acc = (acc << 62) | chunks[:, j]
        acc = acc >> (words * 62 - bits[pending]).astype(object)
        ok = np.asarray(acc < highs[pending], dtype=bool)
        out[pending[ok]] = acc[ok]
        pending = pending[~ok]
    return out


def _narrowest(high: int) -> type[np.integer]:
    """The smallest unsigned dtype holding every value below ``high`` (numpy draws it with fewer bits)."""
    if high <= 1 << 8:
        return np.uint8
    if high <= 1 << 16:
        return np.uint16
    if high <= 1 << 32:
        return np.uint32
    return np.int64


def _bytes(size: int, rng: np.random.Generator) -> np.ndarray:
    """Uniform bytes: the bytes of full-range 64-bit draws (no rejection; the cheapest bits numpy offers)."""
    return rng.integers(0, 1 << 64, -(-size // 8), dtype=np.uint64).view(np.uint8)[:size]


def _words16(size: int, rng: np.random.Generator) -> np.ndarray:
    """Uniform 16-bit words, from full-range 64-bit draws."""
    return rng.integers(0, 1 << 64, -(-size // 4), dtype=np.uint64).view(np.uint16)[:size]


def _valid_bytes(limit: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` i.i.d. uniform bytes in [0, limit): the bytes below ``limit``, in order, of a longer draw.

    Keeping the accepted draws of a rejection sampler in their order leaves them i.i.d.; drawing a
    few more than expected up front avoids one small call per redraw.
    """
    if limit == 256 or size == 0:
        return _bytes(size, rng)
    parts, got = [], 0
    while got < size:
        need = size - got
        b = _bytes(need * 256 // limit + need // 16 + 16, rng)
        b = b[b < limit]
        parts.append(b)
        got += b.size
    return (parts[0] if len(parts) == 1 else np.concatenate(parts))[:size]


def _uniform_byte(high: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """Uniform uint8 in [0, high), high ≤ 256: a byte below the largest multiple of high, mod high."""
    if high & (high - 1) == 0:
        return _bytes(size, rng) & np.uint8(high - 1)
    return _valid_bytes(256 - 256 % high, size, rng) % np.uint8(high)


# K of CKS20 Alg. 1 with γ = 1 (the first k with A_k = 0, A_k ~ Bernoulli(1/k)) has P(K > k) = 1/k!.
# With W uniform on [0, 5!), "K > k  iff  W < 5!/k!" gives K exactly whenever K ≤ 5 (W ≥ 1). W comes
# from one byte b < 240 as b mod 120 (b ≥ 120 is then a fair coin independent of W). Table codes:
# 0/1 = [K is odd], 2 = byte rejected, 3 = K > 5 (the K-loop continues from k = 6).
_K_INV = 5
_K_INV_FACT = math.factorial(_K_INV)


def _k_code(b: int) -> int:
    if b >= 2 * _K_INV_FACT:
        return 2
    w = b % _K_INV_FACT
    if w == 0:
        return 3
    k = 1 + sum(w < _K_INV_FACT // math.factorial(j) for j in range(1, _K_INV + 1))
    return k & 1


_E1_CODES = np.array([_k_code(b) for b in range(256)], dtype=np.uint8)


def _bern_exp1(size: int, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(exp(−1)) (CKS20 Alg. 1 with γ = 1): 1 iff K is odd, K the first k with A_k = 0.

    K ≤ 5 is read off one uniform W ∈ [0, 5!) by inversion of its exact tail P(K > k) = 1/k!
    (the thresholds 5!/k! are integers); the rare K > 5 continue with A_k ~ Bernoulli(1/k).
    """
    code = np.take(_E1_CODES, _valid_bytes(2 * _K_INV_FACT, size, rng))
    out = code == 1
    idx = np.flatnonzero(code == 3)  # K > 5
    if idx.size:
        out[idx] = _k_loop(np.ones(idx.size, dtype=np.uint8), 1, _K_INV + 1, rng)
    return out


def _geometric_e1(size: int, rng: np.random.Generator) -> np.ndarray:
    """V (int32) with P(V ≥ v) = exp(−v): the number of Bernoulli(exp(−1)) successes before a failure."""
    first = _bern_exp1(size, rng)
    v = first.astype(np.int32)
    idx = np.flatnonzero(first)
    rounds = 1
    while idx.size:  # V ≥ rounds for idx; the survivor sets are nested, so the last write is V
        idx = idx[_bern_exp1(idx.size, rng)]
        rounds += 1
        v[idx] = rounds  # (an int beyond int32 would raise, never wrap)
    return v


def _k_loop(num: np.ndarray, den: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Finish CKS20 Alg. 1 for γ = num/den ∈ [0, 1] given that A_1..A_{k−1} were all 1.

    A_j ~ Bernoulli(γ/j) for j = k, k+1, ... until one is 0; returns [that j is odd], i.e. the
    Bernoulli(exp(−γ)) outcome. Up to four steps are decided by one draw, by inversion of the exact
    conditional tail P(K > j | K ≥ k) = γ^(j−k+1)·(k−1)!/j!: over the denominator
    D = den^(L−k+1)·L!/(k−1)!, "K > j  iff  W < num^(j−k+1)·den^(L−j)·L!/j!" for W uniform in [0, D).
    """
    out = np.zeros(num.size, dtype=bool)
    idx = np.arange(num.size)
    while idx.size:
        x = num[idx]
        if x.dtype == object or den * k > 1 << 32:  # one step per draw, exact Python integers if needed
            if x.dtype != object and den * k > _I62:  # Bernoulli(x/(den·k)) = Bernoulli(x/den) AND Bernoulli(1/k)
                cont = (_below(den, idx.size, rng) < x) & (_below(k, idx.size, rng) == 0)
            else:
                cont = np.asarray(_below(den * k, idx.size, rng) < x, dtype=bool)
            if k & 1:
                out[idx[~cont]] = True
            idx = idx[cont]
            k += 1
            continue
        top = k
        while top < k + 3 and den ** (top + 2 - k) * (math.factorial(top + 1) // math.factorial(k - 1)) <= 1 << 32:
            top += 1
        w = _below(den ** (top - k + 1) * (math.factorial(top) // math.factorial(k - 1)), idx.size, rng)
        x = x.astype(np.int64)
        power = x.copy()
        steps = np.zeros(idx.size, dtype=np.int64)  # #{j ∈ [k, top] : K > j}
        for j in range(k, top + 1):  # over levels, not samples; every threshold is ≤ D ≤ 2^32
            steps += w < power * (den ** (top - j) * (math.factorial(top) // math.factorial(j)))
            if j < top:
                power *= x
        done = steps <= top - k
        out[idx[done]] = ((k + steps[done]) & 1) == 1  # K = k + steps
        idx = idx[~done]
        k = top + 1
    return out


def _bern_exp_fraction(num: np.ndarray, den: int, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(exp(−num/den)) per element, for 0 ≤ num ≤ den (CKS20 Alg. 1, γ ∈ [0, 1]).

    A_k ~ Bernoulli(γ/k) for k = 1, 2, ... until one is 0; the result is 1 iff that k is odd.
    """
    cont = np.asarray(_below(den, num.size, rng) < num, dtype=bool)
    out = ~cont  # stopped at k = 1 (odd)
    idx = np.flatnonzero(cont)
    out[idx] = _k_loop(num[idx], den, 2, rng)
    return out


def _bern_exp_int(num: np.ndarray, den: int, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(exp(−num/den)) per element for int64 num ≥ 0 and den ≤ 2^62 (CKS20 Alg. 1, any γ).

    γ = q + r/den: q Bernoulli(exp(−1)) all equal to 1, then Bernoulli(exp(−r/den)) (γ ≤ 1).
    """
    q, r = np.divmod(num, den)
    alive = np.ones(num.size, dtype=bool)
    idx = np.flatnonzero(q > 0)
    c = 0
    while idx.size:
        ok = _bern_exp1(idx.size, rng)
        alive[idx[~ok]] = False
        c += 1
        idx = idx[ok]
        idx = idx[q[idx] > c]
    live = np.flatnonzero(alive)
    if live.size:
        alive[live] = _k_loop(r[live], den, 1, rng)
    return alive


def _bern_exp_product(x1: np.ndarray, d1: int, x2: np.ndarray, d2: int, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(exp(−γ)) with γ = (x1/d1)·(x2/d2) per element (x1, x2 ≥ 0), exactly.

    γ itself needs a denominator d1·d2 that can exceed 64 bits, so it is never formed. With
    j_i = max(1, ⌈x_i/d_i⌉) and m = j1·j2 ≥ γ: exp(−γ) = exp(−γ/m)^m, an AND of m independent
    Bernoulli(exp(−γ/m)), each by CKS20 Alg. 1 (γ/m ≤ 1) in :func:`_bern_exp_ratios`.
    """
    size = x1.size
    j1 = np.maximum((x1 + (d1 - 1)) // d1, 1)
    j2 = np.maximum((x2 + (d2 - 1)) // d2, 1)
    alive = np.empty(size, dtype=bool)
    # Most elements have γ ≤ 1 with j1 = j2 = 1: one factor, scalar bounds (faster draws).
    simple = np.asarray((j1 == 1) & (j2 == 1), dtype=bool)
    alive[simple] = _bern_exp_ratios(x1[simple], d1, x2[simple], d2, rng)
    rest = np.flatnonzero(~simple)
    alive[rest] = True
    j1, j2 = j1[rest], j2[rest]
    h1, h2, m = j1 * d1, j2 * d2, j1 * j2
    idx = np.arange(rest.size)
    done = 0
    while idx.size:
        res = _bern_exp_ratios(x1[rest[idx]], h1[idx], x2[rest[idx]], h2[idx], rng)
        alive[rest[idx[~res]]] = False
        done += 1
        idx = idx[res]
        idx = idx[np.asarray(m[idx] > done, dtype=bool)]
    return alive


def _bern_exp_ratios(x1: np.ndarray, h1: int | np.ndarray, x2: np.ndarray, h2: int | np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(exp(−(x1/h1)·(x2/h2))) for 0 ≤ x_i ≤ h_i (h_i scalar or per element): CKS20 Alg. 1.

    A_k ~ Bernoulli(γ/k) = Bernoulli(x1/(h1·k)) AND Bernoulli(x2/h2), for k = 1, 2, ... until one
    is 0; the result is 1 iff that k is odd.
    """
    out = np.zeros(x1.size, dtype=bool)
    sub = np.arange(x1.size)
    k = 1
    while sub.size:
        a = h1[sub] if isinstance(h1, np.ndarray) else h1
        b = h2[sub] if isinstance(h2, np.ndarray) else h2
        if not isinstance(a, np.ndarray):
            fits = a * k <= _I62
        else:
            fits = a.dtype == object or int(a.max()) * k <= _I62
        if fits:
            cont = np.asarray(_below(a * k, sub.size, rng) < x1[sub], dtype=bool)
        else:  # h1·k would overflow int64: draw the Bernoulli(1/k) factor separately
            cont = np.asarray(_below(a, sub.size, rng) < x1[sub], dtype=bool)
            cont &= rng.integers(0, k, sub.size) == 0
        w = np.flatnonzero(cont)  # the second factor matters only where the first holds
        if isinstance(b, np.ndarray):
            b = b[w]
        cont[w] = np.asarray(_below(b, w.size, rng) < x2[sub[w]], dtype=bool)
        if k & 1:
            out[sub[~cont]] = True
        sub = sub[cont]
        k += 1
    return out


# --------------------------------------------------------------------------- discrete Laplace


def _d_step_codes(t: int) -> tuple[np.ndarray, int]:
    """Table over X ∈ [0, 2^16) for the U and D steps of CKS20 Alg. 2 (2 ≤ t ≤ 256).

    X below the largest multiple of t·M splits into U = X mod t and W = ⌊X/t⌋ mod M, independent
    and uniform. D ~ Bernoulli(exp(−U/t)) by CKS20 Alg. 1: its K (first k with A_k = 0) has
    P(K > k | U) = (U/t)^k/k!, so with M = t^N·N!, "K > k  iff  W < U^k·t^(N−k)·N!/k!" for k ≤ N.
    N is the largest level count with t·M ≤ 2^16 that still accepts ≥ 90% of the X.
    Entry = code | U << 2, codes: 0 = D is 0, 1 = D is 1, 2 = X rejected, 3 = K > N (the K-loop
    continues at k = N + 1).
    """
    n_lev = 1
    while n_lev < 6:
        span = t ** (n_lev + 2) * math.factorial(n_lev + 1)
        if span > 1 << 16 or (1 << 16) % span > (1 << 16) // 10:
            break
        n_lev += 1
    m = t**n_lev * math.factorial(n_lev)
    x = np.arange(1 << 16, dtype=np.int64)
    u, w = x % t, (x // t) % m
    k_minus_1 = sum(
        (w < u**k * t ** (n_lev - k) * (math.factorial(n_lev) // math.factorial(k))).astype(np.int64) for k in range(1, n_lev + 1)
    )
    codes = np.where(k_minus_1 == n_lev, 3, (k_minus_1 + 1) & 1)
    codes[x >= (1 << 16) - (1 << 16) % (t * m)] = 2
    return (codes | u << 2).astype(np.uint16), n_lev


_D_STEP_CACHE: dict[int, tuple[np.ndarray, int]] = {}


def _laplace_batch_bytes(t: int, s: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """CKS20 Alg. 2 for t ≤ 256 from one 16-bit word (U and D) and one byte (first step of V, sign).

    The word goes through :func:`_d_step_codes`; for the survivors, a byte b < 240 gives the first
    Bernoulli(exp(−1)) of V (:data:`_E1_CODES`) and the sign [b ≥ 120]. Each is drawn for every
    candidate at its stage whatever happens, so a rejected word or byte may simply discard its
    candidate (the survivors stay i.i.d. from the target); outcomes the tables leave open continue
    with the K-loop.
    """
    u = None
    if t > 1:
        if t not in _D_STEP_CACHE:
            _D_STEP_CACHE[t] = _d_step_codes(t)
        d_codes, n_lev = _D_STEP_CACHE[t]
        packed = np.take(d_codes, _words16(count, rng))
        more = np.flatnonzero((packed & 3) == 3)
        if more.size:
            done = _k_loop(packed[more] >> 2, t, n_lev + 1, rng)
            packed[more] ^= np.where(done, 2, 3).astype(np.uint16)  # code 3 -> 1 (D = 1) or 0
        u = packed[(packed & 3) == 1] >> 2
        count = u.size
    e = _bytes(count, rng)  # drawn for every D-survivor: a rejected byte discards its candidate
    code_v = np.take(_E1_CODES, e)
    keep = np.flatnonzero(code_v != 2)
    e, code_v = e[keep], code_v[keep]
    if u is not None:
        u = u[keep]
    first = code_v == 1
    more = np.flatnonzero(code_v == 3)
    if more.size:
        first[more] = _k_loop(np.ones(more.size, dtype=np.uint8), 1, _K_INV + 1, rng)
    v = first.astype(np.int32)
    idx = np.flatnonzero(first)
    rounds = 1
    while idx.size:  # V ≥ rounds for idx; the survivor sets are nested, so the last write is V
        idx = idx[_bern_exp1(idx.size, rng)]
        rounds += 1
        v[idx] = rounds
    return _signed(t, s, u, v, e >= _K_INV_FACT)


def _signed(t: int, s: int, u: np.ndarray | None, v: np.ndarray, negative: np.ndarray) -> np.ndarray:
    """Z = ±⌊(U + t·V)/s⌋ of CKS20 Alg. 2, dropping "−0" (so that 0 is not counted twice)."""
    size = v.size
    big = t > _LAP_INT64_MAX or s > _LAP_INT64_MAX
    bound = t * (int(v.max()) + 1) if size else t  # > U + t·V for every element
    if not big and bound <= 1 << 31:
        y = v if u is None else u.astype(np.int32) + np.int32(t) * v
    elif not big and bound <= _I62:
        y = v.astype(np.int64) if u is None else u.astype(np.int64) + t * v.astype(np.int64)
    else:  # huge parameters, or an astronomically long geometric run: exact Python integers
        uo = np.zeros(size, dtype=object) if u is None else u.astype(object)
        y = ((uo + t * v.astype(object)) // s).astype(np.int64)
        s = 1
    if s > 1:
        y //= s
    keep = (y != 0) | ~negative
    return (y * (1 - 2 * negative.view(np.int8)))[keep]


def _laplace_batch(t: int, s: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """Accepted draws of Lap_Z(t/s) from ``count`` candidates (CKS20 Alg. 2, one rejection round).

    Returned as int32 when every value provably fits, else int64.
    """
    if t <= 256:
        return _laplace_batch_bytes(t, s, count, rng)
    u = _below(t, count, rng)
    u = u[_bern_exp_fraction(u, t, rng)]
    v = _geometric_e1(u.size, rng)
    negative = rng.integers(0, 2, u.size, dtype=bool)
    return _signed(t, s, u, v, negative)


def discrete_laplace(scale: Fraction | float, size: int | tuple[int, ...], *, rng: np.random.Generator) -> np.ndarray:
    """Exact draws (int64, shape ``size``) of the discrete Laplace law P(X=x) ∝ exp(−|x|/scale), x ∈ ℤ.

    Guarantee: adding it to an integer query of L1 sensitivity Δ with scale ≥ Δ/ε is ε-DP
    (the geometric mechanism, Ghosh et al. 2009; CKS20 Thm 2). Sampler: CKS20 Algorithm 2 with
    scale = t/s. A float scale is first rounded up with :func:`rational_at_least`; scale 0 gives zeros.
    """
    _check_rng(rng)
    shape = _shape(size)
    f = _parameter(scale, "noise scale", _MAX_LAPLACE_SCALE)
    total = math.prod(shape)
    if f == 0 or total == 0:
        return np.zeros(shape, dtype=np.int64)
    t, s = f.numerator, f.denominator
    return _fill(total, lambda c: _laplace_batch(t, s, c, rng), 5, 3).reshape(shape)


def _fill(total: int, batch, num: int, den: int) -> np.ndarray:
    """Collect ``total`` accepted draws from batches sized by the observed acceptance rate.

    Taking the first accepted candidates of i.i.d. trials leaves them i.i.d. from the target, so
    the batch sizes (start: num/den candidates per draw) affect speed only.
    """
    out = np.empty(total, dtype=np.int64)
    filled = 0
    while filled < total:
        need = total - filled
        tried = min(need * num // den + 64, _BATCH)
        got = batch(tried)
        take = min(got.size, need)
        out[filled : filled + take] = got[:take]
        filled += take
        if got.size:
            num, den = tried * 9, got.size * 8  # oversample by 1/8 at the observed rate
    return out


# --------------------------------------------------------------------------- discrete Gaussian


def _gaussian_batch(n: int, d: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """Accepted draws of N_Z(0, σ² = n/d) from ``count`` candidates (CKS20 Alg. 3, one round).

    Proposal Y ~ Lap_Z(t), t = ⌊σ⌋ + 1; accept with probability exp(−(|Y| − σ²/t)²/(2σ²)).
    With A = |Y|·d·t − n the exponent is A²/(2·n·d·t²): an exact int64 ratio when it fits
    (:func:`_bern_exp_int`), otherwise the product (|A|/n)·(|A|/(2·d·t²)) of two ratios of numbers
    near the size of n (:func:`_bern_exp_product`), in int64 or Python integers.
    """
    t = math.isqrt(n // d) + 1
    y = _laplace_batch(t, 1, count, rng).astype(np.int64, copy=False)
    ay = np.abs(y)
    dt, d2 = d * t, 2 * d * t * t
    accept = np.zeros(y.size, dtype=bool)
    todo = np.arange(y.size)
    # Common case: A² and 2·n·d·t² both fit in int64, so γ is an exact int64 ratio.
    if n * d2 <= _I62 and dt <= _I62:
        a_lim = _INT_GAMMA_MAX_A  # |A| < 2^31 keeps A² < 2^62
        fits = (ay >= -((a_lim - 1 - n) // dt)) & (ay <= (n + a_lim - 1) // dt)
        sel = np.flatnonzero(fits)
        a = ay[sel] * dt - n
        accept[sel] = _bern_exp_int(a * a, n * d2, rng)
        todo = np.flatnonzero(~fits)
    if todo.size:
        # Product form (|A|/n)·(|A|/(2dt²)): int64 while the factors provably fit, else Python integers.
        rest = ay[todo]
        if n <= _I61 and d2 <= _I61:
            a_max = min(_I61, _J_MAX * n, _J_MAX * d2)
            small = rest <= (n + a_max) // dt
        else:
            small = np.zeros(todo.size, dtype=bool)
        if small.any():
            a = np.abs(rest[small] * dt - n)
            accept[todo[small]] = _bern_exp_product(a, n, a, d2, rng)
        if not small.all():  # rare: Python integers
            a = np.abs(rest[~small].astype(object) * dt - n)
            accept[todo[~small]] = _bern_exp_product(a, n, a, d2, rng)
    return y[accept]


def discrete_gaussian(sigma2: Fraction | float, size: int | tuple[int, ...], *, rng: np.random.Generator) -> np.ndarray:
    """Exact draws (int64, shape ``size``) of P(X=x) ∝ exp(−x²/(2σ²)), x ∈ ℤ (CKS20 Algorithm 3).

    Guarantee: added to a query of L2 sensitivity Δ₂ it satisfies ρ-zCDP with ρ = Δ₂²/(2σ²)
    (CKS20 Thm 4). A float σ² is rounded up to a rational whose denominator keeps the arithmetic in
    int64; a Fraction is used exactly. σ² = 0 gives zeros.
    """
    _check_rng(rng)
    shape = _shape(size)
    f = _gaussian_sigma2(sigma2)
    total = math.prod(shape)
    if f == 0 or total == 0:
        return np.zeros(shape, dtype=np.int64)
    n, d = f.numerator, f.denominator
    return _fill(total, lambda c: _gaussian_batch(n, d, c, rng), 2, 1).reshape(shape)


# --------------------------------------------------------------------------- pmfs (floating point)


def discrete_laplace_pmf(x: np.ndarray, scale: Fraction | float) -> np.ndarray:
    """P(X=x) = tanh(1/(2b))·exp(−|x|/b) for the distribution :func:`discrete_laplace` samples."""
    xs = np.abs(np.asarray(x, dtype=np.float64))
    b = float(_parameter(scale, "noise scale", _MAX_LAPLACE_SCALE))
    if b == 0:
        return (xs == 0).astype(np.float64)
    return math.tanh(0.5 / b) * np.exp(-xs / b)


def discrete_gaussian_pmf(x: np.ndarray, sigma2: Fraction | float) -> np.ndarray:
    """P(X=x) = exp(−x²/(2σ²))/Z for the distribution :func:`discrete_gaussian` samples.

    Z = Σ_k exp(−k²/(2σ²)) directly for σ² < 1, else by Poisson summation
    Z = √(2πσ²)·Σ_k exp(−2π²σ²k²) (the k ≠ 0 terms are below 1e-8 relative).
    """
    xs = np.asarray(x, dtype=np.float64)
    s2 = float(_gaussian_sigma2(sigma2))
    if s2 == 0:
        return (xs == 0).astype(np.float64)
    if s2 < 1:
        k = np.arange(-60, 61, dtype=np.float64)
        z = float(np.exp(-k * k / (2 * s2)).sum())
    else:
        k = np.arange(1, 4, dtype=np.float64)
        z = math.sqrt(2 * math.pi * s2) * (1 + 2 * float(np.exp(-2 * math.pi**2 * s2 * k * k).sum()))
    return np.exp(-xs * xs / (2 * s2)) / z
