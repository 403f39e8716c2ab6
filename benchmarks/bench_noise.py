"""Throughput of dpsynth's exact integer noise against OpenDP's samplers, measured in one process.

For scales 1 and 10 it times

- ``dpsynth.noise.discrete_laplace`` with a fresh :func:`~dpsynth.noise.secure_rng` (ChaCha20),
- OpenDP 0.16's discrete Laplace: ``dp.m.make_laplace`` on an int64 vector (its CSPRNG),
- ``dpsynth.noise.discrete_gaussian`` (σ = scale) and OpenDP's ``dp.m.make_gaussian`` on int64,

and prints samples/s and the ratio ours / OpenDP. The machine is shared, so each measurement is
the best of several interleaved repetitions and only the ratio is meant to be read.

    python benchmarks/bench_noise.py                 # ours 2·10^6 draws, OpenDP 10^5 per repetition
    python benchmarks/bench_noise.py --ours 4000000 --opendp 200000 --reps 5
"""

from __future__ import annotations

import argparse
import sys
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import opendp.prelude as dp  # noqa: E402

from dpsynth import noise  # noqa: E402

dp.enable_features("contrib")


def _best_rate(fn, n: int, reps: int) -> float:
    """Samples per second of the fastest of ``reps`` runs of ``fn()`` producing ``n`` samples."""
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return n / best


def _ours(sampler, n: int) -> None:
    """One release-style call: a fresh secure generator, then n draws."""
    sampler(n, rng=noise.secure_rng())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ours", type=int, default=2_000_000, help="draws per repetition for dpsynth")
    ap.add_argument("--opendp", type=int, default=100_000, help="draws per repetition for OpenDP")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--scales", type=float, nargs="+", default=[1.0, 10.0])
    a = ap.parse_args(argv)

    zeros = [0] * a.opendp
    vec = dp.vector_domain(dp.atom_domain(T=dp.i64))
    print(f"draws per repetition: dpsynth {a.ours:,}, OpenDP {a.opendp:,}; best of {a.reps}")
    print(f"{'sampler':<18}{'scale':>7}{'dpsynth /s':>14}{'OpenDP /s':>13}{'ratio':>9}")
    ratios = []
    for scale in a.scales:
        lap = dp.m.make_laplace(vec, dp.l1_distance(T=dp.i64), scale=scale)
        gau = dp.m.make_gaussian(vec, dp.l2_distance(T=dp.i64), scale=scale)
        cases = [
            ("discrete Laplace", partial(noise.discrete_laplace, scale), partial(lap, zeros)),
            ("discrete Gaussian", partial(noise.discrete_gaussian, scale * scale), partial(gau, zeros)),
        ]
        for name, sampler, theirs in cases:
            ours = partial(_ours, sampler, a.ours)
            ours(), theirs()  # warm-up
            r_ours = r_theirs = 0.0
            for _ in range(a.reps):  # interleaved, so both see the same machine load
                r_ours = max(r_ours, _best_rate(ours, a.ours, 1))
                r_theirs = max(r_theirs, _best_rate(theirs, a.opendp, 1))
            ratio = r_ours / r_theirs
            ratios.append((name, scale, ratio))
            print(f"{name:<18}{scale:>7g}{r_ours:>14,.0f}{r_theirs:>13,.0f}{ratio:>8.0f}x")
    lap_min = min(r for n, _, r in ratios if n == "discrete Laplace")
    print(f"smallest discrete Laplace ratio: {lap_min:.0f}x (target ≥ 100x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
